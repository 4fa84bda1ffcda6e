"""One segment on its own: appends, lookups, truncation, sealing and reloading."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log.config import LogConfig
from brokerd.log.segment import BatchSpan, LogSegment, segment_file
from spark_replica.records import BatchHeader, build_batch, iter_batches

CONFIG = LogConfig(index_interval_bytes=1000, segment_bytes=100_000)


def batches_from(base_offset: int, timestamps: list[list[int]]) -> bytes:
    """Batches laid end to end, numbered from `base_offset`, one per timestamp list."""
    parts = []
    for record_timestamps in timestamps:
        values = [f"v{base_offset + i}" for i in range(len(record_timestamps))]
        parts.append(build_batch(values, timestamps=record_timestamps, base_offset=base_offset))
        base_offset += len(record_timestamps)
    return b"".join(parts)


def spans_of(data: bytes) -> list[BatchSpan]:
    spans = []
    position = 0
    for header, _ in iter_batches(data):
        spans.append((position, header))
        position += header.total_size
    return spans


def filled_segment(directory: Path, count: int = 10) -> LogSegment:
    """A segment at base 100 with `count` two-record batches, timestamps 10*i and 10*i+5."""
    segment = LogSegment.create(directory, 100, CONFIG)
    data = batches_from(100, [[10 * i, 10 * i + 5] for i in range(count)])
    segment.append(data, spans_of(data), now_ms=0)
    return segment


def headers_read(segment: LogSegment, offset: int, max_bytes: int, max_offset: int) -> list[int]:
    located = segment.locate(offset)
    assert located is not None
    start, end = segment.batch_range(located, max_bytes, max_offset, whole_first=True)
    data = segment.read_range(start, end)
    return [header.base_offset for header, _ in iter_batches(data)]


def test_append_tracks_size_offsets_and_index(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    assert segment.next_offset == 120
    assert segment.size == segment_file(tmp_path, 100, ".log").stat().st_size
    assert segment.max_timestamp == 95
    assert len(segment.offset_index) > 0


def test_locate_finds_the_batch_holding_an_offset(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    for offset in range(100, 120):
        located = segment.locate(offset)
        assert located is not None
        header: BatchHeader = located[1]
        assert header.base_offset <= offset <= header.last_offset
    assert segment.locate(120) is None


def test_read_stops_below_max_offset_and_within_budget(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    assert headers_read(segment, 101, 10**6, 107) == [100, 102, 104]
    batch_size = len(build_batch(["v100", "v101"], timestamps=[0, 5]))
    assert headers_read(segment, 100, 2 * batch_size, 10**6) == [100, 102]
    assert headers_read(segment, 100, 1, 10**6) == [100]


def test_truncate_drops_the_batch_holding_the_offset(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    segment.truncate_to(111)
    assert segment.next_offset == 110
    assert segment.max_timestamp == 45
    assert segment.locate(110) is None
    assert segment.size == segment_file(tmp_path, 100, ".log").stat().st_size


def test_sealed_segment_loads_with_its_max_timestamp(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    segment.seal()
    segment.close()
    loaded = LogSegment.load(tmp_path, 100, CONFIG, now_ms=0)
    assert (loaded.next_offset, loaded.size, loaded.max_timestamp) == (
        segment.next_offset,
        segment.size,
        95,
    )


def test_load_rebuilds_an_index_pointing_past_the_log(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    segment.seal()
    segment.close()
    index_path = segment_file(tmp_path, 100, ".index")
    index_path.write_bytes(index_path.read_bytes() + (5000).to_bytes(4) + (10**6).to_bytes(4))
    loaded = LogSegment.load(tmp_path, 100, CONFIG, now_ms=0)
    assert loaded.next_offset == 120
    assert list(loaded.offset_index.values) == list(segment.offset_index.values)


def test_recover_cuts_a_torn_tail(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path, count=3)
    size = segment.size
    segment.close()
    log_path = segment_file(tmp_path, 100, ".log")
    with open(log_path, "r+b") as file:
        file.truncate(size - 10)
    recovered = LogSegment.recover(tmp_path, 100, CONFIG, now_ms=0)
    assert recovered.next_offset == 104
    assert log_path.stat().st_size == recovered.size


@pytest.mark.parametrize(
    ("target", "expected"),
    [(0, (100, 0)), (43, (109, 45)), (95, (119, 95)), (96, None)],
)
def test_find_timestamp(tmp_path: Path, target: int, expected: tuple[int, int] | None) -> None:
    segment = filled_segment(tmp_path)
    assert segment.find_timestamp(target) == expected


def test_should_roll_on_size_age_and_offset_overflow(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=5000, segment_ms=1000)
    segment = LogSegment.create(tmp_path, 0, config)
    assert not segment.should_roll(10**6, 0, now_ms=10**9)
    data = batches_from(0, [[1]])
    segment.append(data, spans_of(data), now_ms=0)
    assert not segment.should_roll(100, 5, now_ms=999)
    assert segment.should_roll(5000, 5, now_ms=0)
    assert segment.should_roll(100, 5, now_ms=1000)
    assert segment.should_roll(100, 2**31, now_ms=0)
