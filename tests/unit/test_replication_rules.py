"""The replication rules with plain values, then a `Partition` and the fetcher's truncation
applying them to a real log in a temporary folder, and the caps on request values."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brokerd.core.produce import MAX_PRODUCE_TIMEOUT_MS, produce_wait_s
from brokerd.log import Log
from brokerd.log.config import LogConfig
from brokerd.replication.partition import Partition
from brokerd.replication.replica_fetcher import truncation_for
from brokerd.replication.rules import (
    AckOutcome,
    FollowerProgress,
    Truncation,
    acks_all_outcome,
    after_fetch,
    fetch_offset_in_range,
    high_watermark,
    lagging_replicas,
    maximal_isr,
    may_join_isr,
    truncation_point,
)
from spark_replica.errors import NotLeaderOrFollowerError, OffsetOutOfRangeError
from spark_replica.records import build_batch
from spark_replica.topics import TopicPartition

LEADER = 1

# --- plain values -------------------------------------------------------------------


def test_fetch_offsets_outside_the_leaders_log_are_out_of_range() -> None:
    assert fetch_offset_in_range(5, 5, 10) and fetch_offset_in_range(10, 5, 10)
    assert not fetch_offset_in_range(4, 5, 10), "below the log start"
    assert not fetch_offset_in_range(11, 5, 10), "past the leader's LEO is not caught up"


def test_a_fetch_from_the_leaders_end_is_caught_up_now() -> None:
    progress = after_fetch(FollowerProgress(), 10, leader_end_offset=10, now_ms=500)
    assert progress == FollowerProgress(10, 500, 10, 500)


def test_reaching_the_previous_fetchs_leader_end_is_caught_up_as_of_then() -> None:
    first = after_fetch(FollowerProgress(), 4, leader_end_offset=10, now_ms=100)
    assert first.last_caught_up_ms == 0, "behind and never caught up"
    second = after_fetch(first, 10, leader_end_offset=15, now_ms=300)
    assert second.last_caught_up_ms == 100 and second.log_end_offset == 10
    third = after_fetch(second, 12, leader_end_offset=20, now_ms=400)
    assert third.last_caught_up_ms == 100, "12 is short of the 15 the leader had at 300"


def test_maximal_isr_adds_pending_members_and_keeps_those_a_shrink_would_drop() -> None:
    assert maximal_isr([1, 2], None) == [1, 2]
    assert maximal_isr([1, 2], [1, 2, 3]) == [1, 2, 3], "expansion being written"
    assert maximal_isr([1, 2, 3], [1]) == [1, 2, 3], "shrink being written"


def test_high_watermark_is_the_smallest_end_over_the_isr_and_never_moves_back() -> None:
    ends = {2: 7, 3: 4}
    assert high_watermark(0, LEADER, 10, ends, [1, 2]) == 7
    assert high_watermark(0, LEADER, 10, ends, [1, 2, 3]) == 4
    assert high_watermark(6, LEADER, 10, ends, [1, 2, 3]) == 6, "never backwards"
    assert high_watermark(0, LEADER, 10, {}, [1, 2]) == 0, "an unknown LEO holds it back"
    assert high_watermark(3, LEADER, 10, {}, [1]) == 10, "the leader alone"


def test_a_follower_joins_once_past_the_hw_and_the_epoch_start() -> None:
    assert may_join_isr(8, high_watermark=8, leader_epoch_start_offset=5)
    assert not may_join_isr(7, high_watermark=8, leader_epoch_start_offset=5)
    assert not may_join_isr(8, high_watermark=8, leader_epoch_start_offset=9)


def test_isr_members_not_caught_up_for_longer_than_the_lag_leave() -> None:
    followers = {2: FollowerProgress(10, 1_000), 3: FollowerProgress(10, 5_000)}
    assert lagging_replicas([1, 2, 3], LEADER, followers, 12_000, 10_000) == [2]
    assert lagging_replicas([1, 2, 3], LEADER, followers, 11_000, 10_000) == []
    assert lagging_replicas([1, 3], LEADER, followers, 99_000, 10_000) == [3]
    assert lagging_replicas([1], LEADER, {}, 99_000, 10_000) == [], "never the leader"


def test_acks_all_commits_only_over_enough_replicas() -> None:
    assert acks_all_outcome(9, 9, 3, 2) is AckOutcome.PENDING
    assert acks_all_outcome(9, 10, 2, 2) is AckOutcome.COMMITTED
    assert acks_all_outcome(9, 10, 1, 2) is AckOutcome.NOT_ENOUGH_REPLICAS


def test_truncation_to_the_answered_epoch_the_follower_knows() -> None:
    # The follower knows epoch 3, which ended at 12 in its log; the leader's ended at 9.
    assert cut(3, 9, (3, 12), 15) == Truncation(9, complete=True)
    assert cut(3, 20, (3, 12), 15) == Truncation(12, complete=True)
    assert cut(3, 20, (3, 20), 15) == Truncation(15, complete=True)


def test_truncation_to_a_smaller_epoch_then_ask_again() -> None:
    # The leader answered epoch 3; the follower's largest epoch <= 3 is 2, ending at 7.
    assert cut(3, 9, (2, 7), 15) == Truncation(7, complete=False)
    assert cut(3, 9, (2, 30), 15) == Truncation(15, complete=False)


def test_an_unknown_epoch_drops_only_the_epochs_the_leader_never_had() -> None:
    # Every record is of an epoch above the answered one: none of them is the leader's.
    assert cut(3, 9, None, 15, tracked_from=0) == Truncation(0, complete=True)
    # Records below 12 carry no tracked epoch: kept up to the leader's end, not emptied.
    assert cut(3, 9, None, 15, tracked_from=12) == Truncation(9, complete=True)
    assert cut(3, 20, None, 15, tracked_from=12) == Truncation(12, complete=True)
    assert cut(3, 20, None, 15, tracked_from=15) == Truncation(15, complete=True)


def test_no_answer_from_the_leader_cuts_at_the_high_watermark() -> None:
    assert cut(-1, -1, (3, 12), 15) == Truncation(5, complete=True)
    assert cut(-1, -1, None, 4) == Truncation(4, complete=True)


def cut(
    leader_epoch: int,
    leader_end_offset: int,
    local_epoch_end: tuple[int, int] | None,
    log_end_offset: int,
    tracked_from: int = 0,
) -> Truncation:
    """Rule 8 for a follower whose high watermark is 5."""
    return truncation_point(
        leader_epoch,
        leader_end_offset,
        local_epoch_end,
        log_end_offset,
        5,
        tracked_from=tracked_from,
    )


# --- a leader Partition applying them -------------------------------------------------


def leader_partition(
    tmp_path: Path, isr: list[int], replicas: list[int], epoch: int = 0
) -> Partition:
    log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    partition = Partition(TopicPartition("t", 0), log, LEADER)
    partition.make_leader(epoch, isr, replicas, zk_version=0, controller_epoch=1, now_ms=0)
    return partition


def append(partition: Partition, count: int) -> None:
    partition.append_as_leader(build_batch([f"v{i}" for i in range(count)]), 1, now_ms=0)


def test_a_replica_joining_the_isr_is_never_behind_the_hw(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, [1], [1, 2])
    append(partition, 5)
    partition.record_follower_fetch(2, 5, now_ms=10)
    assert partition.proposed_isr == [1, 2]
    append(partition, 5)  # while the expansion is being written
    assert partition.high_watermark == 5, "the HW waits for the joining replica"
    partition.apply_isr([1, 2], zk_version=1)
    assert partition.high_watermark <= partition.followers[2].log_end_offset
    partition.log.close()


def test_a_pending_shrink_still_counts_the_members_it_drops(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, [1, 2], [1, 2])
    append(partition, 5)
    partition.record_follower_fetch(2, 5, now_ms=10)
    append(partition, 5)
    assert partition.propose_isr_shrink(now_ms=100_000, lag_max_ms=1_000)
    assert partition.high_watermark == 5
    partition.apply_isr([1], zk_version=1)
    assert partition.high_watermark == 10
    partition.log.close()


def test_a_fetch_offset_past_the_leaders_end_is_never_recorded(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, [1], [1, 2])
    append(partition, 5)
    with pytest.raises(OffsetOutOfRangeError):
        partition.record_follower_fetch(2, 500, now_ms=10)
    assert partition.followers[2].log_end_offset == -1
    assert partition.proposed_isr is None, "not caught up, so not proposed to the ISR"
    partition.log.close()


def test_a_follower_whose_epochs_the_leader_never_had_drops_them(tmp_path: Path) -> None:
    """All 10 records are of epoch 5, begun at offset 0; the leader, asked about epoch 5,
    answers epoch 3 ending at 8: it never had epoch 5, so its [0, 8) are other records.
    Keeping the follower's [0, 8) would leave the two replicas different for good."""
    follower = leader_partition(tmp_path, [LEADER], [LEADER, 2], epoch=5)
    append(follower, 10)
    assert truncation_for(follower, 3, 8) == Truncation(0, complete=True)
    follower.log.close()


