"""The sparse offset and time indexes: lookups, truncation and what survives on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log.index import IndexInconsistentError, OffsetIndex, TimeIndex


def test_offset_lookup_finds_the_last_entry_at_or_before() -> None:
    index = OffsetIndex(Path("unused"))
    for relative_offset, position in [(10, 1000), (20, 2000), (30, 3000)]:
        index.append(relative_offset, position)
    assert index.position_at_or_before(5) == 0
    assert index.position_at_or_before(10) == 1000
    assert index.position_at_or_before(29) == 2000
    assert index.position_at_or_before(10**12) == 3000


def test_furthest_position_respects_both_limits() -> None:
    index = OffsetIndex(Path("unused"))
    for relative_offset, position in [(10, 1000), (20, 2000), (30, 3000)]:
        index.append(relative_offset, position)
    assert index.furthest_position_within(100, 2500) == 2000
    assert index.furthest_position_within(20, 10_000) == 2000
    assert index.furthest_position_within(19, 10_000) == 1000
    assert index.furthest_position_within(100, 999) is None


def test_time_lookup_starts_where_no_earlier_record_can_match() -> None:
    index = TimeIndex(Path("unused"))
    index.append(100, 0)
    index.append(200, 7)
    assert index.start_offset_for(50) == 0
    assert index.start_offset_for(150) == 0
    assert index.start_offset_for(200) == 7
    assert index.start_offset_for(10**15) == 7


def test_flush_writes_entries_that_load_back(tmp_path: Path) -> None:
    index = OffsetIndex.create(tmp_path / "a.index")
    index.append(1, 100)
    index.flush()
    index.append(2, 200)
    index.flush()
    assert (tmp_path / "a.index").stat().st_size == 16
    loaded = OffsetIndex.load(tmp_path / "a.index")
    assert list(loaded.keys) == [1, 2]
    assert list(loaded.values) == [100, 200]


def test_truncation_reaches_the_file(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "a.timeindex")
    for timestamp, relative_offset in [(10, 0), (20, 3), (30, 6)]:
        index.append(timestamp, relative_offset)
    index.flush()
    index.truncate_from_offset(3)
    assert index.last() == (10, 0)
    loaded = TimeIndex.load(tmp_path / "a.timeindex")
    assert loaded.last() == (10, 0)
    assert len(loaded) == 1


def test_reset_empties_memory_and_file(tmp_path: Path) -> None:
    index = OffsetIndex.create(tmp_path / "a.index")
    index.append(1, 100)
    index.flush()
    index.reset()
    assert len(index) == 0
    assert (tmp_path / "a.index").read_bytes() == b""


def test_missing_file_is_inconsistent(tmp_path: Path) -> None:
    with pytest.raises(IndexInconsistentError, match="missing"):
        OffsetIndex.load(tmp_path / "nothing.index")


def test_partial_entry_is_inconsistent(tmp_path: Path) -> None:
    (tmp_path / "a.index").write_bytes(b"\0" * 9)
    with pytest.raises(IndexInconsistentError, match="multiple"):
        OffsetIndex.load(tmp_path / "a.index")


def test_decreasing_entries_are_inconsistent(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(OffsetIndex.entry_format.pack(5, 500) + OffsetIndex.entry_format.pack(4, 600))
    with pytest.raises(IndexInconsistentError, match="increasing"):
        OffsetIndex.load(path)
