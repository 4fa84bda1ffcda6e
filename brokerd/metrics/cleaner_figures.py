"""The log cleaner's figures under Kafka's metric names, from what the cleaner noted.

Kafka's LogCleaner reports, for its threads' most recent cleanings, how much of what
they read they wrote back (`cleaner-recopy-percent`, averaged: near 100 means cleaning
frees little) and the longest of them (`max-clean-time-secs`); `time-since-last-run-ms`
grows without bound when the cleaner threads are stuck or dead, which is what operators
alert on; and LogCleanerManager's `max-dirty-percent` is the dirtiest compacted log's
share of cleanable bytes not yet cleaned, as of the cleaner's last look.
`max-buffer-utilization-percent` is how full the fullest of those cleanings' key maps
was: near 100 a cleaning stops early for want of log.cleaner.dedupe.buffer.size and
the log needs several to be clean. Pure: the cleaner passes its notes and the time in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PERCENT = 100.0


@dataclass(frozen=True, slots=True)
class CleaningStats:
    """One finished cleaning: bytes it read (the dirty part twice: to map the keys and
    to copy), bytes it wrote into the new segments, its wall-clock length, and the share
    of the dedupe buffer its key map took (0 to 1)."""

    bytes_read: int
    bytes_written: int
    elapsed_s: float
    buffer_utilization: float

    @property
    def recopy_percent(self) -> float:
        return PERCENT * self.bytes_written / self.bytes_read if self.bytes_read else 0.0


@dataclass(frozen=True, slots=True)
class CleanerFigures:
    max_dirty_percent: float
    recopy_percent: float
    max_clean_time_s: float
    time_since_last_run_ms: int
    max_buffer_utilization_percent: float


def cleaner_figures(
    recent: Sequence[CleaningStats], dirtiest_ratio: float, last_run_ms: int, now_ms: int
) -> CleanerFigures:
    """`recent`: the last cleaning of each cleaner thread (none yet: zeros, as Kafka's
    gauges start); `last_run_ms`: when a cleaner last finished looking for, or cleaning,
    a log (the cleaner's start before that)."""
    return CleanerFigures(
        max_dirty_percent=PERCENT * dirtiest_ratio,
        recopy_percent=sum(s.recopy_percent for s in recent) / len(recent) if recent else 0.0,
        max_clean_time_s=max((s.elapsed_s for s in recent), default=0.0),
        time_since_last_run_ms=max(0, now_ms - last_run_ms),
        max_buffer_utilization_percent=PERCENT
        * max((s.buffer_utilization for s in recent), default=0.0),
    )