def test_a_follower_cuts_where_its_smaller_epoch_ended_then_asks_again(tmp_path: Path) -> None:
    follower = leader_partition(tmp_path, [LEADER], [LEADER, 2], epoch=1)
    append(follower, 5)
    follower.make_leader(4, [LEADER], [LEADER, 2], zk_version=1, controller_epoch=1, now_ms=0)
    append(follower, 5)  # epochs 1 at [0, 5) and 4 at [5, 10); the leader answers 3
    assert truncation_for(follower, 3, 7) == Truncation(5, complete=False)
    follower.log.close()


def test_the_produce_wait_is_capped_and_never_negative() -> None:
    assert produce_wait_s(1_500) == 1.5
    assert produce_wait_s(-5) == 0
    assert produce_wait_s(2**31 - 1) == MAX_PRODUCE_TIMEOUT_MS / 1000


def test_an_acks_all_wait_outlives_a_new_epoch_that_keeps_this_broker_leader(
    tmp_path: Path,
) -> None:
    """The controller takes a dead follower out of the ISR with a new leader epoch; the
    write waiting for that follower commits over the ISR left, as in Kafka."""
    partition = leader_partition(tmp_path, [1, 2, 3], [1, 2, 3], epoch=1)
    append(partition, 5)
    partition.record_follower_fetch(3, 5, now_ms=10)

    async def scenario() -> None:
        wait = asyncio.create_task(partition.wait_for_high_watermark(4, timeout_s=5.0))
        await asyncio.sleep(0)
        partition.make_leader(2, [1, 3], [1, 2, 3], zk_version=1, controller_epoch=2, now_ms=20)
        partition.record_follower_fetch(3, 5, now_ms=30)
        await asyncio.wait_for(wait, 5.0)

    asyncio.run(scenario())
    assert partition.high_watermark == 5
    partition.log.close()


def test_an_acks_all_wait_ends_when_leadership_moves_away_and_back(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, [1, 2], [1, 2], epoch=1)
    append(partition, 5)

    async def scenario() -> None:
        wait = asyncio.create_task(partition.wait_for_high_watermark(4, timeout_s=5.0))
        await asyncio.sleep(0)
        partition.make_follower(2, 2, [1, 2], controller_epoch=2)
        partition.make_leader(3, [1, 2], [1, 2], zk_version=2, controller_epoch=3, now_ms=20)
        await asyncio.wait_for(wait, 5.0)

    with pytest.raises(NotLeaderOrFollowerError):
        asyncio.run(scenario())
    partition.log.close()
