"""Cutting a fetch answer to a reader's offsets: slices, gaps and CRCs, with plain bytes."""

from __future__ import annotations

import pytest

from spark_replica.client import FetchedRecords, RecordsLost
from spark_replica.client.fetched import CREATE_TIME, LOG_APPEND_TIME, take_records
from spark_replica.errors import CorruptRecordError
from spark_replica.records import TIMESTAMP_TYPE_LOG_APPEND, build_batch
from spark_replica.topics import TopicPartition

TP = TopicPartition("t", 0)


def stored(base_offset: int, count: int, *, log_append: bool = False) -> bytes:
    return build_batch(
        [str(base_offset + i).encode() for i in range(count)],
        base_offset=base_offset,
        attributes=TIMESTAMP_TYPE_LOG_APPEND if log_append else 0,
    )


def offsets_of(pieces: list[FetchedRecords | RecordsLost]) -> list[int]:
    found = []
    for piece in pieces:
        if isinstance(piece, FetchedRecords):
            values = [int(v) for v in piece.records.column("value").to_pylist()]
            assert values == list(range(piece.first_offset, piece.next_offset))
            found += values
    return found


def test_batches_are_sliced_to_the_position_and_the_end() -> None:
    data = stored(0, 10) + stored(10, 10, log_append=True) + stored(20, 10)
    taken = take_records(TP, data, 4, 25)
    assert offsets_of(taken.pieces) == list(range(4, 25))
    assert taken.position == 25
    kinds = [p.timestamp_type for p in taken.pieces if isinstance(p, FetchedRecords)]
    assert kinds == [CREATE_TIME, LOG_APPEND_TIME, CREATE_TIME]


def test_without_an_end_everything_after_the_position_is_taken() -> None:
    taken = take_records(TP, stored(0, 10) + stored(10, 5), 12)
    assert offsets_of(taken.pieces) == [12, 13, 14]
    assert taken.position == 15


def test_a_gap_in_the_log_is_skipped_not_lost() -> None:
    """Offsets 5..7 have no records, as after compaction: the reader moves past them."""
    taken = take_records(TP, stored(0, 5) + stored(8, 4), 2, 12, log_start_offset=0)
    assert all(isinstance(p, FetchedRecords) for p in taken.pieces)
    assert offsets_of(taken.pieces) == [2, 3, 4, 8, 9, 10, 11]
    assert taken.position == 12


def test_a_gap_below_the_log_start_is_reported_as_lost_in_offset_order() -> None:
    """Retention moved the log start to 7 while the reader was at 5: 5 and 6 are lost,
    7 had no records (compacted away)."""
    taken = take_records(TP, stored(0, 5) + stored(8, 4), 2, 12, log_start_offset=7)
    assert [type(p) for p in taken.pieces] == [FetchedRecords, RecordsLost, FetchedRecords]
    lost = taken.pieces[1]
    assert isinstance(lost, RecordsLost)
    assert (lost.start, lost.end) == (5, 7)
    assert str(lost) == "t-0: offsets 5..6 were deleted (the log starts at 7)"
    assert offsets_of(taken.pieces) == [2, 3, 4, 8, 9, 10, 11]


def test_a_gap_that_runs_past_the_end_ends_the_range() -> None:
    """Nothing in [5, 8) but a batch at 10: the range [2, 8) is read."""
    taken = take_records(TP, stored(0, 5) + stored(10, 4), 2, 8)
    assert offsets_of(taken.pieces) == [2, 3, 4]
    assert taken.position == 8


def test_a_range_inside_a_gap_has_no_records() -> None:
    taken = take_records(TP, stored(10, 4), 5, 8)
    assert (taken.pieces, taken.position) == ([], 8)


def test_a_partial_tail_batch_is_left_for_the_next_fetch() -> None:
    whole, tail = stored(0, 5), stored(5, 5)
    taken = take_records(TP, whole + tail[: len(tail) // 2], 0, 10)
    assert offsets_of(taken.pieces) == [0, 1, 2, 3, 4]
    assert taken.position == 5


def test_a_corrupt_batch_is_refused_unless_crcs_are_not_checked() -> None:
    data = bytearray(stored(0, 5))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        take_records(TP, bytes(data), 0, 5)
    assert take_records(TP, bytes(data), 0, 5, check_crcs=False).position == 5
