"""The cleaner's progress per log: first dirty offsets, and when tombstones may go."""

from __future__ import annotations

from pathlib import Path

from brokerd.log import read_offsets_checkpoint, write_offsets_checkpoint
from brokerd.log.cleaner_checkpoint import CLEANER_CHECKPOINT_FILE, CleanerProgress
from spark_replica.topics import TopicPartition

TP = TopicPartition("cdc", 0)
RETENTION = 1_000


def test_a_new_log_is_dirty_from_its_start_and_has_no_horizon() -> None:
    progress = CleanerProgress({}, now_ms=0)
    assert progress.first_dirty(TP, truncations=0) == 0
    assert progress.tombstone_horizon(TP, RETENTION, now_ms=10**6) == 0
    assert not progress.tombstones_due(TP, RETENTION, now_ms=10**6)


def test_tombstones_become_due_delete_retention_after_the_cleaning_that_reached_them() -> None:
    progress = CleanerProgress({}, now_ms=0)
    progress.record(TP, 500, horizon=0, truncations=0, finished_ms=100, tombstones_kept=3)
    assert progress.first_dirty(TP, truncations=0) == 500
    assert progress.tombstone_horizon(TP, RETENTION, now_ms=1_099) == 0
    assert not progress.tombstones_due(TP, RETENTION, now_ms=1_099)
    assert progress.tombstone_horizon(TP, RETENTION, now_ms=1_100) == 500
    assert progress.tombstones_due(TP, RETENTION, now_ms=1_100)
    progress.record(TP, 800, horizon=500, truncations=0, finished_ms=1_200, tombstones_kept=1)
    assert not progress.tombstones_due(TP, RETENTION, now_ms=1_500)
    assert progress.tombstone_horizon(TP, RETENTION, now_ms=2_200) == 800


def test_no_cleaning_is_due_for_tombstones_the_last_cleaning_did_not_keep() -> None:
    progress = CleanerProgress({}, now_ms=0)
    progress.record(TP, 500, horizon=0, truncations=0, finished_ms=0, tombstones_kept=0)
    assert not progress.tombstones_due(TP, RETENTION, now_ms=10**6)


def test_a_truncation_makes_the_whole_log_dirty_again() -> None:
    progress = CleanerProgress({TP: 700}, now_ms=0)
    assert progress.first_dirty(TP, truncations=0) == 700
    assert progress.first_dirty(TP, truncations=1) == 0
    assert progress.offsets() == {TP: 0}


def test_after_a_restart_the_checkpoint_counts_as_cleaned_then(tmp_path: Path) -> None:
    """Tombstones may outlive delete.retention.ms by one restart's worth, never less."""
    path = tmp_path / CLEANER_CHECKPOINT_FILE
    write_offsets_checkpoint(path, {TP: 900})
    progress = CleanerProgress(read_offsets_checkpoint(path), now_ms=5_000)
    assert progress.first_dirty(TP, truncations=0) == 900
    assert progress.tombstone_horizon(TP, RETENTION, now_ms=5_999) == 0
    assert progress.tombstones_due(TP, RETENTION, now_ms=6_000)
    progress.forget(TP)
    assert progress.offsets() == {}
