"""The leader epoch cache alone, its checkpoint file, and the cache kept by a Log."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from brokerd.log import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    UNDEFINED_EPOCH_END,
    EpochEntry,
    LeaderEpochCache,
    Log,
    LogConfig,
)
from spark_replica.errors import ProtocolError
from spark_replica.records import build_batch

LEO = 40
"""Log end offset given to end_offset_for with the cache made by `cache_of`."""


def cache_of(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache.load(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE)
    for epoch, start_offset in entries:
        cache.assign(epoch, start_offset)
    return cache


def pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [tuple(entry) for entry in cache.entries]


def test_empty_cache(tmp_path: Path) -> None:
    cache = cache_of(tmp_path)
    assert (cache.latest_epoch, cache.latest_entry, cache.entries) == (-1, None, ())
    assert cache.end_offset_for(0, LEO) == UNDEFINED_EPOCH_END
    assert cache.end_offset_for(-1, LEO) == UNDEFINED_EPOCH_END


def test_assign_keeps_only_newer_epochs(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (1, 0), (3, 10), (3, 12), (2, 20), (-1, 30))
    assert pairs(cache) == [(1, 0), (3, 10)]
    assert cache.latest_entry == EpochEntry(3, 10)
    assert cache.latest_epoch == 3


@pytest.mark.parametrize(
    ("start_offset", "expected"),
    [(10, [(1, 0), (5, 10)]), (7, [(1, 0), (5, 7)]), (0, [(5, 0)])],
)
def test_assign_below_known_starts_drops_them(
    tmp_path: Path, start_offset: int, expected: list[tuple[int, int]]
) -> None:
    """A new epoch starting at or below known starts means the log was truncated there."""
    cache = cache_of(tmp_path, (1, 0), (3, 10), (4, 15), (5, start_offset))
    assert pairs(cache) == expected


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (7, (7, LEO)),  # the latest epoch ends at the log end
        (3, (3, 25)),  # an older one where the next began
        (1, (1, 10)),
        (2, (1, 10)),  # never led here: where the largest epoch below it ended
        (5, (3, 25)),
        (0, UNDEFINED_EPOCH_END),  # older than anything known
        (-1, UNDEFINED_EPOCH_END),
        (8, UNDEFINED_EPOCH_END),  # newer than anything known
    ],
)
def test_end_offset_for(tmp_path: Path, requested: int, expected: tuple[int, int]) -> None:
    cache = cache_of(tmp_path, (1, 0), (3, 10), (7, 25))
    assert cache.end_offset_for(requested, LEO) == expected


def test_kip_101_follower_with_an_epoch_the_leader_never_saw(tmp_path: Path) -> None:
    """Old leader A wrote [6, 10) in epoch 1 and died before B copied it; B led epoch 2.

    A, now a follower, asks B where epoch 1 ended: B never had epoch 1 and answers
    where epoch 0 ended (8). A then asks itself where epoch 0 ended (6), truncates to
    the smaller, and copies B's log from there on.
    """
    leader = cache_of(tmp_path / "b", (0, 0), (2, 8))
    follower = cache_of(tmp_path / "a", (0, 0), (1, 6))
    assert leader.end_offset_for(follower.latest_epoch, 12) == (0, 8)
    assert follower.end_offset_for(0, 10) == (0, 6)
    follower.truncate_from_end(min(6, 8))
    follower.assign(0, 6)
    follower.assign(2, 8)
    assert follower.entries == leader.entries


@pytest.mark.parametrize(
    ("end_offset", "expected"),
    [(30, [(1, 0), (3, 10), (7, 25)]), (25, [(1, 0), (3, 10)]), (11, [(1, 0), (3, 10)]), (0, [])],
)
def test_truncate_from_end(
    tmp_path: Path, end_offset: int, expected: list[tuple[int, int]]
) -> None:
    cache = cache_of(tmp_path, (1, 0), (3, 10), (7, 25))
    cache.truncate_from_end(end_offset)
    assert pairs(cache) == expected


@pytest.mark.parametrize(
    ("start_offset", "expected"),
    [
        (0, [(1, 5), (3, 10), (7, 25)]),  # before the first entry: nothing to drop
        (5, [(1, 5), (3, 10), (7, 25)]),
        (10, [(3, 10), (7, 25)]),
        (12, [(3, 12), (7, 25)]),
        (99, [(7, 99)]),  # past the log end (retention emptied it): the latest is kept
    ],
)
def test_truncate_from_start(
    tmp_path: Path, start_offset: int, expected: list[tuple[int, int]]
) -> None:
    cache = cache_of(tmp_path, (1, 5), (3, 10), (7, 25))
    cache.truncate_from_start(start_offset)
    assert pairs(cache) == expected
    assert cache.end_offset_for(1, LEO) == (UNDEFINED_EPOCH_END if start_offset >= 10 else (1, 10))


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (0, 0), (4, 17), (9, 2**40))
    cache.flush()
    assert cache.path.read_text() == "0\n3\n0 0\n4 17\n9 1099511627776\n"
    assert not cache.path.with_name(cache.path.name + ".tmp").exists()
    assert LeaderEpochCache.load(cache.path).entries == cache.entries


def test_flush_writes_only_changes(tmp_path: Path) -> None:
    cache = cache_of(tmp_path)
    cache.flush()
    assert cache.path.read_text() == "0\n0\n"
    for unchanged in (
        lambda: None,
        lambda: cache.assign(-1, 0),
        lambda: cache.truncate_from_end(5),
    ):
        cache.path.write_text("untouched")
        unchanged()
        cache.flush()
        assert cache.path.read_text() == "untouched"
    cache.assign(2, 5)
    cache.flush()
    assert pairs(LeaderEpochCache.load(cache.path)) == [(2, 5)]


def test_clear_deletes_the_file_at_once(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (2, 5))
    cache.flush()
    cache.clear()
    assert (cache.entries, cache.path.exists()) == ((), False)
    cache.flush()
    assert LeaderEpochCache.load(cache.path).entries == ()


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("", 1),
        ("1\n0\n", 1),
        ("0\nx\n", 2),
        ("0\n2\n1 0\n", 2),
        ("0\n1\n1\n", 3),
        ("0\n1\n1 0 3\n", 3),
        ("0\n1\n-1 0\n", 3),
        ("0\n2\n1 0\n1 5\n", 4),
        ("0\n2\n1 5\n2 5\n", 4),
    ],
)
def test_malformed_checkpoint_names_the_line(tmp_path: Path, content: str, line: int) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    path.write_text(content)
    with pytest.raises(ProtocolError, match=f"line {line}:"):
        LeaderEpochCache.load(path)


# The cache inside a Log.

SMALL_SEGMENTS = {"segment_bytes": 3 * len(build_batch(["v0"], timestamps=[0]))}
"""Three one-record batches per segment."""


def open_log(directory: Path, **settings: int) -> Log:
    return Log.open(directory, LogConfig(**settings), now_ms=0)


def epoch_batches(base_offset: int, *epochs: int) -> bytes:
    """One one-record batch per epoch, at consecutive offsets from `base_offset`."""
    return b"".join(
        build_batch(["v0"], timestamps=[0], base_offset=base_offset + i, leader_epoch=epoch)
        for i, epoch in enumerate(epochs)
    )


def follower_log(directory: Path, *epochs: int, **settings: int) -> Log:
    """A log holding one one-record batch per epoch, appended as a follower."""
    log = open_log(directory, **settings)
    for epoch in epochs:
        log.append(epoch_batches(log.log_end_offset, epoch), assign_offsets=False, now_ms=0)
    return log


def crash_copy(log: Log, directory: Path) -> Log:
    """The log as reopened after a crash now: written bytes are there, flushed or not."""
    shutil.copytree(log.directory, directory)
    return open_log(directory)


def test_leader_appends_record_the_stamped_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(epoch_batches(0, -1), assign_offsets=True, now_ms=0)
    assert log.epoch_cache.entries == ()
    for epoch in (2, 2, 5):
        log.append(epoch_batches(70, 9, 9), assign_offsets=True, leader_epoch=epoch, now_ms=0)
    assert pairs(log.epoch_cache) == [(2, 1), (5, 5)]
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(5) == (5, 7)


def test_follower_appends_record_the_epochs_as_stored(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(epoch_batches(0, -1, 1, 1, 3, 2, 4), assign_offsets=False, now_ms=0)
    assert pairs(log.epoch_cache) == [(1, 1), (3, 3), (4, 5)]


def test_epochs_survive_reopen(tmp_path: Path) -> None:
    log = follower_log(tmp_path, 0, 0, 2, 2, 2, 3, 6, **SMALL_SEGMENTS)
    log.close()
    path = log.directory / LEADER_EPOCH_CHECKPOINT_FILE
    assert path.read_text() == "0\n4\n0 0\n2 2\n3 5\n6 6\n"
    assert pairs(open_log(log.directory, **SMALL_SEGMENTS).epoch_cache) == [
        (0, 0),
        (2, 2),
        (3, 5),
        (6, 6),
    ]


def test_missing_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    log = follower_log(tmp_path, -1, 1, 1, 2, 2, 2, 5, **SMALL_SEGMENTS)
    assert log.segment_count == 3
    log.close()
    (log.directory / LEADER_EPOCH_CHECKPOINT_FILE).unlink()
    reopened = open_log(log.directory, **SMALL_SEGMENTS)
    assert pairs(reopened.epoch_cache) == [(1, 1), (2, 3), (5, 6)]
    assert (log.directory / LEADER_EPOCH_CHECKPOINT_FILE).exists()


def test_malformed_checkpoint_fails_open(tmp_path: Path) -> None:
    log = follower_log(tmp_path, 1)
    log.close()
    (log.directory / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n1\n1 x\n")
    with pytest.raises(ProtocolError, match="line 3:"):
        open_log(log.directory)


def test_truncate_to_trims_and_writes_at_once(tmp_path: Path) -> None:
    log = follower_log(tmp_path, 1, 1, 3, 3, 4, 6, **SMALL_SEGMENTS)
    log.truncate_to(4)
    assert pairs(log.epoch_cache) == [(1, 0), (3, 2)]
    assert pairs(LeaderEpochCache.load(log.epoch_cache.path)) == [(1, 0), (3, 2)]
    log.truncate_to(1)
    assert pairs(log.epoch_cache) == [(1, 0)]


def test_truncation_is_written_before_later_appends(tmp_path: Path) -> None:
    """A follower drops its own epoch-4 records and copies the leader's epoch-3 ones.

    Had the checkpoint still named epoch 4 at the crash, no header could correct it.
    """
    log = follower_log(tmp_path, 1, 3, 4, 4)
    log.flush()
    log.truncate_to(2)
    log.append(epoch_batches(2, 3, 3), assign_offsets=False, now_ms=0)
    assert pairs(crash_copy(log, tmp_path / "crashed").epoch_cache) == [(1, 0), (3, 1)]


def test_epochs_appended_since_the_last_flush_are_found_on_open(tmp_path: Path) -> None:
    log = follower_log(tmp_path, 1, 1, 2, 4, 4, 4, 7, **SMALL_SEGMENTS)
    assert log.segment_count == 3
    assert LeaderEpochCache.load(log.epoch_cache.path).latest_epoch == 4  # written by the roll
    crashed = crash_copy(log, tmp_path / "crashed")
    assert pairs(crashed.epoch_cache) == [(1, 0), (2, 2), (4, 3), (7, 6)]


def test_a_torn_tail_takes_its_epochs(tmp_path: Path) -> None:
    log = follower_log(tmp_path, 1, 2, 2, 3, 5, **SMALL_SEGMENTS)
    log.close()
    active = sorted(log.directory.glob("*.log"))[-1]
    os.truncate(active, active.stat().st_size - 10)
    reopened = open_log(log.directory, **SMALL_SEGMENTS)
    assert reopened.log_end_offset == 4
    assert pairs(reopened.epoch_cache) == [(1, 0), (2, 1), (3, 3)]


def test_retention_moves_the_epoch_in_force_to_the_new_start(tmp_path: Path) -> None:
    log = follower_log(tmp_path, 1, 2, 2, 2, 3, 3, 3, 3, **SMALL_SEGMENTS, retention_bytes=0)
    assert log.delete_expired_segments(now_ms=0) == 2
    assert pairs(log.epoch_cache) == [(3, 6)]
    assert log.end_offset_for_epoch(2) == UNDEFINED_EPOCH_END
    assert log.end_offset_for_epoch(3) == (3, 8)
    assert pairs(LeaderEpochCache.load(log.epoch_cache.path)) == [(3, 6)]


def test_open_moves_epochs_up_to_a_log_start_that_a_crash_left_unrecorded(
    tmp_path: Path,
) -> None:
    """Retention deleted the first segment, and the process died before writing the cache."""
    log = follower_log(tmp_path, 1, 2, 2, 2, **SMALL_SEGMENTS)
    log.close()
    for path in log.directory.glob("00000000000000000000.*"):
        path.unlink()
    assert pairs(open_log(log.directory, **SMALL_SEGMENTS).epoch_cache) == [(2, 3)]


def test_an_emptied_log_keeps_its_latest_epoch_until_reopened(tmp_path: Path) -> None:
    """With no records left the leader can still say where its epoch ended, until a restart
    finds an entry at the log end with no records, as after a torn tail, and drops it."""
    log = follower_log(tmp_path, 1, 2, 2, 3, **SMALL_SEGMENTS, retention_ms=100)
    log.delete_expired_segments(now_ms=1000)
    assert (log.log_start_offset, log.log_end_offset) == (4, 4)
    assert log.end_offset_for_epoch(3) == (3, 4)
    log.close()
    assert open_log(log.directory, **SMALL_SEGMENTS).epoch_cache.entries == ()


def test_truncate_fully_clears_the_cache(tmp_path: Path) -> None:
    log = follower_log(tmp_path, 1, 2)
    log.truncate_fully_and_start_at(50)
    assert log.epoch_cache.entries == ()
    log.append(epoch_batches(50, 2), assign_offsets=False, now_ms=0)
    assert pairs(log.epoch_cache) == [(2, 50)]
