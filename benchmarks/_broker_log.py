"""Reading brokers' ``broker.log`` lines in benchmarks (the one-line format of
brokerd/logging_setup.py: ``2026-11-24T06:00:00.123Z INFO broker=1 logger.name: message``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from spark_replica.tools.launcher.brokers import BrokerProcess

# A line of the controller's logger up to its message.
CONTROLLER_PREFIX = r"^(?P<time>\S+Z) \w+ broker=\d+ brokerd\.controller: "
GONE_LINE = re.compile(
    CONTROLLER_PREFIX + r"brokers changed: gone \[(?P<gone>[\d, ]*)\]",
    re.MULTILINE,
)


def log_time(match: re.Match[str]) -> float:
    """A broker.log timestamp (UTC, millisecond precision) as seconds since the epoch."""
    when = datetime.strptime(match["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return when.replace(tzinfo=UTC).timestamp()


def broker_log(broker: BrokerProcess) -> str:
    """A broker's log, its rotated files included (oldest first)."""
    paths = sorted(broker.log_dir.glob("broker.log.*"), reverse=True)
    paths.append(broker.log_dir / "broker.log")
    return "".join(p.read_text(errors="replace") for p in paths if p.exists())
