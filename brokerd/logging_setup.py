"""The broker's own log: `broker.log` in its log dir, rotated by size, one line per event.

Every line reads

    2024-05-01T12:00:00.123Z WARNING broker=1 brokerd.controller: the message

(UTC time to the millisecond, level, broker id, logger name, message), so that `grep`,
`sort` and log shippers can take lines from several brokers at once without parsing
anything else. A traceback or a message with newlines stays on its event's line: every
line break inside it is written as the two characters `\\n`.

Settings come from flags (`--log-level`, `--logger NAME=LEVEL`, `--log-max-bytes`,
`--log-backup-count`) or from the `broker.log.*` keys of the properties file
(`broker.log.level`, `broker.log.logger.NAME`, `broker.log.max.bytes`,
`broker.log.backup.count`); flags win. Bad values are ConfigErrors naming the setting.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path

from spark_replica.errors import ConfigError

DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_BACKUP_COUNT = 10
DEFAULT_LEVEL = "INFO"

PROPERTY_PREFIX = "broker.log."
MAX_BYTES_KEY = "broker.log.max.bytes"
BACKUP_COUNT_KEY = "broker.log.backup.count"
LEVEL_KEY = "broker.log.level"
# Loggers a broker keeps at WARNING unless told otherwise (`--logger NAME=LEVEL`): the
# client's request log (`replog -v`'s lines) would write a line for every replica fetch
# and controller request the broker itself sends, thousands a second.
QUIET_LOGGERS = {"spark_replica.client.requests": logging.WARNING}
LOGGER_PREFIX = "broker.log.logger."

# log4j's names too, so that an operator's habits (WARN, TRACE, FATAL) work.
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
}


@dataclass(frozen=True)
class LogSettings:
    max_bytes: int = DEFAULT_MAX_BYTES
    backup_count: int = DEFAULT_BACKUP_COUNT
    level: int = logging.INFO
    logger_levels: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_bytes <= 0:
            raise ConfigError(f"log max bytes must be positive, not {self.max_bytes}")
        # Python's RotatingFileHandler never rotates with no backups: the file would grow.
        if self.backup_count < 1:
            raise ConfigError(f"log backup count must be at least 1, not {self.backup_count}")

    def with_properties(self, properties: Mapping[str, str]) -> LogSettings:
        """Apply the `broker.log.*` keys of a properties file; another key is a ConfigError."""
        settings = self
        loggers = dict(self.logger_levels)
        for key, raw in properties.items():
            if key == MAX_BYTES_KEY:
                settings = replace(settings, max_bytes=parse_count(key, raw))
            elif key == BACKUP_COUNT_KEY:
                settings = replace(settings, backup_count=parse_count(key, raw))
            elif key == LEVEL_KEY:
                settings = replace(settings, level=parse_level(key, raw))
            elif key.startswith(LOGGER_PREFIX) and len(key) > len(LOGGER_PREFIX):
                loggers[key.removeprefix(LOGGER_PREFIX)] = parse_level(key, raw)
            else:
                known = f"{MAX_BYTES_KEY}, {BACKUP_COUNT_KEY}, {LEVEL_KEY}, {LOGGER_PREFIX}NAME"
                raise ConfigError(f"unknown broker log setting {key!r}; known: {known}")
        return replace(settings, logger_levels=loggers)

    def with_flags(
        self,
        max_bytes: str | None,
        backup_count: str | None,
        level: str | None,
        loggers: Sequence[str],
    ) -> LogSettings:
        """Apply command-line flags (None: not given), which win over the file."""
        settings = self
        if max_bytes is not None:
            settings = replace(settings, max_bytes=parse_count("--log-max-bytes", max_bytes))
        if backup_count is not None:
            count = parse_count("--log-backup-count", backup_count)
            settings = replace(settings, backup_count=count)
        if level is not None:
            settings = replace(settings, level=parse_level("--log-level", level))
        levels = dict(settings.logger_levels)
        for item in loggers:
            name, equals, value = item.partition("=")
            if not equals or not name.strip():
                raise ConfigError(
                    f"--logger {item!r}: use NAME=LEVEL, e.g. brokerd.controller=DEBUG"
                )
            levels[name.strip()] = parse_level(f"--logger {name.strip()}", value)
        return replace(settings, logger_levels=levels)


def parse_level(setting: str, raw: str) -> int:
    level = _LEVELS.get(raw.strip().upper())
    if level is None:
        names = ", ".join(_LEVELS)
        raise ConfigError(f"{setting}={raw!r} is not a log level; use one of {names}")
    return level


def parse_count(setting: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"{setting}={raw!r}: not an integer") from None


def _fold(text: str) -> str:
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


class OneLineFormatter(logging.Formatter):
    """The documented line format, with the broker id fixed for the process."""

    def __init__(self, broker_id: int) -> None:
        super().__init__()
        self._broker = f"broker={broker_id}"

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
        message = record.getMessage()
        if record.exc_info:
            message = f"{message}\n{self.formatException(record.exc_info)}"
        if record.stack_info:
            message = f"{message}\n{self.formatStack(record.stack_info)}"
        return f"{stamp} {record.levelname} {self._broker} {record.name}: {_fold(message)}"


def configure_broker_logging(settings: LogSettings, log_file: Path, broker_id: int) -> None:
    """Send every record of the process to the rotating `log_file`, at the set levels."""
    handler = RotatingFileHandler(
        log_file,
        maxBytes=settings.max_bytes,
        backupCount=settings.backup_count,
        encoding="utf-8",
    )
    handler.setFormatter(OneLineFormatter(broker_id))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(settings.level)
    for name, level in {**QUIET_LOGGERS, **settings.logger_levels}.items():
        logging.getLogger(name).setLevel(level)
