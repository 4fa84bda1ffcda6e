"""Moving a log's start by request (DeleteRecords) on real files: reads, recovery, EARLIEST."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log import EpochEntry, Log, LogConfig
from brokerd.log.start_offset import LOG_START_OFFSET_FILE, read_log_start_offset
from spark_replica.errors import OffsetOutOfRangeError, ProtocolError
from spark_replica.records import build_batch, iter_batches

BATCH_SIZE = len(build_batch(["v0", "v1"], timestamps=[0, 0]))
"""Every batch below holds two records of equal size, so segments hold whole batches."""


def open_log(path: Path) -> Log:
    return Log.open(path / "topic-0", LogConfig(segment_bytes=3 * BATCH_SIZE), now_ms=0)


def filled_log(path: Path, batches: int) -> Log:
    """`batches` two-record batches, three to a segment; batch i has timestamps 10*i, 10*i+1."""
    log = open_log(path)
    for i in range(batches):
        values = [f"v{(2 * i + j) % 10}" for j in range(2)]
        log.append(
            build_batch(values, timestamps=[10 * i, 10 * i + 1]), assign_offsets=True, now_ms=0
        )
    return log


def first_read_offset(log: Log, offset: int) -> int:
    header, _ = next(iter(iter_batches(log.read(offset, 1 << 20))))
    return header.base_offset


def test_start_moves_inside_a_segment_and_reads_below_it_are_refused(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 8)  # offsets 0..15, segments at 0, 6, 12
    assert log.advance_log_start_offset(9)
    assert log.log_start_offset == 9
    with pytest.raises(OffsetOutOfRangeError, match="outside the log's range"):
        log.read(8, 1 << 20)
    assert first_read_offset(log, 9) == 8  # the batch holding 9 is returned whole
    assert log.segment_count == 2  # the segment at 0 went, the one holding 9 stayed


def test_start_only_moves_forward(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 4)
    assert log.advance_log_start_offset(5)
    assert not log.advance_log_start_offset(3)
    assert not log.advance_log_start_offset(5)
    assert log.log_start_offset == 5


def test_start_past_the_log_end_is_refused(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 2)
    with pytest.raises(OffsetOutOfRangeError, match="ends at offset 4"):
        log.advance_log_start_offset(5)
    assert log.log_start_offset == 0


def test_start_at_the_log_end_keeps_the_active_segment(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 7)
    assert log.advance_log_start_offset(14)
    assert log.log_start_offset == log.log_end_offset == 14
    assert log.segment_count == 1
    log.append(build_batch(["v0", "v1"], timestamps=[0, 0]), assign_offsets=True, now_ms=0)
    assert first_read_offset(log, 14) == 14


def test_start_survives_a_restart(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 8)
    log.advance_log_start_offset(9)
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.log_start_offset == 9
    with pytest.raises(OffsetOutOfRangeError):
        reopened.read(8, 1 << 20)


def test_segments_left_by_a_crash_after_the_start_was_recorded_go_at_open(
    tmp_path: Path,
) -> None:
    log = filled_log(tmp_path, 8)
    log.close()
    # A crash after the file was written but before any segment was deleted.
    (log.directory / LOG_START_OFFSET_FILE).write_text("0\n13\n")
    reopened = open_log(tmp_path)
    assert reopened.log_start_offset == 13
    assert reopened.segment_count == 1
    assert reopened.log_end_offset == 16


def test_epoch_cache_starts_at_the_new_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for epoch in (1, 2):
        for _ in range(3):
            log.append(
                build_batch(["v0", "v1"], timestamps=[0, 0]),
                assign_offsets=True,
                leader_epoch=epoch,
                now_ms=0,
            )
    log.advance_log_start_offset(7)
    assert log.epoch_cache.entries == (EpochEntry(2, 7),)  # epoch 1 ended at offset 6


def test_timestamp_lookup_never_answers_below_the_start(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 4)
    log.advance_log_start_offset(3)
    assert log.offset_for_timestamp(0) == (3, 0)
    assert log.offset_for_timestamp(20) == (4, 20)


def test_full_truncation_below_the_start_restarts_there(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 4)
    log.advance_log_start_offset(6)
    log.truncate_fully_and_start_at(2)
    assert log.log_start_offset == log.log_end_offset == 2
    log.close()
    assert open_log(tmp_path).log_start_offset == 2


def test_retention_past_the_requested_start_wins(tmp_path: Path) -> None:
    log = filled_log(tmp_path, 8)
    log.advance_log_start_offset(1)
    log.delete_expired_segments(now_ms=0)  # nothing to expire: unlimited retention
    assert log.log_start_offset == 1
    log.truncate_to(4)
    assert log.log_start_offset == 1


@pytest.mark.parametrize("text", ["1\n5\n", "0\n", "0\nfive\n", "0\n-1\n"])
def test_a_malformed_start_file_is_a_typed_error(tmp_path: Path, text: str) -> None:
    (tmp_path / LOG_START_OFFSET_FILE).write_text(text)
    with pytest.raises(ProtocolError, match=LOG_START_OFFSET_FILE):
        read_log_start_offset(tmp_path)
