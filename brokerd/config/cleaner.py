"""The broker's log cleaner settings, with Kafka's names and defaults (`log.cleaner.*`).

Which logs are compacted, and how eagerly, is per topic (cleanup.policy and its
companions in brokerd.log.config); these say how much of the broker the cleaner may
use: how many threads, how much memory for the key map of one cleaning, how fast it may
read and write, and how long it sleeps when no log is dirty enough.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from spark_replica.errors import ConfigError

ENABLE_KEY = "log.cleaner.enable"
THREADS_KEY = "log.cleaner.threads"
DEDUPE_BUFFER_SIZE_KEY = "log.cleaner.dedupe.buffer.size"
IO_MAX_BYTES_PER_SECOND_KEY = "log.cleaner.io.max.bytes.per.second"
BACKOFF_MS_KEY = "log.cleaner.backoff.ms"
KEYS = (
    ENABLE_KEY,
    THREADS_KEY,
    DEDUPE_BUFFER_SIZE_KEY,
    IO_MAX_BYTES_PER_SECOND_KEY,
    BACKOFF_MS_KEY,
)

# Kafka's default for the I/O limit is Double.MAX_VALUE: no limit.
NO_IO_LIMIT = math.inf


@dataclass(frozen=True)
class CleanerConfig:
    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_max_bytes_per_second: float = NO_IO_LIMIT
    backoff_ms: int = 15_000

    def __post_init__(self) -> None:
        for key, value in (
            (THREADS_KEY, self.threads),
            (DEDUPE_BUFFER_SIZE_KEY, self.dedupe_buffer_size),
            (BACKOFF_MS_KEY, self.backoff_ms),
        ):
            if value <= 0:
                raise ConfigError(f"broker config {key} must be positive, not {value}")
        if not self.io_max_bytes_per_second > 0:
            raise ConfigError(
                f"broker config {IO_MAX_BYTES_PER_SECOND_KEY} must be positive, "
                f"not {self.io_max_bytes_per_second}"
            )

    def with_settings(self, settings: Mapping[str, str]) -> CleanerConfig:
        """Apply `log.cleaner.*` settings (keys in KEYS)."""
        fields: dict[str, Any] = {}
        for key, raw in settings.items():
            if key == ENABLE_KEY:
                fields["enable"] = _boolean(key, raw)
            elif key == THREADS_KEY:
                fields["threads"] = _integer(key, raw)
            elif key == DEDUPE_BUFFER_SIZE_KEY:
                fields["dedupe_buffer_size"] = _integer(key, raw)
            elif key == IO_MAX_BYTES_PER_SECOND_KEY:
                fields["io_max_bytes_per_second"] = _number(key, raw)
            elif key == BACKOFF_MS_KEY:
                fields["backoff_ms"] = _integer(key, raw)
            else:
                raise ConfigError(f"unknown log cleaner config {key!r}")
        return replace(self, **fields)


def _boolean(key: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"broker config {key}={raw!r}: use true or false")
    return lowered == "true"


def _integer(key: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"broker config {key}={raw!r}: not an integer") from None


def _number(key: str, raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(f"broker config {key}={raw!r}: not a number") from None
    if math.isnan(value):
        raise ConfigError(f"broker config {key}={raw!r}: not a number")
    return value
