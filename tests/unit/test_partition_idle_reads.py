"""Reads at the log end, the answer of most partitions of an idle fetch, are answered
without reading the log; every refusal a read of the log would give is still given."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.replication.partition import Partition
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.errors import InvalidFetchSizeError, OffsetOutOfRangeError
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.controller_requests import PartitionLeaderState

LOG_START = 100


@pytest.fixture
def restarted_leader(tmp_path: Path) -> Iterator[Partition]:
    """A leader whose log restarted at LOG_START as a follower, its HW left below it."""
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    partition = manager.ensure_partition(TopicPartition("t", 0), {}, now_ms=0)
    manager.apply_leader_and_isr(partition, PartitionLeaderState(0, 2, 1, [2], 0, [1, 2]), 1, 0)
    partition.truncate_fully_and_start_at(LOG_START)
    manager.apply_leader_and_isr(partition, PartitionLeaderState(0, 1, 2, [1, 2], 1, [1, 2]), 1, 0)
    yield partition
    manager.close()


@pytest.mark.parametrize("for_replica", [True, False])
def test_a_read_at_the_log_end_is_empty(restarted_leader: Partition, for_replica: bool) -> None:
    records = restarted_leader.read(
        LOG_START, 1024, current_leader_epoch=2, for_replica=for_replica
    )
    assert records == b""


@pytest.mark.parametrize("offset", [LOG_START - 1, LOG_START + 1])
def test_a_read_outside_the_log_is_refused(restarted_leader: Partition, offset: int) -> None:
    with pytest.raises(OffsetOutOfRangeError):
        restarted_leader.read(offset, 1024, current_leader_epoch=2, for_replica=False)


def test_a_consumer_at_a_high_watermark_below_the_log_start_is_refused(
    restarted_leader: Partition,
) -> None:
    assert restarted_leader.high_watermark < LOG_START
    with pytest.raises(OffsetOutOfRangeError):
        restarted_leader.read(
            restarted_leader.high_watermark, 1024, current_leader_epoch=2, for_replica=False
        )


def test_a_read_of_no_bytes_at_the_log_end_is_refused(restarted_leader: Partition) -> None:
    with pytest.raises(InvalidFetchSizeError):
        restarted_leader.read(LOG_START, 0, current_leader_epoch=2, for_replica=True)
