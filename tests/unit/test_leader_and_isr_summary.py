"""A LeaderAndIsr is logged as one INFO line, whatever the number of its partitions.

With 10,000 partitions a line per partition cost more than applying them; the roles
each partition took are counted into the one line instead (the per-partition lines are
DEBUG).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.core.context import BrokerContext
from brokerd.native.controller_requests import handle_leader_and_isr
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.tools.launcher.brokers import free_port
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionLeaderState,
    TopicLeaderStates,
)
from spark_replica.wire.native.metadata import BrokerInfo

BROKER_EPOCH = 10
CONTROLLER_EPOCH = 4
NO_LEADER = -1


def state(partition: int, leader: int, epoch: int) -> PartitionLeaderState:
    return PartitionLeaderState(partition, leader, epoch, [1, 2, 3], epoch, [1, 2, 3])


def request(states: list[PartitionLeaderState]) -> LeaderAndIsrRequest:
    # Broker 2's address is a closed port: its fetcher only retries until stopped.
    live = [BrokerInfo(1, "127.0.0.1", free_port()), BrokerInfo(2, "127.0.0.1", free_port())]
    header = ControllerHeader(3, CONTROLLER_EPOCH, BROKER_EPOCH)
    return LeaderAndIsrRequest(header, False, [TopicLeaderStates("t", states)], live)


def apply_all(tmp_path: Path, requests: list[LeaderAndIsrRequest]) -> list[LeaderAndIsrResponse]:
    config = BrokerConfig(1, tmp_path, "h:1")
    ctx = BrokerContext(config, ReplicaManager(config), ReplicaFetcherManager(1))
    ctx.broker_epoch = BROKER_EPOCH

    async def scenario() -> list[LeaderAndIsrResponse]:
        try:
            return [await handle_leader_and_isr(ctx, r) for r in requests]
        finally:
            await ctx.fetchers.stop()

    try:
        return asyncio.run(scenario())
    finally:
        ctx.replicas.close()


def info_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What LeaderAndIsr logged at INFO and above, in the request or for a partition."""
    names = ("brokerd.leader_and_isr", "brokerd.partition")
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and r.name in names]


def test_one_info_line_counts_the_roles_of_every_partition(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    first = request(
        [state(0, 1, 1), state(1, 1, 1), *(state(p, 2, 1) for p in (2, 3, 4)), state(5, -1, 1)]
    )
    # Partition 0 again at the epoch applied (ignored), partition 1 led on at a new epoch.
    second = request([state(0, 1, 1), state(1, 1, 2), state(2, 1, 2)])
    responses = apply_all(tmp_path, [first, second])

    assert info_lines(caplog) == [
        "LeaderAndIsr from controller 3 (epoch 4): leading 2 (2 newly), following 3, "
        "without a live leader 1, refused 0",
        "LeaderAndIsr from controller 3 (epoch 4): leading 2 (1 newly), following 0, "
        "without a live leader 0, refused 1",
    ]
    refused = [p.partition for t in responses[1].topics for p in t.partitions if p.error_code]
    assert refused == [0]


def test_each_partition_is_still_logged_at_debug(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="brokerd.partition")
    apply_all(tmp_path, [request([state(0, 1, 1), state(1, 2, 1)])])
    debug = [r.getMessage() for r in caplog.records if r.name == "brokerd.partition"]
    assert debug == ["t-0: leader at epoch 1, isr [1, 2, 3]", "t-1: follower of 2 at epoch 1"]
