"""The broker log's settings and line format: plain values, no processes."""

from __future__ import annotations

import logging
import re
import sys

import pytest

from brokerd.logging_setup import LogSettings, OneLineFormatter
from spark_replica.errors import ConfigError

LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"broker=7 [\w.]+: .*$"
)


def test_file_settings_then_flags_win() -> None:
    from_file = LogSettings().with_properties(
        {
            "broker.log.max.bytes": "2048",
            "broker.log.backup.count": "3",
            "broker.log.level": "warn",
            "broker.log.logger.brokerd.zk": "DEBUG",
        }
    )
    assert from_file == LogSettings(2048, 3, logging.WARNING, {"brokerd.zk": logging.DEBUG})
    flagged = from_file.with_flags("4096", None, "ERROR", ["brokerd.zk=INFO", "kazoo=TRACE"])
    assert flagged == LogSettings(
        4096, 3, logging.ERROR, {"brokerd.zk": logging.INFO, "kazoo": logging.DEBUG}
    )
    assert LogSettings().with_flags(None, None, None, []) == LogSettings()


@pytest.mark.parametrize(
    ("properties", "flags", "message"),
    [
        ({"broker.log.level": "LOUD"}, None, "broker.log.level='LOUD' is not a log level"),
        ({"broker.log.max.bytes": "big"}, None, "broker.log.max.bytes='big': not an integer"),
        ({"broker.log.max.bytes": "0"}, None, "max bytes must be positive"),
        ({"broker.log.backup.count": "0"}, None, "backup count must be at least 1"),
        ({"broker.log.colour": "red"}, None, "unknown broker log setting 'broker.log.colour'"),
        ({}, ("1x", None, None, []), "--log-max-bytes='1x'"),
        ({}, (None, None, "verbose", []), "--log-level='verbose'"),
        ({}, (None, None, None, ["brokerd"]), "use NAME=LEVEL"),
        ({}, (None, None, None, ["brokerd=shout"]), "--logger brokerd='shout'"),
    ],
)
def test_bad_settings_are_config_errors(
    properties: dict[str, str], flags: tuple | None, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        settings = LogSettings().with_properties(properties)
        if flags is not None:
            settings.with_flags(*flags)


def test_one_event_is_one_line_with_the_broker_id() -> None:
    formatter = OneLineFormatter(7)
    plain = logging.LogRecord("brokerd.controller", logging.INFO, "f", 1, "elected %s", (3,), None)
    assert LINE.match(formatter.format(plain))
    assert formatter.format(plain).endswith(" INFO broker=7 brokerd.controller: elected 3")
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        record = logging.LogRecord(
            "brokerd.server", logging.ERROR, "f", 1, "failed:\n%s", ("here",), True
        )
        record.exc_info = sys.exc_info()
    line = formatter.format(record)
    assert "\n" not in line and LINE.match(line)
    assert "failed:\\nhere\\nTraceback (most recent call last):\\n" in line
    assert line.endswith("ValueError: bad\\nthing")
