"""Producer-state snapshots on a real log: written at rolls and close, pruned, loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log import AppendInfo, Log, LogConfig
from brokerd.log.producer_snapshots import snapshot_offsets, snapshot_path, write_snapshot
from brokerd.replication.partition import Partition
from spark_replica.errors import UnknownProducerIdError
from spark_replica.records import build_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_LEADER

PID = 2**62 + 99  # in the range the Spark sink derives its ids from
SEGMENT_BYTES = 2_000


def open_partition(directory: Path, **config: int) -> Partition:
    log = Log.open(directory, LogConfig(segment_bytes=SEGMENT_BYTES, **config), now_ms=0)
    partition = Partition(TopicPartition("t", 0), log, local_broker_id=1)
    partition.make_leader(0, [1], [1], 0, 0, now_ms=0)
    return partition


def produce(partition: Partition, seq: int, *, pid: int = PID, count: int = 1) -> AppendInfo:
    batch = build_batch(
        [f"v{seq + i}" for i in range(count)],
        timestamps=[1] * count,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
    )
    return partition.append_as_leader(batch, ACKS_LEADER, now_ms=1)


def produce_plain(partition: Partition, count: int) -> None:
    for n in range(count):
        partition.append_as_leader(build_batch([f"p{n}"], timestamps=[1]), ACKS_LEADER, 1)


def test_each_roll_writes_a_snapshot_named_by_the_new_segment(tmp_path: Path) -> None:
    partition = open_partition(tmp_path / "t-0")
    for seq in range(30):
        produce(partition, seq)
    log = partition.log
    assert log.segment_count > 2
    bases = [path.stem for path in sorted((tmp_path / "t-0").glob("*.log"))][1:]
    assert [f"{offset:020d}" for offset in snapshot_offsets(log.directory)] == bases
    assert all(snapshot_path(log.directory, int(b)).exists() for b in bases)


def test_a_producer_whose_batches_retention_deleted_is_still_known_after_reopening(
    tmp_path: Path,
) -> None:
    partition = open_partition(tmp_path / "t-0", retention_bytes=SEGMENT_BYTES)
    for seq in range(8):
        produce(partition, seq)
    last = produce(partition, 8)
    produce_plain(partition, 40)  # several segments without the producer
    assert partition.log.delete_expired_segments(now_ms=2) > 0
    log_start = partition.log.log_start_offset
    assert log_start > last.last_offset, "retention removed all of the producer's batches"
    assert min(snapshot_offsets(partition.log.directory)) == log_start
    partition.log.close()

    reopened = open_partition(tmp_path / "t-0", retention_bytes=SEGMENT_BYTES)
    again = produce(reopened, 8)
    assert (again.first_offset, again.bytes_appended) == (last.first_offset, 0)
    old = produce(reopened, 0)  # older than the five remembered: offsets unknown
    assert (old.first_offset, old.bytes_appended) == (-1, 0)
    assert old.last_offset < again.first_offset - 3, "it lies before the remembered batches"
    assert produce(reopened, 9).first_offset == reopened.log.log_end_offset - 1


def test_without_snapshots_the_same_producer_would_be_unknown(tmp_path: Path) -> None:
    """The control for the test above: the snapshot is what keeps the producer known."""
    partition = open_partition(tmp_path / "t-0", retention_bytes=SEGMENT_BYTES)
    for seq in range(9):
        produce(partition, seq)
    produce_plain(partition, 40)
    partition.log.delete_expired_segments(now_ms=2)
    partition.log.close()
    for offset in snapshot_offsets(tmp_path / "t-0"):
        snapshot_path(tmp_path / "t-0", offset).unlink()
    reopened = open_partition(tmp_path / "t-0", retention_bytes=SEGMENT_BYTES)
    with pytest.raises(UnknownProducerIdError):
        produce(reopened, 8)


def test_close_snapshots_a_loaded_state_at_the_log_end_and_reopening_replays_after_it(
    tmp_path: Path,
) -> None:
    partition = open_partition(tmp_path / "t-0")
    produce(partition, 0, count=3)
    expected = partition.producer_state.snapshot()
    partition.log.close()
    assert snapshot_offsets(tmp_path / "t-0") == [3]

    reopened = open_partition(tmp_path / "t-0")
    assert reopened.producer_state.snapshot() == expected
    produce(reopened, 3, count=2)  # appended after the snapshot: replayed from the log
    reopened.log.close()
    assert snapshot_offsets(tmp_path / "t-0") == [3, 5]

    untouched = open_partition(tmp_path / "t-0")
    untouched.log.close()  # never loaded: nothing new to say, nothing written
    assert snapshot_offsets(tmp_path / "t-0") == [3, 5]
    assert produce(open_partition(tmp_path / "t-0"), 3, count=2).first_offset == 3

    snapshot_path(tmp_path / "t-0", 5).unlink()  # now the batch at 3 comes from the log
    again = produce(open_partition(tmp_path / "t-0"), 3, count=2)
    assert (again.first_offset, again.bytes_appended) == (3, 0)


def test_truncation_drops_snapshots_past_the_new_end(tmp_path: Path) -> None:
    partition = open_partition(tmp_path / "t-0")
    for seq in range(30):
        produce(partition, seq)
    offsets = snapshot_offsets(partition.log.directory)
    cut = offsets[1] - 1
    partition.truncate_to(cut)
    assert snapshot_offsets(partition.log.directory) == offsets[:1]
    # Sequence `cut` is gone with its batch, so it is the next one to append.
    assert produce(partition, cut).first_offset == cut
    partition.truncate_fully_and_start_at(100)
    assert snapshot_offsets(partition.log.directory) == []


def test_stale_or_unreadable_snapshots_are_not_used(tmp_path: Path) -> None:
    partition = open_partition(tmp_path / "t-0")
    produce(partition, 0, count=2)
    partition.log.close()
    directory = tmp_path / "t-0"
    write_snapshot(directory, 1_000, ["replog-producer-state 1", "0"])  # past the end
    snapshot_path(directory, 2).write_text("garbage\n")  # unreadable, at the log end

    reopened = open_partition(tmp_path / "t-0")
    assert snapshot_offsets(directory) == [2], "Log.open drops the one past the end"
    again = produce(reopened, 0, count=2)
    assert (again.first_offset, again.bytes_appended) == (0, 0), "replayed from the log"
