"""Kafka's DeleteRecords rules on a partition replica, with a real log and no processes:
the leader moves its start only up to the high watermark, a follower follows the leader's
start as far as its own log reaches."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log import Log, LogConfig
from brokerd.replication.partition import Partition
from spark_replica.errors import NotLeaderOrFollowerError, OffsetOutOfRangeError
from spark_replica.records import build_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.delete_records import DELETE_TO_HIGH_WATERMARK

TP = TopicPartition("t", 0)


def leader_with(tmp_path: Path, records: int) -> Partition:
    """A sole-replica leader holding `records` records, all committed (HW = log end)."""
    partition = Partition(TP, Log.open(tmp_path / "leader", LogConfig(), now_ms=0), 1)
    partition.make_leader(0, [1], [1], 0, 0, now_ms=0)
    for i in range(records):
        partition.append_as_leader(build_batch([f"v{i}"], timestamps=[0]), acks=1, now_ms=0)
    return partition


def follower_of(tmp_path: Path, leader: Partition, up_to: int) -> Partition:
    """A follower that has copied the leader's records below `up_to`."""
    follower = Partition(TP, Log.open(tmp_path / "follower", LogConfig(), now_ms=0), 2)
    follower.make_follower(1, 0, [1, 2], 0)
    follower.append_as_follower(leader.log.read(0, 1 << 20, max_offset=up_to), 0, now_ms=0)
    return follower


def test_the_leader_deletes_up_to_the_high_watermark(tmp_path: Path) -> None:
    leader = leader_with(tmp_path, 10)
    assert leader.delete_records_before(4) == 4
    assert leader.delete_records_before(2) == 4, "the start never moves back"
    assert leader.delete_records_before(DELETE_TO_HIGH_WATERMARK) == 10
    assert leader.log.log_start_offset == leader.high_watermark == 10


@pytest.mark.parametrize("offset", [11, -2])
def test_offsets_past_the_high_watermark_or_negative_are_out_of_range(
    tmp_path: Path, offset: int
) -> None:
    leader = leader_with(tmp_path, 10)
    with pytest.raises(OffsetOutOfRangeError, match="high watermark 10"):
        leader.delete_records_before(offset)
    assert leader.log.log_start_offset == 0


def test_a_follower_refuses_delete_records(tmp_path: Path) -> None:
    follower = follower_of(tmp_path, leader_with(tmp_path, 3), 3)
    with pytest.raises(NotLeaderOrFollowerError):
        follower.delete_records_before(1)


def test_a_follower_follows_the_leader_start_as_far_as_its_log_reaches(tmp_path: Path) -> None:
    leader = leader_with(tmp_path, 10)
    follower = follower_of(tmp_path, leader, 6)
    leader.delete_records_before(4)
    follower.follow_leader_log_start(leader.log.log_start_offset)
    assert follower.log.log_start_offset == 4
    follower.follow_leader_log_start(-1)  # an answer that carries no start changes nothing
    assert follower.log.log_start_offset == 4
    leader.delete_records_before(8)
    follower.follow_leader_log_start(leader.log.log_start_offset)
    assert follower.log.log_start_offset == follower.high_watermark == 6
