"""Transactions on a real log: markers, the last stable offset on leaders and followers,
the aborted-transaction index and its recovery, across restarts and torn files."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log import Log, LogConfig
from brokerd.log.cleaner import clean
from brokerd.log.producer_snapshots import snapshot_offsets, snapshot_path, write_snapshot
from brokerd.log.transaction_index import ENTRY, AbortedTransaction
from brokerd.replication.partition import Partition, TxnMarker
from spark_replica.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from spark_replica.records import TRANSACTIONAL_FLAG, ControlType, build_batch, iter_batches
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_LEADER

SEGMENT_BYTES = 4_000
TP = TopicPartition("t", 0)


def open_partition(directory: Path, *, leader: bool = True, broker: int = 1) -> Partition:
    log = Log.open(directory, LogConfig(segment_bytes=SEGMENT_BYTES), now_ms=0)
    partition = Partition(TP, log, local_broker_id=broker, high_watermark=log.log_end_offset)
    if leader:
        partition.make_leader(0, [broker], [broker], 0, 0, now_ms=0)
    return partition


def produce(
    partition: Partition, pid: int, seq: int, count: int = 1, *, txn: bool = True, epoch: int = 0
) -> int:
    batch = build_batch(
        [f"{pid}-{seq + i}" for i in range(count)],
        timestamps=[1] * count,
        attributes=TRANSACTIONAL_FLAG if txn else 0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    return partition.append_as_leader(batch, ACKS_LEADER, now_ms=1).first_offset


def end(
    partition: Partition, pid: int, kind: ControlType, *, epoch: int = 0, coordinator: int = 0
) -> int:
    (outcome,) = partition.append_markers([TxnMarker(pid, epoch, coordinator, kind)], now_ms=1)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome.first_offset


def txnindex_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.txnindex"))


def test_the_lso_stops_at_the_first_open_transaction(tmp_path: Path) -> None:
    partition = open_partition(tmp_path / "t-0")
    produce(partition, 9, 0, 2, txn=False)
    first = produce(partition, 1, 0, 3)
    produce(partition, 2, 0, 2)
    assert partition.high_watermark == 7
    assert partition.last_stable_offset == first == 2
    end(partition, 1, ControlType.COMMIT)
    assert partition.last_stable_offset == 5  # producer 2's transaction is still open
    end(partition, 2, ControlType.COMMIT)
    assert partition.last_stable_offset == partition.high_watermark == 9


def test_markers_are_fenced_and_a_producer_stays_inside_its_transaction(tmp_path: Path) -> None:
    partition = open_partition(tmp_path / "t-0")
    produce(partition, 1, 0, epoch=2)
    end(partition, 1, ControlType.COMMIT, epoch=2, coordinator=5)
    produce(partition, 1, 1, epoch=2)
    with pytest.raises(TransactionCoordinatorFencedError, match="coordinator epoch 4"):
        end(partition, 1, ControlType.ABORT, epoch=2, coordinator=4)
    with pytest.raises(InvalidProducerEpochError):
        end(partition, 1, ControlType.ABORT, epoch=1, coordinator=5)
    with pytest.raises(InvalidTxnStateError):
        produce(partition, 1, 2, epoch=2, txn=False)
    assert partition.last_stable_offset == 2


def test_open_transactions_survive_a_clean_restart_and_a_crash(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = open_partition(directory)
    produce(partition, 1, 0, 2)
    first = produce(partition, 2, 0, 1)
    end(partition, 1, ControlType.COMMIT)
    for seq in range(1, 40):  # enough to roll: the open transaction is in a sealed segment
        produce(partition, 3, seq - 1, txn=False)
    assert partition.log.segment_count > 1
    partition.log.close()
    reopened = open_partition(directory)
    assert reopened.producer_state.open_transactions() == {2: first}
    assert reopened.last_stable_offset == first
    # A crash: no snapshot at close, only those written at rolls.
    snapshot_path(directory, reopened.log.log_end_offset).unlink()
    crashed = open_partition(directory)
    assert crashed.last_stable_offset == first
    end(crashed, 2, ControlType.COMMIT)
    assert crashed.last_stable_offset == crashed.high_watermark


def test_a_version_2_snapshot_from_before_transactions_still_loads(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = open_partition(directory)
    produce(partition, 5, 0, 3, txn=False)
    partition.log.close()
    (offset,) = snapshot_offsets(directory)
    write_snapshot(directory, offset, ["replog-producer-state 2", "1", "5 0 1 0 2 0 2"])
    reopened = open_partition(directory)
    assert reopened.producer_state.snapshot()[5][0] == 0
    assert produce(reopened, 5, 3, txn=False) == 3


def test_a_follower_keeps_the_transactions_and_leads_with_the_right_lso(tmp_path: Path) -> None:
    leader = open_partition(tmp_path / "leader")
    follower = open_partition(tmp_path / "follower", leader=False, broker=2)
    follower.make_follower(1, 0, [1, 2], 0)
    produce(leader, 1, 0, 2)
    produce(leader, 2, 0, 1)
    end(leader, 1, ControlType.ABORT)
    produce(leader, 3, 0, 1)
    copied = leader.log.read(0, 1 << 20)
    follower.append_as_follower(copied, leader.high_watermark, now_ms=2)
    assert follower.producer_state.open_transactions() == {2: 2, 3: 4}
    assert follower.log.aborted_transactions(0, 5) == [AbortedTransaction(1, 0, 3, 2)]
    follower.make_leader(1, [2], [1, 2], 0, 0, now_ms=3)
    assert follower.last_stable_offset == 2
    end(follower, 2, ControlType.COMMIT)
    assert follower.last_stable_offset == 4


def test_aborts_are_indexed_by_the_segment_of_their_marker(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = open_partition(directory)
    produce(partition, 1, 0, 2)
    produce(partition, 2, 0, 1)
    for seq in range(40):
        produce(partition, 4, seq, txn=False)
    assert partition.log.segment_count > 1
    marker = end(partition, 1, ControlType.ABORT)
    entry = AbortedTransaction(1, 0, marker, 2)  # producer 2's open transaction starts at 2
    log = partition.log
    assert log.aborted_transactions(0, 1) == [entry]
    assert log.aborted_transactions(2, 3) == [entry]  # found in a later segment's index
    assert log.aborted_transactions(marker + 1, marker + 2) == []
    files = txnindex_files(directory)
    assert len(files) == log.segment_count
    assert [f.stat().st_size for f in files][-1] == ENTRY.size
    assert ENTRY.unpack(files[-1].read_bytes()) == (0, 1, 0, marker, 2)
    end(partition, 2, ControlType.COMMIT)
    partition.log.close()
    assert open_partition(directory).log.aborted_transactions(0, 1) == [entry]


def test_a_torn_or_lost_index_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = open_partition(directory)
    produce(partition, 1, 0, 2)
    first_marker = end(partition, 1, ControlType.ABORT)
    for seq in range(40):
        produce(partition, 4, seq, txn=False)
    produce(partition, 2, 0, 1)
    last_marker = end(partition, 2, ControlType.ABORT)
    log = partition.log
    expected = [
        AbortedTransaction(1, 0, first_marker, first_marker + 1),
        AbortedTransaction(2, last_marker - 1, last_marker, last_marker + 1),
    ]
    assert log.aborted_transactions(0, log.log_end_offset) == expected
    files = txnindex_files(directory)
    # Killed mid-write: the active segment's index is torn, and a sealed one's is gone.
    with files[-1].open("r+b") as torn:
        torn.truncate(ENTRY.size - 10)
    files[0].unlink()
    recovered = open_partition(directory)
    assert recovered.log.aborted_transactions(0, recovered.log.log_end_offset) == expected
    assert [f.stat().st_size for f in txnindex_files(directory)][:: len(files) - 1] == [
        ENTRY.size,
        ENTRY.size,
    ]


def test_truncation_and_segment_deletion_take_the_index_along(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = open_partition(directory)
    produce(partition, 1, 0, 2)
    first_marker = end(partition, 1, ControlType.ABORT)
    for seq in range(40):
        produce(partition, 4, seq, txn=False)
    produce(partition, 2, 0, 1)
    last_marker = end(partition, 2, ControlType.ABORT)
    log = partition.log
    partition.truncate_to(last_marker)
    assert log.aborted_transactions(0, log.log_end_offset) == [
        AbortedTransaction(1, 0, first_marker, first_marker + 1)
    ]
    assert txnindex_files(directory)[-1].stat().st_size == 0
    assert partition.last_stable_offset == last_marker - 1  # producer 2's is open again
    first_segment = txnindex_files(directory)[0]
    partition.high_watermark = log.log_end_offset
    partition.delete_records_before(last_marker - 1)
    assert not first_segment.exists()
    assert len(txnindex_files(directory)) == log.segment_count


def test_copied_batches_of_a_follower_split_across_rolls_index_each_abort(tmp_path: Path) -> None:
    leader = open_partition(tmp_path / "leader")
    for round_ in range(3):
        produce(leader, 10 + round_, 0, 30)
        end(leader, 10 + round_, ControlType.ABORT)
    follower = open_partition(tmp_path / "follower", leader=False, broker=2)
    follower.make_follower(1, 0, [1, 2], 0)
    copied = leader.log.read(0, 1 << 20)
    assert len(list(iter_batches(copied))) == 6
    follower.append_as_follower(copied, leader.high_watermark, now_ms=2)
    everything = (0, leader.log.log_end_offset)
    assert follower.log.aborted_transactions(*everything) == leader.log.aborted_transactions(
        *everything
    )
    assert len(leader.log.aborted_transactions(*everything)) == 3
    assert follower.log.segment_count > 1


def test_the_cleaner_keeps_transactions_whole_and_carries_their_index(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig(segment_bytes=2048, cleanup_policy="compact"), now_ms=0)
    partition = Partition(TP, log, local_broker_id=1)
    partition.make_leader(0, [1], [1], 0, 0, now_ms=0)

    def put(key: bytes, *, pid: int = -1, seq: int = -1) -> None:
        batch = build_batch(
            [b"v"],
            keys=[key],
            timestamps=[0],
            attributes=TRANSACTIONAL_FLAG if pid >= 0 else 0,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seq,
        )
        partition.append_as_leader(batch, ACKS_LEADER, now_ms=0)

    put(b"k", pid=1, seq=0)  # aborted: must not stand for key k, nor vanish
    marker = end(partition, 1, ControlType.ABORT)
    for _ in range(12):
        put(b"k")
    assert log.segment_count >= 3
    before = log.aborted_transactions(0, log.log_end_offset)
    job = log.cleaning_job(log.log_end_offset, 0, 0, now_ms=10)
    assert job is not None
    assert log.swap_cleaned(clean(job, max_keys=100), now_ms=0)
    kept = {header.base_offset for header, _ in iter_batches(log.read(0, 1 << 20))}
    assert {0, marker} <= kept
    assert (
        log.aborted_transactions(0, log.log_end_offset)
        == before
        == [AbortedTransaction(1, 0, marker, marker + 1)]
    )
    assert len(txnindex_files(directory)) == log.segment_count


def test_a_marker_torn_by_a_crash_leaves_its_transaction_open(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = open_partition(directory)
    first = produce(partition, 1, 0, 2)
    marker = end(partition, 1, ControlType.ABORT)
    assert partition.log.aborted_transactions(0, marker) == [
        AbortedTransaction(1, first, marker, marker + 1)
    ]
    # Killed while the marker was being written: its batch is cut short on disk, while
    # the index entry made it (the two files are written separately).
    (log_file,) = directory.glob("*.log")
    with log_file.open("r+b") as torn:
        torn.truncate(log_file.stat().st_size - 7)
    snapshot_path(directory, marker + 1).unlink(missing_ok=True)
    recovered = open_partition(directory)
    assert recovered.log.log_end_offset == marker
    assert recovered.log.aborted_transactions(0, marker) == []
    assert txnindex_files(directory)[0].stat().st_size == 0
    assert recovered.producer_state.open_transactions() == {1: first}
    assert recovered.last_stable_offset == first
    assert end(recovered, 1, ControlType.ABORT) == marker  # the coordinator writes it again
    assert recovered.log.aborted_transactions(0, marker) == [
        AbortedTransaction(1, first, marker, marker + 1)
    ]


def test_a_crash_before_the_rebuild_leaves_the_index_to_rebuild_again(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = open_partition(directory)
    produce(partition, 1, 0, 2)
    marker = end(partition, 1, ControlType.ABORT)
    for seq in range(40):
        produce(partition, 4, seq, txn=False)
    partition.log.close()
    sealed_index = txnindex_files(directory)[0]
    sealed_index.unlink()
    # Opened, and killed before the partition rebuilt anything: nothing looks whole.
    Log.open(directory, LogConfig(segment_bytes=SEGMENT_BYTES), now_ms=0)
    assert not sealed_index.exists()
    recovered = open_partition(directory)
    assert recovered.log.aborted_transactions(0, 1) == [AbortedTransaction(1, 0, marker, 3)]
    assert sealed_index.stat().st_size == ENTRY.size


def test_the_lso_never_falls_below_the_log_start(tmp_path: Path) -> None:
    partition = open_partition(tmp_path / "t-0")
    first = produce(partition, 1, 0, 2)
    for seq in range(5):
        produce(partition, 4, seq, txn=False)
    assert partition.last_stable_offset == first == 0
    partition.delete_records_before(4)
    assert partition.last_stable_offset == 4
    assert (
        partition.read(4, 1 << 20, current_leader_epoch=-1, for_replica=False, read_committed=True)
        == b""
    )
    end(partition, 1, ControlType.COMMIT)
    assert partition.last_stable_offset == partition.high_watermark == 8
