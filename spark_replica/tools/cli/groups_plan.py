"""The arithmetic of `replog groups`: where a reset moves each offset (lag is
spark_replica/tools/group_lag.py, which the console shares).

Pure functions of plain values (offsets read from the cluster are passed in), so the
rules are tested without a broker. They follow kafka-consumer-groups: a reset target
outside [earliest, latest] is clamped into it; `--to-datetime` past the last record goes
to the log end; `--shift-by` moves from the committed offset and needs one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from spark_replica.errors import ConfigError
from spark_replica.topics import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"
TO_OFFSET = "offset"
SHIFT_BY = "shift"
TO_DATETIME = "datetime"
STRATEGIES = (EARLIEST, LATEST, TO_OFFSET, SHIFT_BY, TO_DATETIME)


@dataclass(frozen=True, slots=True)
class ResetStrategy:
    kind: str
    value: int = 0  # the offset, the shift, or the timestamp in ms

    def __post_init__(self) -> None:
        if self.kind not in STRATEGIES:
            raise ConfigError(f"unknown reset strategy {self.kind!r}")
        if self.kind == TO_OFFSET and self.value < 0:
            raise ConfigError(f"--to-offset must be 0 or more, not {self.value}")


def reset_plan(
    strategy: ResetStrategy,
    partitions: list[TopicPartition],
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    at_time: Mapping[TopicPartition, int] | None = None,
) -> dict[TopicPartition, int]:
    """The new committed offset of each partition.

    `at_time` holds, for --to-datetime, the first offset whose timestamp is at or after
    the time (-1: none). A partition whose earliest or latest offset is unknown cannot be
    planned: ConfigError naming it, so nothing is half reset.
    """
    unknown = [str(tp) for tp in partitions if tp not in earliest or tp not in latest]
    if unknown:
        raise ConfigError(f"no leader answered for {', '.join(unknown)}; try again")
    if strategy.kind == SHIFT_BY:
        missing = [str(tp) for tp in partitions if committed.get(tp, -1) < 0]
        if missing:
            raise ConfigError(
                f"--shift-by moves committed offsets, and {', '.join(missing)} has none: "
                "reset those with --to-earliest, --to-latest or --to-offset"
            )
    plan = {}
    for tp in sorted(partitions):
        low, high = earliest[tp], latest[tp]
        if strategy.kind == EARLIEST:
            target = low
        elif strategy.kind == LATEST:
            target = high
        elif strategy.kind == TO_OFFSET:
            target = strategy.value
        elif strategy.kind == SHIFT_BY:
            target = committed[tp] + strategy.value
        else:
            found = -1 if at_time is None else at_time.get(tp, -1)
            target = high if found < 0 else found
        plan[tp] = min(max(target, low), high)
    return plan


def parse_partitions(spec: str) -> tuple[str, list[int] | None]:
    """`--topic T` (every partition) or `--topic T:0,2`."""
    topic, colon, numbers = spec.partition(":")  # a topic name holds no ":"
    if not topic:
        raise ConfigError(f"--topic {spec!r}: give a topic name, optionally :P,P")
    if not colon:
        return topic, None
    try:
        partitions = sorted({int(n) for n in numbers.split(",")})
    except ValueError:
        raise ConfigError(f"--topic {spec!r}: partitions must be numbers, as in T:0,1") from None
    if any(p < 0 for p in partitions):
        raise ConfigError(f"--topic {spec!r}: partitions are 0 or more")
    return topic, partitions


def parse_datetime(text: str) -> int:
    """An ISO 8601 time as milliseconds since the epoch; without a zone it is UTC."""
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"--to-datetime {text!r}: use ISO 8601, such as 2024-05-01T12:00:00 or "
            "2024-05-01T12:00:00+02:00"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)
