"""Kafka's DeleteRecords rules on a partition replica, with a real log and no processes:
the leader moves its start only up to the high watermark, a follower follows the leader's
start as far as its own log reaches, and the leader's answer waits until its followers'
fetches show they did (rules.py, rule 9)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brokerd.log import Log, LogConfig
from brokerd.replication.partition import Partition
from brokerd.replication.rules import (
    UNKNOWN_OFFSET,
    FollowerProgress,
    follower_log_start,
    isr_low_watermark,
)
from spark_replica.errors import (
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
)
from spark_replica.records import build_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.delete_records import DELETE_TO_HIGH_WATERMARK

TP = TopicPartition("t", 0)
LIVE = frozenset({1, 2})


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
    assert leader.delete_records_before(2) == 2, "what the replicas' starts must reach"
    assert leader.log.log_start_offset == 4, "the start never moves back"
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


def test_a_fetch_shows_the_start_its_last_answer_carried_up_to_the_follower_end() -> None:
    never_answered = FollowerProgress(log_start_offset=UNKNOWN_OFFSET)
    assert follower_log_start(never_answered, 50) == UNKNOWN_OFFSET
    answered = FollowerProgress(log_start_answered=40, log_start_offset=10)
    assert follower_log_start(answered, 50) == 40
    assert follower_log_start(answered, 30) == 30, "a follower's start stops at its log end"
    assert follower_log_start(FollowerProgress(log_start_answered=5, log_start_offset=10), 50) == 10


def test_the_low_watermark_is_the_lowest_start_over_the_isr() -> None:
    followers = {2: FollowerProgress(log_start_offset=7), 3: FollowerProgress(log_start_offset=2)}
    live = {1, 2, 3}
    assert isr_low_watermark(1, 9, followers, [1, 2], live) == 7
    assert isr_low_watermark(1, 9, followers, [1, 2, 3], live) == 2
    assert isr_low_watermark(1, 9, followers, [1, 2, 3], {1, 2}) == 7, "3 is dead"
    assert isr_low_watermark(1, 9, {}, [1, 2], live) == UNKNOWN_OFFSET, "not known yet"


def two_replica_leader(tmp_path: Path, records: int) -> Partition:
    """Leader 1 with follower 2 in its ISR, the follower caught up at `records`."""
    partition = Partition(TP, Log.open(tmp_path / "leader", LogConfig(), now_ms=0), 1)
    partition.make_leader(0, [1, 2], [1, 2], 0, 0, now_ms=0)
    for i in range(records):
        partition.append_as_leader(build_batch([f"v{i}"], timestamps=[0]), acks=1, now_ms=0)
    partition.record_follower_fetch(2, records, now_ms=0)
    partition.note_log_start_answered(2)
    partition.record_follower_log_start(2, records)
    return partition


def test_the_answer_waits_for_the_follower_to_fetch_after_an_answer_with_the_new_start(
    tmp_path: Path,
) -> None:
    leader = two_replica_leader(tmp_path, 10)
    assert leader.low_watermark(LIVE) == 0

    async def scenario() -> int:
        target = leader.delete_records_before(6)
        waiting = asyncio.create_task(leader.wait_for_low_watermark(target, 30.0, lambda: LIVE))
        await asyncio.sleep(0.05)
        leader.record_follower_log_start(2, 10)  # its last answer had no new start yet
        await asyncio.sleep(0.05)
        assert not waiting.done()
        leader.note_log_start_answered(2)  # an answer carries start 6
        leader.record_follower_log_start(2, 10)  # the follower fetches again
        return await asyncio.wait_for(waiting, 5.0)

    assert asyncio.run(scenario()) == 6


def test_the_answer_times_out_while_a_follower_in_the_isr_does_not_fetch(tmp_path: Path) -> None:
    leader = two_replica_leader(tmp_path, 10)
    target = leader.delete_records_before(6)
    with pytest.raises(RequestTimedOutError, match="ISR \\[1, 2\\]"):
        asyncio.run(leader.wait_for_low_watermark(target, 0.1, lambda: LIVE))
    assert leader.log.log_start_offset == 6, "the leader's start moved all the same"


def test_a_member_that_dies_while_the_request_waits_is_passed_over(tmp_path: Path) -> None:
    leader = two_replica_leader(tmp_path, 10)
    live = set(LIVE)

    async def scenario() -> int:
        target = leader.delete_records_before(6)
        waiting = asyncio.create_task(leader.wait_for_low_watermark(target, 30.0, lambda: live))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        live.discard(2)  # the controller's metadata no longer names it
        return await asyncio.wait_for(waiting, 5.0)

    assert asyncio.run(scenario()) == 6
