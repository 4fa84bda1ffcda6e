"""How far each compacted log was cleaned, and when: the cleaner's memory between cleanings.

Per log, the first dirty offset (where the last cleaning stopped; the next maps only
from there) is written to `cleaner-offset-checkpoint` in the log directory, in Kafka's
checkpoint format, so that progress survives a restart.

The tombstone horizon (cleaner_plan rule 3) needs when each cleaning finished, which
Kafka's file has no room for: it is kept in memory only. After a restart the offset in
the file counts as cleaned at the restart, so tombstones live at most one
delete.retention.ms longer than they would have; never shorter.

Pure bookkeeping; the owner (the broker's cleaner, on the loop) writes the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.topics import TopicPartition

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


@dataclass
class _LogProgress:
    first_dirty: int
    # (first dirty offset after a cleaning, when it finished), oldest first.
    cleanings: list[tuple[int, int]] = field(default_factory=list)
    applied_horizon: int = 0
    truncations: int = 0
    # Whether the clean part may hold tombstones (unknown after a restart: assumed so).
    tombstones: bool = True


class CleanerProgress:
    """First dirty offsets and cleaning times of the logs of one log directory."""

    def __init__(self, checkpointed: dict[TopicPartition, int], now_ms: int) -> None:
        self._logs = {
            tp: _LogProgress(offset, [(offset, now_ms)]) for tp, offset in checkpointed.items()
        }

    def first_dirty(self, tp: TopicPartition, truncations: int) -> int:
        """Where the next cleaning of `tp` maps from; 0 after a truncation of its log.

        A truncation may have replaced records above the recorded offset with others
        that were never cleaned, so the whole log counts as dirty again.
        """
        progress = self._logs.get(tp)
        if progress is None:
            return 0
        if progress.truncations != truncations:
            self._logs[tp] = _LogProgress(0, truncations=truncations)
            return 0
        return progress.first_dirty

    def tombstone_horizon(self, tp: TopicPartition, delete_retention_ms: int, now_ms: int) -> int:
        """The end of the latest cleaning that finished at least `delete_retention_ms` ago."""
        progress = self._logs.get(tp)
        if progress is None:
            return 0
        due = [
            offset
            for offset, finished in progress.cleanings
            if finished <= now_ms - delete_retention_ms
        ]
        return max(due, default=0)

    def tombstones_due(self, tp: TopicPartition, delete_retention_ms: int, now_ms: int) -> bool:
        """Whether a cleaning now would drop tombstones the last one had to keep."""
        progress = self._logs.get(tp)
        horizon = self.tombstone_horizon(tp, delete_retention_ms, now_ms)
        return progress is not None and progress.tombstones and horizon > progress.applied_horizon

    def record(
        self,
        tp: TopicPartition,
        first_dirty: int,
        horizon: int,
        truncations: int,
        finished_ms: int,
        tombstones_kept: int,
    ) -> None:
        """Note a cleaning swapped in: cleaned up to `first_dirty`, tombstones below
        `horizon` dropped and `tombstones_kept` others left in the clean part."""
        progress = self._logs.setdefault(tp, _LogProgress(first_dirty))
        progress.first_dirty = first_dirty
        progress.tombstones = tombstones_kept > 0
        progress.applied_horizon = max(progress.applied_horizon, horizon)
        progress.truncations = truncations
        progress.cleanings = [c for c in progress.cleanings if c[0] > horizon]
        progress.cleanings.append((first_dirty, finished_ms))

    def forget(self, tp: TopicPartition) -> None:
        self._logs.pop(tp, None)

    def offsets(self) -> dict[TopicPartition, int]:
        """What the checkpoint file holds."""
        return {tp: progress.first_dirty for tp, progress in self._logs.items()}
