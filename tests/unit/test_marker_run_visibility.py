"""Atomic visibility of a Spark sink's transaction on one partition: the markers ending it
for each of its producers go in one append, ordered by the partition so that the
transaction that began first ends last (Partition.append_markers, plan_markers).

The property, on real logs: whatever prefix of that run of markers a follower copied
(the rest lost with a leader that died), and whatever its high watermark, read_committed
readers of that replica see either none of the transaction's records on the partition
or all of them; and the same after the replica restarts and rebuilds its producer state
from the log. Once it leads and the coordinator's retry sends the whole run again, all of
them. Then the run's order and its refusals, case by case."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from brokerd.log import Log, LogConfig
from brokerd.replication.partition import Partition, TxnMarker
from brokerd.replication.producer_state import ProducerStateManager
from spark_replica.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from spark_replica.records import (
    DERIVED_PRODUCER_ID_BASE,
    TRANSACTIONAL_FLAG,
    ControlType,
    build_batch,
    iter_batches,
)
from spark_replica.topics import TopicPartition

TP = TopicPartition("out", 0)
EPOCH = 7  # the micro-batch's epoch, every task's
COORDINATOR_EPOCH = 3
PLAIN = -1  # a record of no transaction between the transaction's


def leader(directory: Path) -> Partition:
    partition = Partition(TP, Log.open(directory, LogConfig(), now_ms=0), 1)
    partition.make_leader(0, [1], [1], 0, 0, now_ms=0)
    return partition


def write(partition: Partition, writers: list[int], epoch: int = EPOCH) -> set[int]:
    """Each writer's next batch (a task's transactional record at `epoch`, numbered from
    0, or a plain one) in order; the offsets of the transactional records."""
    sequences: dict[int, int] = {}
    offsets = set()
    for writer in writers:
        if writer == PLAIN:
            batch = build_batch(["plain"], timestamps=[0])
        else:
            sequence = sequences.get(writer, 0)
            sequences[writer] = sequence + 1
            batch = build_batch(
                [f"{writer}-{sequence}"],
                timestamps=[0],
                attributes=TRANSACTIONAL_FLAG,
                producer_id=DERIVED_PRODUCER_ID_BASE + writer,
                producer_epoch=epoch,
                base_sequence=sequence,
            )
        info = partition.append_as_leader(batch, acks=1, now_ms=0)
        if writer != PLAIN:
            offsets.add(info.first_offset)
    return offsets


def commit_markers(producers: list[int]) -> list[TxnMarker]:
    return [
        TxnMarker(DERIVED_PRODUCER_ID_BASE + p, EPOCH, COORDINATOR_EPOCH, ControlType.COMMIT)
        for p in producers
    ]


def copy(source: Partition, directory: Path, end: int) -> Partition:
    """A follower of `source` that copied its log below `end`, knowing no HW yet."""
    follower = Partition(TP, Log.open(directory, LogConfig(), now_ms=0), 1)
    follower.make_follower(2, 0, [1, 2], 0)
    follower.append_as_follower(source.log.read(0, 1 << 24, max_offset=end), 0, now_ms=0)
    return follower


def visible_at_every_high_watermark(state: ProducerStateManager, log_end: int) -> list[int]:
    """How far read_committed readers may read, for each HW a replica may have."""
    return [state.last_stable_offset(hw) for hw in range(log_end + 1)]


def assert_all_or_none(records: set[int], partition: Partition) -> None:
    for lso in visible_at_every_high_watermark(
        partition.producer_state, partition.log.log_end_offset
    ):
        seen = {offset for offset in records if offset < lso}
        assert seen in (set(), records), f"LSO {lso} shows {sorted(seen)} of {sorted(records)}"


writers = st.lists(st.integers(0, 3) | st.just(PLAIN), min_size=1, max_size=12).filter(
    lambda ws: any(w != PLAIN for w in ws)
)


@settings(max_examples=40, deadline=None)
@given(writers, st.randoms(use_true_random=False))
def test_no_prefix_of_a_marker_run_shows_part_of_a_transaction(
    interleaving: list[int], shuffle: random.Random
) -> None:
    producers = sorted({w for w in interleaving if w != PLAIN})
    sent = list(producers)
    shuffle.shuffle(sent)  # the coordinator's order says nothing
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source = leader(root / "leader")
        records = write(source, interleaving)
        run_start = source.log.log_end_offset
        outcomes = source.append_markers(commit_markers(sent), now_ms=0)
        assert not [o for o in outcomes if isinstance(o, Exception)]
        assert source.log.log_end_offset == run_start + len(sent)
        for kept in range(len(sent) + 1):
            directory = root / f"follower-{kept}"
            follower = copy(source, directory, run_start + kept)
            assert_all_or_none(records, follower)
            follower.log.close()
            restarted = Partition(TP, Log.open(directory, LogConfig(), now_ms=0), 1)
            assert_all_or_none(records, restarted)
            # It becomes the leader; the coordinator sends the whole run again.
            restarted.make_leader(1, [1], [1], 0, 0, now_ms=0)
            again = restarted.append_markers(commit_markers(sent), now_ms=0)
            assert not [o for o in again if isinstance(o, Exception)]
            assert restarted.last_stable_offset == restarted.log.log_end_offset
            restarted.log.close()
        source.log.close()


def run_order(partition: Partition) -> list[int]:
    """The producers (less the id base) of the control batches, in log order."""
    return [
        header.producer_id - DERIVED_PRODUCER_ID_BASE
        for header, _ in iter_batches(partition.log.read(0, 1 << 24))
        if header.is_control
    ]


def test_the_transaction_that_began_first_ends_last_and_empty_ones_first(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    write(partition, [2, 0, 1, 2, 0])  # first offsets: 2 at 0, 0 at 1, 1 at 2
    partition.append_markers(commit_markers([0, 1, 2, 3]), now_ms=0)  # 3 wrote nothing
    assert run_order(partition) == [3, 1, 0, 2]
    assert partition.producer_state.open_transactions() == {}


def test_a_refused_marker_holds_back_those_of_transactions_that_began_before_it(
    tmp_path: Path,
) -> None:
    partition = leader(tmp_path)
    one = DERIVED_PRODUCER_ID_BASE + 1
    write(partition, [1], epoch=EPOCH - 1)  # producer 1's previous micro-batch, ended by
    partition.append_markers([TxnMarker(one, EPOCH - 1, 5, ControlType.COMMIT)], now_ms=0)
    write(partition, [0, 1, 2])  # first offsets: 0 at 2, 1 at 3, 2 at 4
    markers = commit_markers([0, 1, 2])
    markers[1] = TxnMarker(one, EPOCH, COORDINATOR_EPOCH, ControlType.COMMIT)  # 3 < 5
    outcomes = partition.append_markers(markers, now_ms=0)
    assert not isinstance(outcomes[2], Exception)
    assert isinstance(outcomes[1], TransactionCoordinatorFencedError)
    assert isinstance(outcomes[0], TransactionCoordinatorFencedError)
    assert "held back" in str(outcomes[0])
    # 0 began before 1 and stays open with it: readers stop at 0's first record.
    assert partition.producer_state.open_transactions() == {DERIVED_PRODUCER_ID_BASE: 2, one: 3}
    assert partition.last_stable_offset == 2


def test_one_producers_markers_keep_their_order_and_each_is_checked_after_the_last(
    tmp_path: Path,
) -> None:
    partition = leader(tmp_path)
    write(partition, [0])
    pid = DERIVED_PRODUCER_ID_BASE
    outcomes = partition.append_markers(
        [
            TxnMarker(pid, EPOCH - 1, COORDINATOR_EPOCH, ControlType.COMMIT),
            TxnMarker(pid, EPOCH, COORDINATOR_EPOCH, ControlType.COMMIT),
            TxnMarker(pid, EPOCH, COORDINATOR_EPOCH - 1, ControlType.COMMIT),
        ],
        now_ms=0,
    )
    assert isinstance(outcomes[0], InvalidProducerEpochError)
    assert not isinstance(outcomes[1], Exception) and outcomes[1].first_offset == 1
    assert isinstance(outcomes[2], TransactionCoordinatorFencedError)
