"""A controller that stops, on a real ZooKeeper: a ControlledShutdown request it can no
longer serve is refused at once (NOT_CONTROLLER), so the asking broker looks for the next
controller instead of waiting out its request timeout. When a whole cluster is stopped at
once (`replog down`), the controller's broker stops its controller before its listener,
and the others' requests used to wait there, three attempts of ten seconds each."""

from __future__ import annotations

import asyncio

import pytest
from kazoo.client import KazooClient

from brokerd.controller.controller import Controller
from spark_replica.errors import NotControllerError

pytestmark = pytest.mark.slow

ANSWER_TIMEOUT_S = 5.0
ELECTION_TIMEOUT_S = 15.0


async def active_controller(zk: KazooClient) -> Controller:
    controller = Controller(1, zk)
    controller.start()
    async with asyncio.timeout(ELECTION_TIMEOUT_S):
        while not controller.is_active:
            await asyncio.sleep(0.05)
    return controller


def test_a_stopped_controller_refuses_controlled_shutdown_at_once(zk: KazooClient) -> None:
    async def scenario() -> None:
        controller = await active_controller(zk)
        await controller.stop()
        assert not controller.is_active
        with pytest.raises(NotControllerError):
            await asyncio.wait_for(controller.controlled_shutdown(2, 0), ANSWER_TIMEOUT_S)

    asyncio.run(scenario())


def test_a_request_waiting_when_the_controller_stops_is_refused(zk: KazooClient) -> None:
    async def scenario() -> None:
        controller = await active_controller(zk)
        # Queued before the controller's event loop gets to it: stop() comes first.
        waiting = asyncio.ensure_future(controller.controlled_shutdown(2, 0))
        await asyncio.sleep(0)
        await controller.stop()
        with pytest.raises(NotControllerError):
            await asyncio.wait_for(waiting, ANSWER_TIMEOUT_S)

    asyncio.run(scenario())
