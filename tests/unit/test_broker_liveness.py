"""Crash detection: which registrations count as live once a process is found dead, and
the watcher that finds it (real loopback sockets in this process, no brokers)."""

from __future__ import annotations

import asyncio
import socket

from brokerd.controller.context import ControllerContext, LiveBroker
from brokerd.controller.liveness import BrokerLiveness, WatchedBroker, connect
from spark_replica.zk import znodes


def live(broker_id: int, epoch: int) -> LiveBroker:
    return LiveBroker(znodes.BrokerRegistration(broker_id, "h", 9000 + broker_id, "0"), epoch)


def context(*brokers: LiveBroker) -> ControllerContext:
    ctx = ControllerContext(broker_id=1, epoch=7, epoch_zk_version=3)
    ctx.live_brokers = {b.registration.broker_id: b for b in brokers}
    return ctx


def test_a_fenced_registration_is_not_live_while_its_znode_remains() -> None:
    ctx = context(live(1, 10), live(2, 20))
    assert ctx.fence(2, 20)
    assert ctx.unfenced({1: live(1, 10), 2: live(2, 20)}) == {1: live(1, 10)}
    assert ctx.unfenced({1: live(1, 10), 2: live(2, 20)}) == {1: live(1, 10)}


def test_a_broker_that_registers_anew_is_live_and_its_fence_forgotten() -> None:
    ctx = context(live(1, 10), live(2, 20))
    ctx.fence(2, 20)
    assert ctx.unfenced({1: live(1, 10), 2: live(2, 35)}) == {1: live(1, 10), 2: live(2, 35)}
    assert ctx.fenced == {}


def test_a_fence_goes_with_its_znode() -> None:
    ctx = context(live(1, 10), live(2, 20))
    ctx.fence(2, 20)
    assert ctx.unfenced({1: live(1, 10)}) == {1: live(1, 10)}
    assert ctx.fenced == {}


def test_a_report_about_another_registration_fences_nothing() -> None:
    ctx = context(live(1, 10), live(2, 35))
    assert not ctx.fence(2, 20)  # the incarnation that died was replaced already
    assert not ctx.fence(3, 30)  # never known, or gone already
    assert ctx.fenced == {}


def listening() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


async def watch_until(server: socket.socket, stop: bool, wait_s: float) -> list[WatchedBroker]:
    """Watch the server's port, close the server if `stop`, and collect reports."""
    reports: list[WatchedBroker] = []
    port = server.getsockname()[1]
    liveness = BrokerLiveness(reports.append)
    liveness.watch([WatchedBroker(2, "127.0.0.1", port, 20)])
    try:
        await asyncio.sleep(0.2)
        if stop:
            server.close()
        deadline = asyncio.get_running_loop().time() + wait_s
        while not reports and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
    finally:
        await liveness.close()
        server.close()
    return reports


def test_a_closed_port_is_reported_once() -> None:
    reports = asyncio.run(watch_until(listening(), stop=True, wait_s=5))
    assert reports == [WatchedBroker(2, "127.0.0.1", reports[0].port, 20)]


def test_a_port_that_accepts_but_never_answers_is_not_reported() -> None:
    # A paused process: its kernel still accepts connections (the backlog) and keeps them.
    assert asyncio.run(watch_until(listening(), stop=False, wait_s=1)) == []


def test_connect_tells_refused_from_accepted() -> None:
    async def attempt(port: int) -> str:
        try:
            sock = await connect("127.0.0.1", port)
        except ConnectionRefusedError:
            return "refused"
        sock.close()
        return "accepted"

    server = listening()
    port = server.getsockname()[1]
    try:
        assert asyncio.run(attempt(port)) == "accepted"
    finally:
        server.close()
    assert asyncio.run(attempt(port)) == "refused"
