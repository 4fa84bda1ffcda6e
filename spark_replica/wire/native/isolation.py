"""The isolation level a reader asks for, as Kafka's consumer config and Fetch name it.

read_uncommitted (0) reads up to the high watermark, records of open and aborted
transactions included; read_committed (1) stops at the last stable offset and is told
the aborted transactions of what it read, so that it can drop their records.
"""

from __future__ import annotations

from enum import IntEnum

from spark_replica.errors import ConfigError


class IsolationLevel(IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    @property
    def config_name(self) -> str:
        """`read_committed`: the value of Kafka's isolation.level."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> IsolationLevel:
        """Kafka's isolation.level value (any case) as a level; else ConfigError."""
        for level in cls:
            if text.strip().lower() == level.config_name:
                return level
        raise ConfigError(
            f"isolation level {text!r}: use read_uncommitted (the default) or read_committed"
        )
