"""The log of one partition through its public API: append, read, roll, retain, recover."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from brokerd.log import LEADER_EPOCH_CHECKPOINT_FILE, Log, LogConfig
from spark_replica.errors import (
    ConfigError,
    CorruptRecordError,
    InvalidFetchSizeError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from spark_replica.records import BatchHeader, build_batch, decode_payload, iter_batches

BATCH_SIZE = len(build_batch(["v0", "v1"], timestamps=[0, 0]))
"""Size of every two-record batch made by `batch`, which keeps value lengths fixed."""


def batch(first: int, timestamps: tuple[int, int] = (0, 0), base_offset: int = 0) -> bytes:
    """Two records valued f"v{first}" and f"v{first + 1}" (single digits keep sizes equal)."""
    values = [f"v{(first + i) % 10}" for i in range(2)]
    return build_batch(values, timestamps=list(timestamps), base_offset=base_offset)


def records(data: bytes) -> list[tuple[int, str]]:
    """(offset, value) of every record in `data`."""
    result = []
    for header, whole in iter_batches(data):
        values = decode_payload(whole).column("value").to_pylist()
        result += [(header.base_offset + i, value.decode()) for i, value in enumerate(values)]
    return result


def base_offsets(data: bytes) -> list[int]:
    return [header.base_offset for header, _ in iter_batches(data)]


def open_log(path: Path, now_ms: int = 0, **settings: int) -> Log:
    return Log.open(path / "topic-0", LogConfig(**settings), now_ms=now_ms)


def filled_log(path: Path, batches: int, **settings: int) -> Log:
    """A log holding `batches` two-record batches; batch i has timestamps 10*i, 10*i + 1."""
    log = open_log(path, **settings)
    for i in range(batches):
        log.append(batch(2 * i, (10 * i, 10 * i + 1)), assign_offsets=True, now_ms=0)
    return log


def active_log_file(log: Log) -> Path:
    return sorted(log.directory.glob("*.log"))[-1]


def test_open_creates_an_empty_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.directory.is_dir()
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.segment_count == 1
    assert log.read(0, 100) == b""
    assert log.epoch_cache.entries == ()
    assert (log.directory / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n0\n"


def test_leader_append_assigns_offsets_and_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(0), assign_offsets=True, now_ms=0)
    info = log.append(
        batch(2, (7, 9), base_offset=999) + batch(4), assign_offsets=True, leader_epoch=3, now_ms=0
    )
    assert (info.first_offset, info.last_offset, info.record_count) == (2, 5, 4)
    assert (info.max_timestamp, info.bytes_appended) == (9, 2 * BATCH_SIZE)
    data = log.read(2, 10_000)
    assert records(data) == [(2, "v2"), (3, "v3"), (4, "v4"), (5, "v5")]
    assert {header.leader_epoch for header, _ in iter_batches(data)} == {3}
    assert log.epoch_cache.entries == ((3, 2),)


def test_replica_append_keeps_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(0, base_offset=0) + batch(2, base_offset=2), assign_offsets=False, now_ms=0)
    assert log.log_end_offset == 4
    assert base_offsets(log.read(0, 10_000)) == [0, 2]


@pytest.mark.parametrize("offsets", [(0, 1), (0, 0)])
def test_replica_append_rejects_an_overlap(tmp_path: Path, offsets: tuple[int, ...]) -> None:
    log = open_log(tmp_path)
    data = b"".join(batch(0, base_offset=offset) for offset in offsets)
    with pytest.raises(InvalidRecordError, match="needs offset 2 or more"):
        log.append(data, assign_offsets=False, now_ms=0)
    assert log.log_end_offset == 0


def test_replica_append_copies_the_gaps_of_a_compacted_leader_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(0, base_offset=3) + batch(2, base_offset=9), assign_offsets=False, now_ms=0)
    assert log.log_end_offset == 11
    assert base_offsets(log.read(0, 10_000)) == [3, 9]
    assert base_offsets(log.read(6, 10_000)) == [9]
    log.close()
    reopened = open_log(tmp_path)
    assert base_offsets(reopened.read(0, 10_000)) == [3, 9]


def test_append_is_all_or_nothing(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 1)
    bad = bytearray(batch(4))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC32C"):
        log.append(batch(2) + bytes(bad) + batch(6), assign_offsets=True, now_ms=0)
    with pytest.raises(CorruptRecordError):
        log.append(batch(2) + batch(4)[:-3], assign_offsets=True, now_ms=0)
    assert (log.log_end_offset, log.size_bytes) == (2, BATCH_SIZE)
    assert active_log_file(log).stat().st_size == BATCH_SIZE


def test_append_rejects_oversized_input(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_batch_bytes=BATCH_SIZE - 1, segment_bytes=3 * BATCH_SIZE)
    with pytest.raises(MessageTooLargeError, match="max_batch_bytes"):
        log.append(batch(0), assign_offsets=True, now_ms=0)
    with pytest.raises(RecordListTooLargeError, match="segment_bytes"):
        log.append(batch(0) * 4, assign_offsets=True, now_ms=0)
    with pytest.raises(InvalidRecordError, match="at least one"):
        log.append(b"", assign_offsets=True, now_ms=0)


def test_read_returns_whole_batches_from_the_one_holding_the_offset(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 5)
    assert base_offsets(log.read(3, 10_000)) == [2, 4, 6, 8]
    assert base_offsets(log.read(3, 2 * BATCH_SIZE)) == [2, 4]
    assert base_offsets(log.read(3, 2 * BATCH_SIZE - 1)) == [2]


def test_read_never_returns_a_batch_at_or_above_max_offset(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 5)
    assert base_offsets(log.read(0, 10_000, max_offset=5)) == [0, 2]
    assert base_offsets(log.read(0, 10_000, max_offset=6)) == [0, 2, 4]
    assert log.read(4, 10_000, max_offset=5) == b""
    assert log.read(4, 10_000, max_offset=0) == b""


def test_read_returns_the_first_batch_whole_past_max_bytes(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 3)
    assert base_offsets(log.read(2, 1)) == [2]


def test_read_crosses_segments(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 6, segment_bytes=2 * BATCH_SIZE)
    assert log.segment_count == 3
    assert base_offsets(log.read(1, 10_000)) == [0, 2, 4, 6, 8, 10]
    assert base_offsets(log.read(3, 3 * BATCH_SIZE, max_offset=9)) == [2, 4, 6]


def test_read_at_the_log_end_is_empty(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 2)
    assert log.read(4, 10_000) == b""


@pytest.mark.parametrize("offset", [-1, 5])
def test_read_outside_the_log_is_out_of_range(tmp_path: Path, offset: int) -> None:
    log = filled_log(tmp_path, 2)
    with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 4\]"):
        log.read(offset, 100)


def test_read_needs_a_positive_size(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 1)
    with pytest.raises(InvalidFetchSizeError):
        log.read(0, 0)


def test_roll_by_size(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 5, segment_bytes=2 * BATCH_SIZE)
    assert log.segment_count == 3
    assert sorted(path.name for path in log.directory.glob("*.log")) == [
        "00000000000000000000.log",
        "00000000000000000004.log",
        "00000000000000000008.log",
    ]


def test_roll_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000)
    for now_ms in (5000, 5999, 6000):
        log.append(batch(0), assign_offsets=True, now_ms=now_ms)
    assert log.segment_count == 2
    assert log.log_end_offset == 6


def test_explicit_roll_skips_an_empty_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.roll(now_ms=0)
    assert log.segment_count == 1
    log.append(batch(0), assign_offsets=True, now_ms=0)
    log.roll(now_ms=0)
    log.roll(now_ms=0)
    assert log.segment_count == 2
    assert log.read(2, 100) == b""


def test_retention_by_size_keeps_the_newest_segments(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 7, segment_bytes=2 * BATCH_SIZE, retention_bytes=3 * BATCH_SIZE)
    assert log.delete_expired_segments(now_ms=0) == 2
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (8, 14, 2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    assert base_offsets(log.read(8, 10_000)) == [8, 10, 12]


def test_retention_by_time_deletes_a_prefix(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 6, segment_bytes=2 * BATCH_SIZE, retention_ms=100)
    assert log.delete_expired_segments(now_ms=100 + 21) == 1
    assert log.log_start_offset == 4
    assert log.delete_expired_segments(now_ms=100 + 41) == 1
    assert log.log_start_offset == 8


def test_retention_by_time_rolls_and_deletes_an_expired_active_segment(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 3, segment_bytes=2 * BATCH_SIZE, retention_ms=100)
    assert log.delete_expired_segments(now_ms=10_000) == 2
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (6, 6, 0)
    assert log.read(6, 100) == b""
    log.append(batch(6), assign_offsets=True, now_ms=10_000)
    assert records(log.read(6, 10_000)) == [(6, "v6"), (7, "v7")]


def test_truncate_inside_a_batch_drops_the_whole_batch(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 4)
    log.truncate_to(5)
    assert log.log_end_offset == 4
    log.truncate_to(4)
    log.truncate_to(100)
    assert log.log_end_offset == 4
    log.append(batch(4), assign_offsets=True, now_ms=0)
    assert records(log.read(3, 10_000)) == [(2, "v2"), (3, "v3"), (4, "v4"), (5, "v5")]


def test_truncate_across_segments(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 6, segment_bytes=2 * BATCH_SIZE)
    log.truncate_to(3)
    assert (log.log_end_offset, log.segment_count) == (2, 1)
    assert [path.name for path in log.directory.glob("*.log")] == ["00000000000000000000.log"]
    log.append(batch(2, (500, 500)), assign_offsets=True, now_ms=0)
    assert log.offset_for_timestamp(100) == (2, 500)


def test_truncate_to_a_segment_base_leaves_it_empty(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 4, segment_bytes=2 * BATCH_SIZE)
    log.truncate_to(4)
    assert (log.log_end_offset, log.segment_count) == (4, 2)
    assert log.read(4, 100) == b""


def test_truncate_below_the_start_empties_the_log(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 4, segment_bytes=2 * BATCH_SIZE, retention_bytes=0)
    log.delete_expired_segments(now_ms=0)
    assert log.log_start_offset == 4
    log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (2, 2, 1)


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 4, segment_bytes=2 * BATCH_SIZE)
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (50, 50, 0)
    log.append(batch(0, base_offset=50), assign_offsets=False, now_ms=0)
    log.close()
    reopened = open_log(tmp_path)
    assert base_offsets(reopened.read(50, 1000)) == [50]


def test_offset_for_timestamp_with_non_monotonic_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2 * BATCH_SIZE, index_interval_bytes=0)
    for timestamps in [(50, 10), (20, 30), (5, 60), (40, 40)]:
        log.append(batch(0, timestamps), assign_offsets=True, now_ms=0)
    assert log.offset_for_timestamp(0) == (0, 50)
    assert log.offset_for_timestamp(51) == (5, 60)
    assert log.offset_for_timestamp(25) == (0, 50)
    assert log.offset_for_timestamp(61) is None
    log.truncate_to(4)
    assert log.offset_for_timestamp(51) is None


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 5, segment_bytes=2 * BATCH_SIZE)
    before = log.read(0, 10_000)
    log.close()
    log.close()
    reopened = open_log(tmp_path)
    assert (reopened.log_end_offset, reopened.segment_count) == (10, 3)
    assert reopened.read(0, 10_000) == before
    assert reopened.offset_for_timestamp(31) == (7, 31)


def test_missing_index_is_rebuilt(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 6, segment_bytes=3 * BATCH_SIZE, index_interval_bytes=0)
    log.close()
    first_index = log.directory / "00000000000000000000.index"
    expected = first_index.read_bytes()
    first_index.unlink()
    (log.directory / "00000000000000000000.timeindex").unlink()
    reopened = open_log(tmp_path, segment_bytes=3 * BATCH_SIZE, index_interval_bytes=0)
    assert first_index.read_bytes() == expected
    assert base_offsets(reopened.read(3, 2 * BATCH_SIZE)) == [2, 4]
    assert reopened.offset_for_timestamp(15) == (4, 20)


def cut_header(size: int) -> int:
    return size - BATCH_SIZE + 30


def cut_payload(size: int) -> int:
    return size - 20


@pytest.mark.parametrize("new_size", [cut_header, cut_payload])
def test_recovery_cuts_a_torn_tail(
    tmp_path: Path, new_size: Callable[[int], int], caplog: pytest.LogCaptureFixture
) -> None:
    log = filled_log(tmp_path, 3)
    log.close()
    path = active_log_file(log)
    os.truncate(path, new_size(path.stat().st_size))
    with caplog.at_level(logging.WARNING, logger="brokerd.log"):
        reopened = open_log(tmp_path)
    assert "cutting" in caplog.text
    assert reopened.log_end_offset == 4
    assert path.stat().st_size == 2 * BATCH_SIZE
    assert records(reopened.read(2, 10_000)) == [(2, "v2"), (3, "v3")]
    reopened.append(batch(4), assign_offsets=True, now_ms=0)
    assert base_offsets(reopened.read(0, 10_000)) == [0, 2, 4]


def test_recovery_drops_a_batch_with_a_bad_crc(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 3)
    log.close()
    path = active_log_file(log)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x01
    path.write_bytes(data)
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 4
    assert base_offsets(reopened.read(0, 10_000)) == [0, 2]


def test_recovery_drops_a_batch_that_does_not_follow(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 3)
    log.close()
    path = active_log_file(log)
    data = bytearray(path.read_bytes())
    data[2 * BATCH_SIZE : 2 * BATCH_SIZE + 8] = (1).to_bytes(8)
    path.write_bytes(data)
    assert BatchHeader.decode(data, 2 * BATCH_SIZE).base_offset == 1
    assert open_log(tmp_path).log_end_offset == 4


def test_open_removes_stray_files(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 1)
    log.close()
    names = ("a.tmp", "00000000000000000000.log.cleaned", LEADER_EPOCH_CHECKPOINT_FILE + ".tmp")
    strays = [log.directory / name for name in names]
    orphan = log.directory / "00000000000000000099.index"
    for path in [*strays, orphan]:
        path.write_bytes(b"x")
    open_log(tmp_path)
    assert not any(path.exists() for path in [*strays, orphan])


def test_flush_after_a_number_of_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    log = open_log(tmp_path, flush_messages=3)
    synced.clear()
    log.append(batch(0), assign_offsets=True, now_ms=0)
    assert not synced
    log.append(batch(2), assign_offsets=True, now_ms=0)
    assert synced


def test_flush_after_an_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    log = open_log(tmp_path, now_ms=1000, flush_ms=500)
    synced.clear()
    log.append(batch(0), assign_offsets=True, now_ms=1200)
    log.maybe_flush(now_ms=1499)
    assert not synced
    log.maybe_flush(now_ms=1500)
    assert synced
    synced.clear()
    log.maybe_flush(now_ms=5000)
    assert not synced


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 2)
    log.delete()
    assert not log.directory.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("segment_bytes", 0),
        ("segment_bytes", 2**31),
        ("retention_ms", -2),
        ("flush_messages", 0),
        ("index_interval_bytes", "4096"),
    ],
)
def test_config_names_the_bad_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        LogConfig(**{field: value})  # type: ignore[arg-type]
