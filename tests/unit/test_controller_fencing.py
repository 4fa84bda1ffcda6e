"""How a broker fences controller requests by controller epoch and broker epoch."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.core.context import BrokerContext
from brokerd.native.controller_requests import check_controller
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.errors import (
    BrokerNotAvailableError,
    FencedLeaderEpochError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.controller_requests import ControllerHeader, PartitionLeaderState


def broker_context(tmp_path: Path, broker_epoch: int, controller_epoch: int) -> BrokerContext:
    config = BrokerConfig(1, tmp_path, "h:1")
    ctx = BrokerContext(config, ReplicaManager(config), ReplicaFetcherManager(1))
    ctx.broker_epoch = broker_epoch
    ctx.controller_epoch = controller_epoch
    return ctx


def test_current_request_is_accepted_and_raises_the_known_controller_epoch(tmp_path: Path) -> None:
    ctx = broker_context(tmp_path, broker_epoch=10, controller_epoch=3)
    check_controller(ctx, ControllerHeader(2, 4, 10))
    assert ctx.controller_epoch == 4


def test_older_controller_epoch_is_stale(tmp_path: Path) -> None:
    ctx = broker_context(tmp_path, broker_epoch=10, controller_epoch=3)
    with pytest.raises(StaleControllerEpochError):
        check_controller(ctx, ControllerHeader(2, 2, 10))


def test_request_for_an_earlier_incarnation_is_stale(tmp_path: Path) -> None:
    ctx = broker_context(tmp_path, broker_epoch=10, controller_epoch=3)
    with pytest.raises(StaleBrokerEpochError):
        check_controller(ctx, ControllerHeader(2, 3, 9))


@pytest.mark.parametrize("known", [-1, 10])
def test_request_for_a_registration_in_progress_is_retriable(tmp_path: Path, known: int) -> None:
    ctx = broker_context(tmp_path, broker_epoch=known, controller_epoch=3)
    with pytest.raises(BrokerNotAvailableError) as raised:
        check_controller(ctx, ControllerHeader(2, 3, 11))
    assert raised.value.retriable
    assert ctx.controller_epoch == 3, "a refused request changes nothing"


def test_leader_and_isr_at_the_applied_epoch_is_ignored(tmp_path: Path) -> None:
    """It holds nothing new (every decision bumps the epoch) and its ISR and zkVersion
    may be older than what the leader has written since."""
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    partition = manager.ensure_partition(TopicPartition("t", 0), {}, now_ms=0)
    lead = PartitionLeaderState(0, 1, 4, [1, 2, 3], 7, [1, 2, 3])
    manager.apply_leader_and_isr(partition, lead, controller_epoch=2, now_ms=0)
    partition.apply_isr([1, 2], zk_version=8)
    repeated = PartitionLeaderState(0, 1, 4, [1], 7, [1, 2, 3])
    with pytest.raises(StaleControllerEpochError):
        manager.apply_leader_and_isr(partition, repeated, controller_epoch=3, now_ms=0)
    assert (partition.isr, partition.zk_version, partition.is_leader) == ([1, 2], 8, True)
    with pytest.raises(FencedLeaderEpochError):
        manager.apply_leader_and_isr(partition, replace(repeated, leader_epoch=3), 3, now_ms=0)
    manager.apply_leader_and_isr(partition, replace(repeated, leader_epoch=5), 3, now_ms=0)
    assert (partition.leader_epoch, partition.isr, partition.zk_version) == (5, [1], 7)
    manager.close()
