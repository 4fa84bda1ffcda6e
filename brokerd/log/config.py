"""Settings of one partition's log, checked once so the log itself can trust them."""

from __future__ import annotations

from dataclasses import dataclass, fields

from spark_replica.errors import ConfigError
from spark_replica.topic_config import CLEANUP_POLICIES, COMPACT, DELETE

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
UNLIMITED = -1
_DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class LogConfig:
    """How a log rolls, retains and flushes its segments.

    Sizes are bytes and times milliseconds. ``segment_bytes`` is capped at int32 because
    index entries store file positions as int32.
    """

    segment_bytes: int = 1024**3
    segment_ms: int = 7 * _DAY_MS
    retention_bytes: int = UNLIMITED
    retention_ms: int = 7 * _DAY_MS
    index_interval_bytes: int = 4096
    flush_messages: int | None = None
    flush_ms: int | None = None
    max_batch_bytes: int = 16 * 1024**2
    cleanup_policy: str = DELETE
    delete_retention_ms: int = _DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = INT64_MAX
    min_cleanable_dirty_ratio: float = 0.5

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            optional = field.name in ("flush_messages", "flush_ms")
            if field.name in ("cleanup_policy", "min_cleanable_dirty_ratio") or (
                value is None and optional
            ):
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{field.name} must be an integer, not {value!r}")
        _check_range("segment_bytes", self.segment_bytes, 1, INT32_MAX)
        _check_range("segment_ms", self.segment_ms, 1)
        _check_limit("retention_bytes", self.retention_bytes)
        _check_limit("retention_ms", self.retention_ms)
        _check_range("index_interval_bytes", self.index_interval_bytes, 0, INT32_MAX)
        if self.flush_messages is not None:
            _check_range("flush_messages", self.flush_messages, 1)
        if self.flush_ms is not None:
            _check_range("flush_ms", self.flush_ms, 0)
        _check_range("max_batch_bytes", self.max_batch_bytes, 1, INT32_MAX)
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise ConfigError(
                f"cleanup_policy must be one of {', '.join(CLEANUP_POLICIES)}, "
                f"not {self.cleanup_policy!r}"
            )
        _check_range("delete_retention_ms", self.delete_retention_ms, 0)
        _check_range("min_compaction_lag_ms", self.min_compaction_lag_ms, 0)
        _check_range("max_compaction_lag_ms", self.max_compaction_lag_ms, 1)
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise ConfigError(f"min_cleanable_dirty_ratio must be between 0 and 1, not {ratio!r}")

    @property
    def compacts(self) -> bool:
        """Whether the log cleaner keeps only the last record per key of this log."""
        return COMPACT in self.cleanup_policy.split(",")

    @property
    def deletes(self) -> bool:
        """Whether time and size retention delete old segments of this log."""
        return DELETE in self.cleanup_policy.split(",")


def _check_range(name: str, value: int, low: int, high: int | None = None) -> None:
    if value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{name} must be {bound}, not {value}")


def _check_limit(name: str, value: int) -> None:
    if value < 0 and value != UNLIMITED:
        raise ConfigError(f"{name} must be {UNLIMITED} (unlimited) or at least 0, not {value}")
