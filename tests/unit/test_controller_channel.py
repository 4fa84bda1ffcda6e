"""The controller channel's deadline for a call someone awaits.

A dead broker whose registration has not yet expired still has a sender, and the state
updates queued to it are retried until the controller removes that sender. A call queued
behind them must still end at its deadline: the controller's event task may be the one
awaiting it, and only that task removes senders.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from brokerd.controller import channel as channel_module
from brokerd.controller.channel import ControllerChannel
from brokerd.controller.context import ControllerContext, LiveBroker
from spark_replica.wire.native.controller_requests import ControllerHeader, StopReplicaRequest
from spark_replica.zk.znodes import BrokerRegistration


def refused_port() -> int:
    """A port nothing listens on: bound and closed, so connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_call_behind_retried_state_updates_ends_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(channel_module, "SEND_DEADLINE_S", 0.5)
    ctx = ControllerContext(broker_id=1, epoch=2, epoch_zk_version=0)
    ctx.live_brokers[2] = LiveBroker(BrokerRegistration(2, "127.0.0.1", refused_port()), 7)
    header = ControllerHeader(1, 2, 7)

    async def scenario() -> tuple[bool, bool]:
        channel = ControllerChannel("controller-1")
        try:
            # A state update with no deadline, as a failover's LeaderAndIsr to every broker.
            channel._sender(ctx, 2).enqueue([StopReplicaRequest(header, False, [])])
            first = channel.call(ctx, 2, StopReplicaRequest(header, True, []))
            second = channel.call(ctx, 2, StopReplicaRequest(header, True, []))
            answers = await asyncio.wait_for(asyncio.gather(first, second), timeout=10)
            return answers[0], answers[1]
        finally:
            await channel.close()

    assert asyncio.run(scenario()) == (False, False)
