"""The idempotent-producer verdicts, the window of five batches, epochs, and replay."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from brokerd.log import AppendInfo, Log, LogConfig
from brokerd.replication.partition import Partition
from brokerd.replication.producer_state import (
    MAX_BATCHES_PER_PRODUCER,
    MAX_SEQUENCE,
    Outcome,
    ProducerStateManager,
    increment_sequence,
)
from spark_replica.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    ProtocolError,
)
from spark_replica.records import BatchHeader, build_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_LEADER

PID = 7


def header(
    base_sequence: int,
    record_count: int = 1,
    *,
    producer_id: int = PID,
    epoch: int = 0,
    base_offset: int = 0,
) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset,
        batch_length=100,
        leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=record_count - 1,
        first_timestamp=0,
        max_timestamp=0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=base_sequence,
        record_count=record_count,
    )


class Leader:
    """A producer state plus a log end offset: appends what the state lets through."""

    def __init__(self) -> None:
        self.state = ProducerStateManager()
        self.end = 0
        self.log: list[BatchHeader] = []

    def send(self, h: BatchHeader) -> tuple[Outcome, int]:
        verdict = self.state.check(h)
        if verdict.outcome is Outcome.DUPLICATE:
            return verdict.outcome, verdict.base_offset
        if verdict.outcome is not Outcome.APPEND:
            return verdict.outcome, -1
        base = self.end
        self.state.record(h, base)
        self.log.append(
            BatchHeader(**{**_fields(h), "base_offset": base}),
        )
        self.end += h.record_count
        return verdict.outcome, base


def _fields(h: BatchHeader) -> dict[str, int]:
    return {name: getattr(h, name) for name in BatchHeader.__dataclass_fields__}


def test_non_idempotent_batches_always_append() -> None:
    state = ProducerStateManager()
    h = header(-1, producer_id=-1, epoch=-1)
    state.record(h, 0)
    assert state.check(h).outcome is Outcome.APPEND
    assert state.snapshot() == {}


def test_first_batch_of_unknown_producer_must_start_at_zero() -> None:
    state = ProducerStateManager()
    assert state.check(header(0)).outcome is Outcome.APPEND
    verdict = state.check(header(5))
    assert verdict.outcome is Outcome.UNKNOWN_PRODUCER
    assert "sequence 5" in verdict.reason


@pytest.mark.parametrize(("epoch", "sequence"), [(-1, 0), (0, -1), (-3, -3)])
def test_producer_id_without_epoch_or_sequence_is_invalid(epoch: int, sequence: int) -> None:
    assert ProducerStateManager().check(header(sequence, epoch=epoch)).outcome is Outcome.INVALID


def test_in_order_batches_append_and_retry_is_a_duplicate_with_original_offsets() -> None:
    leader = Leader()
    assert leader.send(header(0, 3)) == (Outcome.APPEND, 0)
    assert leader.send(header(3, 2)) == (Outcome.APPEND, 3)
    assert leader.send(header(0, 3)) == (Outcome.DUPLICATE, 0)
    assert leader.send(header(3, 2)) == (Outcome.DUPLICATE, 3)
    verdict = leader.state.check(header(3, 2))
    assert (verdict.base_offset, verdict.last_offset) == (3, 4)
    assert leader.end == 5


def test_gap_and_overlap_are_out_of_order() -> None:
    leader = Leader()
    leader.send(header(0, 3))
    gap = leader.state.check(header(4))
    assert gap.outcome is Outcome.OUT_OF_ORDER
    assert "expected sequence 3, got 4" in gap.reason
    # Same base sequence, different length: not the batch that was appended.
    assert leader.state.check(header(0, 2)).outcome is Outcome.OUT_OF_ORDER
    assert leader.state.check(header(1, 2)).outcome is Outcome.OUT_OF_ORDER


def test_only_the_last_five_batches_are_answered_with_their_offsets() -> None:
    leader = Leader()
    for seq in range(MAX_BATCHES_PER_PRODUCER + 2):
        leader.send(header(seq))
    # Older ones are still known to be in the log, only not where: never appended again.
    assert leader.state.check(header(0)).outcome is Outcome.OLD_DUPLICATE
    assert leader.state.check(header(1)).outcome is Outcome.OLD_DUPLICATE
    for seq in range(2, MAX_BATCHES_PER_PRODUCER + 2):
        assert leader.send(header(seq)) == (Outcome.DUPLICATE, seq)
    assert len(leader.state.snapshot()[PID][1]) == MAX_BATCHES_PER_PRODUCER


def test_older_epoch_is_fenced_and_newer_epoch_restarts_at_zero() -> None:
    leader = Leader()
    leader.send(header(0, epoch=1))
    leader.send(header(1, epoch=1))
    assert leader.state.check(header(2, epoch=0)).outcome is Outcome.FENCED
    assert leader.state.check(header(0, epoch=0)).outcome is Outcome.FENCED
    bad = leader.state.check(header(2, epoch=2))
    assert bad.outcome is Outcome.OUT_OF_ORDER
    assert "must start at sequence 0" in bad.reason
    assert leader.send(header(0, epoch=2)) == (Outcome.APPEND, 2)
    # The new epoch has its own window: epoch 1's batches are forgotten.
    assert leader.state.snapshot()[PID][0] == 2
    assert len(leader.state.snapshot()[PID][1]) == 1
    assert leader.state.check(header(1, epoch=1)).outcome is Outcome.FENCED
    assert leader.send(header(1, epoch=2)) == (Outcome.APPEND, 3)


def test_producers_are_independent() -> None:
    leader = Leader()
    leader.send(header(0, producer_id=1))
    leader.send(header(0, producer_id=2))
    assert leader.send(header(1, producer_id=1)) == (Outcome.APPEND, 2)
    assert leader.send(header(0, producer_id=2)) == (Outcome.DUPLICATE, 1)


def test_sequences_wrap_at_the_int32_maximum() -> None:
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1
    state = ProducerStateManager()
    state.record(header(MAX_SEQUENCE - 1, 2, epoch=3), 10)  # last sequence MAX_SEQUENCE
    assert state.check(header(MAX_SEQUENCE - 1, 2, epoch=3)).outcome is Outcome.DUPLICATE
    assert state.check(header(0, epoch=3)).outcome is Outcome.APPEND
    state.record(header(MAX_SEQUENCE, 3, epoch=3), 12)  # crosses the wrap: 2**31-1, 0, 1
    assert state.snapshot()[PID][1][-1].last_sequence == 1
    assert state.check(header(2, epoch=3)).outcome is Outcome.APPEND
    assert state.check(header(MAX_SEQUENCE, 3, epoch=3)).outcome is Outcome.DUPLICATE


def test_rebuild_from_the_log_equals_the_incremental_state() -> None:
    rng = random.Random(42)
    leader = Leader()
    next_seq = {pid: 0 for pid in range(4)}
    epochs = {pid: 0 for pid in range(4)}
    for _ in range(300):
        pid = rng.randrange(-1, 4)
        if pid == -1:
            leader.send(header(-1, rng.randint(1, 3), producer_id=-1, epoch=-1))
            continue
        if rng.random() < 0.05:
            epochs[pid] += 1
            next_seq[pid] = 0
        count = rng.randint(1, 4)
        if rng.random() < 0.2 and next_seq[pid]:
            leader.send(header(max(0, next_seq[pid] - count), count, producer_id=pid))
            continue
        outcome, _ = leader.send(header(next_seq[pid], count, producer_id=pid, epoch=epochs[pid]))
        assert outcome is Outcome.APPEND
        next_seq[pid] += count
    replayed = ProducerStateManager()
    replayed.rebuild((h, None) for h in leader.log)
    assert replayed.snapshot() == leader.state.snapshot()
    assert set(replayed.snapshot()) == {0, 1, 2, 3}


def test_rebuild_forgets_what_the_headers_do_not_hold() -> None:
    state = ProducerStateManager()
    state.record(header(0, producer_id=1), 0)
    state.rebuild([(header(0, producer_id=2, base_offset=5), None)])
    snapshot = state.snapshot()
    assert set(snapshot) == {2}
    assert snapshot[2][1][0].base_offset == 5


# ------------------------------------------------------------------ on a Partition with a real log


def open_partition(directory: Path) -> Partition:
    log = Log.open(directory, LogConfig(segment_bytes=2_000), now_ms=0)
    partition = Partition(TopicPartition("t", 0), log, local_broker_id=1)
    partition.make_leader(0, [1], [1], 0, 0, now_ms=0)
    return partition


def produce(partition: Partition, seq: int, *, epoch: int = 0, count: int = 1) -> AppendInfo:
    batch = build_batch(
        [f"v{seq + i}" for i in range(count)],
        timestamps=[1] * count,
        producer_id=PID,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    return partition.append_as_leader(batch, ACKS_LEADER, now_ms=1)


def test_leader_answers_a_duplicate_with_its_offsets_and_refuses_bad_batches(
    tmp_path: Path,
) -> None:
    partition = open_partition(tmp_path / "t-0")
    partition.append_as_leader(build_batch(["plain"], timestamps=[1]), ACKS_LEADER, now_ms=1)
    first = produce(partition, 0, count=2)
    again = produce(partition, 0, count=2)
    assert (first.first_offset, first.last_offset) == (1, 2)
    assert (again.first_offset, again.last_offset) == (1, 2)
    assert again.bytes_appended == 0
    assert partition.log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        produce(partition, 5)
    produce(partition, 0, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        produce(partition, 1, epoch=0)
    assert partition.log.log_end_offset == 4


def test_idempotent_request_must_hold_one_batch(tmp_path: Path) -> None:
    partition = open_partition(tmp_path / "t-0")
    one = build_batch(["a"], timestamps=[1], producer_id=PID, producer_epoch=0, base_sequence=0)
    two = build_batch(["b"], timestamps=[1], producer_id=PID, producer_epoch=0, base_sequence=1)
    with pytest.raises(InvalidRecordError):
        partition.append_as_leader(one + two, ACKS_LEADER, now_ms=1)
    assert partition.log.log_end_offset == 0


def test_state_survives_reopening_and_follows_truncation(tmp_path: Path) -> None:
    partition = open_partition(tmp_path / "t-0")
    for seq in range(20):  # several segments
        produce(partition, seq)
    assert partition.log.segment_count > 1
    expected = partition.producer_state.snapshot()
    partition.log.close()

    reopened = open_partition(tmp_path / "t-0")
    assert reopened.producer_state.snapshot() == expected
    assert produce(reopened, 19).first_offset == 19

    reopened.truncate_to(18)
    assert produce(reopened, 18).first_offset == 18  # 18 is no longer a duplicate...
    assert produce(reopened, 18).first_offset == 18  # ...until appended again
    assert reopened.log.log_end_offset == 19


def test_follower_records_what_it_copies_for_when_it_leads(tmp_path: Path) -> None:
    leader = open_partition(tmp_path / "leader")
    for seq in range(3):
        produce(leader, seq)
    follower_log = Log.open(tmp_path / "follower", LogConfig(), now_ms=0)
    follower = Partition(TopicPartition("t", 0), follower_log, local_broker_id=2)
    follower.make_follower(1, 0, [1, 2], 0)
    follower.append_as_follower(leader.log.read(0, 1 << 20), 3, now_ms=1)
    assert follower.producer_state.snapshot() == leader.producer_state.snapshot()
    follower.make_leader(1, [2], [1, 2], 1, 0, now_ms=2)
    assert follower.producer_state.snapshot() == leader.producer_state.snapshot()
    assert produce(follower, 2).first_offset == 2


# ------------------------------------------------------------------ replays of old batches


def test_a_replay_from_sequence_zero_appends_nothing_twice() -> None:
    """A retried Spark task sends its batches again from sequence 0, same id and epoch."""
    leader = Leader()
    sizes = [3, 1, 4, 1, 5, 9, 2, 6]
    sequence = 0
    for size in sizes:
        leader.send(header(sequence, size))
        sequence += size
    end = leader.end
    sequence = 0
    outcomes = []
    for size in sizes:
        outcomes.append(leader.send(header(sequence, size))[0])
        sequence += size
    old = len(sizes) - MAX_BATCHES_PER_PRODUCER
    assert outcomes == [Outcome.OLD_DUPLICATE] * old + [Outcome.DUPLICATE] * (len(sizes) - old)
    assert leader.end == end
    assert leader.send(header(sequence, 2)) == (Outcome.APPEND, end)


def test_a_batch_straddling_the_window_or_the_last_sequence_is_out_of_order() -> None:
    leader = Leader()
    for seq in range(0, 16, 2):  # batches 0-1, 2-3, ..., 14-15; remembered from 6
        leader.send(header(seq, 2))
    assert leader.state.check(header(0, 6)).outcome is Outcome.OLD_DUPLICATE
    assert leader.state.check(header(4, 4)).outcome is Outcome.OUT_OF_ORDER  # 4..7 over 6
    assert leader.state.check(header(7, 2)).outcome is Outcome.OUT_OF_ORDER  # not a batch
    straddling = leader.state.check(header(14, 4))  # 14..17: the last two and two new
    assert straddling.outcome is Outcome.OUT_OF_ORDER
    assert "expected sequence 16, got 14" in straddling.reason
    assert leader.state.check(header(18)).outcome is Outcome.OUT_OF_ORDER  # a gap


def test_old_duplicates_are_recognised_across_the_sequence_wrap() -> None:
    state = ProducerStateManager()
    base = MAX_SEQUENCE - 9
    for n in range(8):  # 2**31-10 .. 2**31-1, then 0..5, in batches of 2
        state.record(header(increment_sequence(base, 2 * n), 2), 2 * n)
    assert state.check(header(base, 2)).outcome is Outcome.OLD_DUPLICATE
    assert state.check(header(MAX_SEQUENCE - 1, 2)).outcome is Outcome.DUPLICATE
    assert state.check(header(4, 2)).outcome is Outcome.DUPLICATE
    assert state.check(header(6)).outcome is Outcome.APPEND


def test_ids_of_the_spark_sink_range_are_accepted_and_a_new_epoch_fences_the_old() -> None:
    leader = Leader()
    pid = 2**62 + 12345
    assert leader.send(header(0, 2, producer_id=pid)) == (Outcome.APPEND, 0)
    assert leader.send(header(2, 1, producer_id=pid)) == (Outcome.APPEND, 2)
    assert leader.send(header(0, 2, producer_id=2**63 - 1, epoch=7)) == (Outcome.APPEND, 3)
    assert leader.send(header(0, 2, producer_id=pid, epoch=1)) == (Outcome.APPEND, 5)
    assert leader.state.check(header(3, producer_id=pid)).outcome is Outcome.FENCED
    assert leader.state.check(header(0, 2, producer_id=pid)).outcome is Outcome.FENCED


def test_snapshot_lines_round_trip_and_bad_ones_are_refused() -> None:
    leader = Leader()
    for seq in range(7):
        leader.send(header(seq, producer_id=2**63 - 1, epoch=3))
    leader.send(header(0, 4, producer_id=1))
    restored = ProducerStateManager()
    restored.restore(leader.state.encode_snapshot())
    assert restored.snapshot() == leader.state.snapshot()
    assert restored.check(header(1, producer_id=2**63 - 1, epoch=3)).outcome is (
        Outcome.OLD_DUPLICATE
    )
    lines = leader.state.encode_snapshot()
    for bad in ([], ["something else", "0"], [*lines[:2], "1 2 3"], [lines[0], "3", *lines[2:]]):
        with pytest.raises(ProtocolError):
            ProducerStateManager().restore(bad)


def test_idle_producers_expire_and_their_last_write_time_survives_a_snapshot() -> None:
    state = ProducerStateManager()
    state.record(header(0, producer_id=1), 0, seen_ms=1_000)
    state.record(header(0, producer_id=2), 1, seen_ms=5_000)
    # Old batch timestamps (a reprocessing job) do not make a producer look idle.
    assert header(0).max_timestamp == 0
    restored = ProducerStateManager()
    restored.restore(state.encode_snapshot())
    assert restored.expire(now_ms=7_000, expiration_ms=3_000) == 1
    assert set(restored.snapshot()) == {2}
    assert restored.check(header(1, producer_id=1)).outcome is Outcome.UNKNOWN_PRODUCER
    assert restored.check(header(1, producer_id=2)).outcome is Outcome.APPEND
    assert restored.expire(now_ms=7_000, expiration_ms=3_000) == 0


def test_a_replay_counts_as_activity_so_a_restart_never_expires_sooner() -> None:
    state = ProducerStateManager()
    state.replay([(header(0, producer_id=1), None)], seen_ms=50_000)
    assert state.expire(now_ms=60_000, expiration_ms=20_000) == 0
    assert state.expire(now_ms=80_000, expiration_ms=20_000) == 1
