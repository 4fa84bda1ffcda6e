"""Settings of one partition's log, checked once so the log itself can trust them."""

from __future__ import annotations

from dataclasses import dataclass, fields

from spark_replica.errors import ConfigError

INT32_MAX = 2**31 - 1
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

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            optional = field.name in ("flush_messages", "flush_ms")
            if value is None and optional:
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


def _check_range(name: str, value: int, low: int, high: int | None = None) -> None:
    if value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{name} must be {bound}, not {value}")


def _check_limit(name: str, value: int) -> None:
    if value < 0 and value != UNLIMITED:
        raise ConfigError(f"{name} must be {UNLIMITED} (unlimited) or at least 0, not {value}")
