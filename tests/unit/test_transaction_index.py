"""The `.txnindex` file: Kafka's 34-byte entries, what a load refuses, truncation and
the search's stopping rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log.index import IndexInconsistentError
from brokerd.log.transaction_index import ENTRY, AbortedTransaction, TransactionIndex

FIRST = AbortedTransaction(producer_id=1, first_offset=0, last_offset=5, last_stable_offset=3)
SECOND = AbortedTransaction(producer_id=2, first_offset=3, last_offset=9, last_stable_offset=10)


def test_entries_are_kafkas_layout_and_load_back(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "0.txnindex")
    index.reset()
    index.append(FIRST)
    index.append(SECOND)
    index.flush()
    assert index.path.read_bytes() == ENTRY.pack(0, 1, 0, 5, 3) + ENTRY.pack(0, 2, 3, 9, 10)
    assert ENTRY.size == 34
    assert TransactionIndex.load(index.path).entries == [FIRST, SECOND]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (ENTRY.pack(0, 1, 0, 5, 3)[:-4], "not whole 34-byte entries"),
        (ENTRY.pack(1, 1, 0, 5, 3), "malformed entry"),
        (ENTRY.pack(0, 1, 6, 5, 3), "malformed entry"),
        (ENTRY.pack(0, 1, 0, 5, 3) + ENTRY.pack(0, 2, 0, 5, 6), "not in marker order"),
    ],
)
def test_a_torn_or_malformed_file_is_refused(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "0.txnindex"
    path.write_bytes(data)
    with pytest.raises(IndexInconsistentError, match=message):
        TransactionIndex.load(path)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IndexInconsistentError, match="missing"):
        TransactionIndex.load(tmp_path / "0.txnindex")


def test_truncation_keeps_the_markers_before_the_offset(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "0.txnindex")
    index.reset([FIRST, SECOND])
    index.truncate_from(9)
    assert index.entries == [FIRST]
    assert TransactionIndex.load(index.path).entries == [FIRST]
    with pytest.raises(ValueError, match="comes after"):
        index.append(FIRST)


def test_the_search_stops_once_every_transaction_below_the_end_has_ended() -> None:
    index = TransactionIndex(Path("unused"), [FIRST, SECOND])
    assert index.collect(0, 3) == ([FIRST], True)  # FIRST's LSO 3 reaches the end
    assert index.collect(4, 8) == ([FIRST, SECOND], True)
    assert index.collect(6, 20) == ([SECOND], False)  # later segments may add some
    assert index.collect(10, 11) == ([], False)
