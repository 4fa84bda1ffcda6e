"""The cleaner on real segment files: what it writes, and crash safety of the swap.

A crash is simulated by running the swap's steps only up to some point and opening the
log again from its files, as a restarted broker would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log import Log, LogConfig
from brokerd.log.cleaner import CleaningResult, IoThrottle, clean
from brokerd.log.cleaner_swap import SwapStep, swap_steps
from spark_replica.records import build_batch, decode_payload, iter_batches

CONFIG = LogConfig(segment_bytes=2048, cleanup_policy="compact")
KEYS = [b"k0", b"k1", b"k2", b"k3", b"k4"]
BATCHES = 12
PER_BATCH = 4

Record = tuple[int, bytes | None, bytes | None]


def fill(directory: Path, producer_id: int = -1) -> Log:
    """Batches of 4 records cycling over 5 keys, the last key tombstoned at the end."""
    log = Log.open(directory, CONFIG, now_ms=0)
    sequence = 0
    for number in range(BATCHES):
        keys = [KEYS[(number * PER_BATCH + i) % len(KEYS)] for i in range(PER_BATCH)]
        values: list[bytes | None] = [b"v%d" % (number * PER_BATCH + i) for i in range(PER_BATCH)]
        if number == BATCHES - 3:
            keys[-1], values[-1] = KEYS[4], None
        producer = {}
        if producer_id >= 0:
            producer = {"producer_id": producer_id, "producer_epoch": 0, "base_sequence": sequence}
        log.append(
            build_batch(values, keys=keys, timestamps=[0] * PER_BATCH, **producer),
            assign_offsets=True,
            now_ms=0,
        )
        sequence += PER_BATCH
    assert log.segment_count >= 3
    return log


def records(log: Log) -> list[Record]:
    result: list[Record] = []
    for header, batch in iter_batches(log.read(log.log_start_offset, 10**7)):
        payload = decode_payload(batch)
        keys = payload.column("key").to_pylist()
        values = payload.column("value").to_pylist()
        result += [
            (header.base_offset + i, k, v)
            for i, (k, v) in enumerate(zip(keys, values, strict=True))
        ]
    return result


def last_per_key(old: list[Record], horizon: int, cleaned_below: int) -> list[Record]:
    """The definition: below `cleaned_below`, the last record per key, old tombstones gone."""
    last = {key: offset for offset, key, _ in old if offset < cleaned_below}
    survivors = {offset for key, offset in last.items()}
    return [
        (offset, key, value)
        for offset, key, value in old
        if offset >= cleaned_below
        or (offset in survivors and not (value is None and offset < horizon))
    ]


def cleaned(directory: Path, horizon: int = 0) -> tuple[list[Record], CleaningResult]:
    """Fill a log, clean it under `.cleaned` names, close it: the old records and the result."""
    log = fill(directory)
    job = log.cleaning_job(log.log_end_offset, 0, horizon, now_ms=0)
    assert job is not None
    old = records(log)
    log.close()
    return old, clean(job, max_keys=1000)


def test_a_cleaning_keeps_the_last_record_per_key_at_its_offset(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0")
    old = records(log)
    segments_before = log.segment_count
    job = log.cleaning_job(log.log_end_offset, 0, 0, now_ms=0)
    assert job is not None and job.dirty_ratio == 1.0
    result = clean(job, max_keys=1000)
    assert log.swap_cleaned(result, now_ms=0)
    end = job.cleanable[-1].next_offset
    assert result.first_dirty == end
    assert records(log) == last_per_key(old, horizon=0, cleaned_below=end)
    again = log.cleaning_job(log.log_end_offset, 0, 0, now_ms=0)
    assert again is not None
    assert log.swap_cleaned(clean(again, max_keys=1000), now_ms=0)
    assert log.segment_count < segments_before
    assert records(log) == last_per_key(old, horizon=0, cleaned_below=end)
    log.close()
    reopened = Log.open(tmp_path / "t-0", CONFIG, now_ms=0)
    assert records(reopened) == last_per_key(old, horizon=0, cleaned_below=end)
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    reopened.close()


def test_tombstones_below_the_horizon_go(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0")
    old = records(log)
    job = log.cleaning_job(log.log_end_offset, 0, 10**9, now_ms=0)
    assert job is not None
    result = clean(job, max_keys=1000)
    assert log.swap_cleaned(result, now_ms=0)
    expected = last_per_key(old, horizon=10**9, cleaned_below=result.first_dirty)
    assert records(log) == expected
    assert all(value is not None for offset, _, value in expected if offset < result.first_dirty)
    log.close()


def test_a_second_cleaning_starts_at_the_first_dirty_offset(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0")
    job = log.cleaning_job(log.log_end_offset, 0, 0, now_ms=0)
    assert job is not None
    first = clean(job, max_keys=1000)
    assert log.swap_cleaned(first, now_ms=0)
    assert log.cleaning_job(log.log_end_offset, first.first_dirty, 0, now_ms=0) is None
    log.close()


def test_a_cleaning_is_dropped_if_the_log_was_truncated_meanwhile(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0")
    job = log.cleaning_job(log.log_end_offset, 0, 0, now_ms=0)
    assert job is not None
    result = clean(job, max_keys=1000)
    log.truncate_to(log.log_end_offset - 1)
    before = records(log)
    assert not log.swap_cleaned(result, now_ms=0)
    assert records(log) == before
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    log.close()


def test_a_cleaning_whose_files_are_gone_is_not_swapped_in(tmp_path: Path) -> None:
    """A restart removes the `.cleaned` files of a cleaning that had not committed."""
    old, result = cleaned(tmp_path / "t-0")
    log = Log.open(tmp_path / "t-0", CONFIG, now_ms=0)
    assert not log.swap_cleaned(result, now_ms=0)
    assert records(log) == old
    log.close()


def test_nothing_at_or_above_the_high_watermark_or_in_the_active_segment_is_cleaned(
    tmp_path: Path,
) -> None:
    log = fill(tmp_path / "t-0")
    assert log.cleaning_job(0, 0, 0, now_ms=0) is None
    job = log.cleaning_job(log.log_end_offset, 0, 0, now_ms=0)
    assert job is not None
    assert job.cleanable[-1].next_offset <= job.later[-1].base_offset
    assert job.later[-1].next_offset == log.log_end_offset
    lagging = Log.open(tmp_path / "t-0", CONFIG, now_ms=0)
    log.close()
    lagging.update_config(
        LogConfig(segment_bytes=2048, cleanup_policy="compact", min_compaction_lag_ms=10)
    )
    assert lagging.cleaning_job(lagging.log_end_offset, 0, 0, now_ms=5) is None
    lagging.close()


def test_a_producers_batches_keep_their_identity(tmp_path: Path) -> None:
    log = fill(tmp_path / "t-0", producer_id=42)
    job = log.cleaning_job(log.log_end_offset, 0, 0, now_ms=0)
    assert job is not None
    assert log.swap_cleaned(clean(job, max_keys=1000), now_ms=0)
    for header, batch in iter_batches(log.read(0, 10**7)):
        assert (header.producer_id, header.producer_epoch) == (42, 0)
        values = decode_payload(batch).column("value").to_pylist()
        first_number = int(values[0][1:]) if values[0] is not None else header.base_offset
        assert header.base_sequence == header.base_offset == first_number
    log.close()


def _steps(directory: Path, result: CleaningResult) -> list[SwapStep]:
    return swap_steps(directory, [(g.new_base, g.replaced) for g in result.groups])


def test_a_crash_at_any_step_leaves_the_old_log_or_the_new_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    old, result = cleaned(probe)
    new = last_per_key(old, horizon=0, cleaned_below=result.first_dirty)
    assert new != old and len(result.groups) > 1
    step_count = len(_steps(probe, result))
    for stop in range(step_count + 1):
        directory = tmp_path / f"stop-{stop}-0"
        _, result = cleaned(directory)
        for step in _steps(directory, result)[:stop]:
            step()
        log = Log.open(directory, CONFIG, now_ms=0)
        got = records(log)
        log.close()
        assert got == (old if stop == 0 else new), f"stopped after {stop} of {step_count} steps"
        assert not [p for p in directory.iterdir() if p.suffix in (".cleaned", ".swap", ".tmp")]


def test_a_crash_while_writing_cleaned_files_leaves_the_old_log(tmp_path: Path) -> None:
    old, _ = cleaned(tmp_path / "t-0")
    cleaned_log = next((tmp_path / "t-0").glob("*.log.cleaned"))
    cleaned_log.write_bytes(cleaned_log.read_bytes()[:100])
    log = Log.open(tmp_path / "t-0", CONFIG, now_ms=0)
    assert records(log) == old
    log.close()


def test_the_io_throttle_sleeps_to_keep_the_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttle = IoThrottle(1000.0, clock=lambda: now[0], sleep=sleep)
    throttle.account(500)
    throttle.account(500)
    assert sum(slept) == pytest.approx(1.0)
    now[0] += 5
    throttle.account(100)
    assert sum(slept) == pytest.approx(1.0)
