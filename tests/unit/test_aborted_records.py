"""What a reader gets of fetched batches under each isolation level: pure, no broker.

The answer below is what a leader stores for: two plain records, producer 1's aborted
transaction and its ABORT marker, producer 2's committed one and its COMMIT, then a
second transaction of producer 1 that commits. read_committed drops the aborted batch
by the answer's list, markers are never records, and the offsets they held are moved
past as gaps, never as lost records.
"""

from __future__ import annotations

import pytest

from spark_replica.client.fetched import FetchedRecords, RecordsLost, take_records
from spark_replica.records import (
    TRANSACTIONAL_FLAG,
    ControlMarker,
    ControlType,
    build_batch,
    build_control_batch,
    set_base_offset,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import AbortedTransaction

TP = TopicPartition("t", 0)
LOG_END = 11
ABORTED = [AbortedTransaction(1, 2)]


def data(base_offset: int, pid: int, count: int, *, txn: bool) -> bytes:
    batch = bytearray(
        build_batch(
            [f"{pid}@{base_offset + i}" for i in range(count)],
            timestamps=[1] * count,
            attributes=TRANSACTIONAL_FLAG if txn else 0,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=0,
        )
    )
    set_base_offset(batch, base_offset)
    return bytes(batch)


def marker(base_offset: int, pid: int, kind: ControlType) -> bytes:
    batch = bytearray(
        build_control_batch(
            ControlMarker(kind, 0), producer_id=pid, producer_epoch=0, timestamp_ms=1
        )
    )
    set_base_offset(batch, base_offset)
    return bytes(batch)


ANSWER = b"".join(
    [
        data(0, -1, 2, txn=False),  # 0-1
        data(2, 1, 3, txn=True),  # 2-4: aborted
        marker(5, 1, ControlType.ABORT),
        data(6, 2, 1, txn=True),  # 6: committed
        marker(7, 2, ControlType.COMMIT),
        data(8, 1, 2, txn=True),  # 8-9: producer 1 again, committed
        marker(10, 1, ControlType.COMMIT),
    ]
)


def offsets(pieces: list[FetchedRecords | RecordsLost]) -> list[int]:
    """The offsets of the records taken; a lost piece fails the test: nothing here is."""
    taken = [piece for piece in pieces if isinstance(piece, FetchedRecords)]
    assert len(taken) == len(pieces)
    return [piece.first_offset + i for piece in taken for i in range(piece.records.num_rows)]


def values(pieces: list[FetchedRecords | RecordsLost]) -> list[bytes]:
    taken = [piece for piece in pieces if isinstance(piece, FetchedRecords)]
    return [v for piece in taken for v in piece.records.column("value").to_pylist()]


def test_read_committed_drops_the_aborted_transaction_and_every_marker() -> None:
    taken = take_records(TP, ANSWER, 0, aborted=ABORTED)
    assert offsets(taken.pieces) == [0, 1, 6, 8, 9]
    assert values(taken.pieces)[2:] == [b"2@6", b"1@8", b"1@9"]
    assert taken.position == LOG_END


def test_read_uncommitted_keeps_aborted_records_but_never_markers() -> None:
    taken = take_records(TP, ANSWER, 0)
    assert offsets(taken.pieces) == [0, 1, 2, 3, 4, 6, 8, 9]
    assert taken.position == LOG_END


@pytest.mark.parametrize(
    ("position", "end", "expected", "moved_to"),
    [
        (3, None, [6, 8, 9], LOG_END),  # from inside the aborted batch
        (0, 7, [0, 1, 6], 7),  # a range ending at a marker
        (2, 6, [], 6),  # a range of nothing but the abort: moved past, not lost
        (10, None, [], LOG_END),  # an answer ending in a marker moves past it
    ],
)
def test_positions_move_past_what_is_dropped(
    position: int, end: int | None, expected: list[int], moved_to: int
) -> None:
    taken = take_records(TP, ANSWER, position, end, aborted=ABORTED)
    assert offsets(taken.pieces) == expected
    assert taken.position == moved_to


def test_an_abort_listed_before_the_reader_is_still_ended_by_its_marker() -> None:
    # The marker lies in a batch below the position: the filter still sees it, so the
    # producer's next transaction (committed) is not dropped with the aborted one.
    taken = take_records(TP, ANSWER, 6, aborted=ABORTED)
    assert offsets(taken.pieces) == [6, 8, 9]
