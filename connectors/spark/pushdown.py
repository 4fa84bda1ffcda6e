"""Filter pushdown for batch reads: Spark's filters turned into the ranges a read needs.

Spark hands a batch reader the filters of a query's WHERE clause it could translate (a
conjunction: every one must hold) and takes back those it must still evaluate itself.
This module decides, without I/O, what each filter on `topic`, `partition`, `offset` or
`timestamp` lets the driver skip:

- topic and partition filters choose partitions exactly: a partition is planned only if
  all of them hold for it, so Spark need not evaluate them again;
- offset filters cut each partition's range down to the offsets they admit, exactly (a
  short IN list becomes one range per run of consecutive values; a long one is read as
  the span from its first to its last value, and then Spark filters the rows);
- timestamp filters are only a hint: record times need not grow with offsets (only a
  log-append-time topic guarantees it), so the most they allow is to start a range at
  the first offset whose record is at or after the earliest time they admit, which the
  driver asks the partition's leader for. Spark still evaluates them on every row.

Anything else (other columns, <> and the NOTs Spark's optimizer keeps, OR, literals of
an unexpected type) narrows nothing and is left to Spark. The four columns are never
null: IS NOT NULL on them holds for every row, IS NULL for none.

Spark calls `pushFilters` only when the session sets
`spark.sql.python.filterPushdown.enabled=true`, and fails any read whose reader has the
method while it is off; so pushdown is also asked for by the source option
`filterPushdown=true` (default false), and a session that does not enable it keeps
reading as before.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)

from connectors.spark.offsets import OffsetRange
from connectors.spark.source_options import OffsetSpec
from spark_replica.errors import ConfigError
from spark_replica.topics import TopicPartition

FILTER_PUSHDOWN = "filterPushdown"

TOPIC = "topic"
PARTITION = "partition"
OFFSET = "offset"
TIMESTAMP = "timestamp"
NEVER_NULL = frozenset({TOPIC, PARTITION, OFFSET, TIMESTAMP})

# Bounds of the integer sets below: every 64-bit value lies in [LOWEST, BEYOND).
LOWEST = -(2**63)
BEYOND = 2**63

# An offset filter that admits more separate spans than this is read as one span from
# the first to the last, and Spark filters the rows: each span is a task of its own.
MAX_OFFSET_SPANS = 16

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

_COMPARISONS: dict[type[Filter], str] = {
    EqualTo: "=",
    EqualNullSafe: "=",  # the same as = on a column that is never null
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    In: "in",
}
_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "=": operator.eq,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def filter_pushdown_enabled(options: Mapping[str, str]) -> bool:
    """Whether the source option filterPushdown asks for a reader that takes filters."""
    raw = {key.lower(): value for key, value in options.items()}.get(FILTER_PUSHDOWN.lower())
    if raw is None:
        return False
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(
            f"{FILTER_PUSHDOWN}={raw!r}: use true or false (true needs the Spark setting "
            "spark.sql.python.filterPushdown.enabled=true as well)"
        )
    return lowered == "true"


@dataclass(frozen=True, slots=True)
class Intervals:
    """A set of integers: sorted, disjoint, non-touching half-open spans [low, high)."""

    spans: tuple[tuple[int, int], ...]

    @classmethod
    def everything(cls) -> Intervals:
        return cls(((LOWEST, BEYOND),))

    @classmethod
    def nothing(cls) -> Intervals:
        return cls(())

    @classmethod
    def points(cls, values: Iterable[int]) -> Intervals:
        spans: list[tuple[int, int]] = []
        for value in sorted(set(values)):
            if spans and spans[-1][1] == value:
                spans[-1] = (spans[-1][0], value + 1)
            else:
                spans.append((value, value + 1))
        return cls(tuple(spans))

    @classmethod
    def where(cls, op: str, values: Sequence[int]) -> Intervals:
        """The integers x for which `x op value` holds (`x in values` for "in")."""
        if op == "in":
            return cls.points(values)
        (value,) = values
        low, high = {
            "=": (value, value + 1),
            ">": (value + 1, BEYOND),
            ">=": (value, BEYOND),
            "<": (LOWEST, value),
            "<=": (LOWEST, value + 1),
        }[op]
        low, high = max(low, LOWEST), min(high, BEYOND)
        return cls(((low, high),) if low < high else ())

    def __and__(self, other: Intervals) -> Intervals:
        spans = []
        mine, theirs = 0, 0
        while mine < len(self.spans) and theirs < len(other.spans):
            (a_low, a_high), (b_low, b_high) = self.spans[mine], other.spans[theirs]
            low, high = max(a_low, b_low), min(a_high, b_high)
            if low < high:
                spans.append((low, high))
            if a_high <= b_high:
                mine += 1
            else:
                theirs += 1
        return Intervals(tuple(spans))

    def __contains__(self, value: int) -> bool:
        return any(low <= value < high for low, high in self.spans)

    @property
    def empty(self) -> bool:
        return not self.spans

    @property
    def lowest(self) -> int | None:
        return self.spans[0][0] if self.spans else None

    def hull(self) -> Intervals:
        """One span from the lowest value to the highest."""
        if not self.spans:
            return self
        return Intervals(((self.spans[0][0], self.spans[-1][1]),))

    def within(self, start: int, end: int) -> list[tuple[int, int]]:
        """The non-empty parts of [start, end) this set holds, in order."""
        if start >= end:
            return []
        return list((self & Intervals(((start, end),))).spans)


@dataclass(frozen=True, slots=True)
class Condition:
    """One comparison of a column with literals, as a pushed filter gave it."""

    op: str
    values: tuple[str, ...]

    def holds(self, value: str) -> bool:
        if self.op == "in":
            return value in self.values
        return _OPERATORS[self.op](value, self.values[0])


@dataclass(frozen=True)
class Pushdown:
    """What the pushed filters let a batch read skip; the default skips nothing.

    Plain values only: Spark pickles the reader that holds it to its tasks.
    """

    topic: tuple[Condition, ...] = ()
    partitions: Intervals = field(default_factory=Intervals.everything)
    offsets: Intervals = field(default_factory=Intervals.everything)
    timestamps_ms: Intervals = field(default_factory=Intervals.everything)

    def reads(self, tp: TopicPartition) -> bool:
        """Whether the filters leave any record of `tp` to read."""
        return (
            not self.reads_nothing
            and tp.partition in self.partitions
            and all(condition.holds(tp.topic) for condition in self.topic)
        )

    @property
    def reads_nothing(self) -> bool:
        return self.partitions.empty or self.offsets.empty or self.timestamps_ms.empty

    @property
    def first_timestamp_ms(self) -> int | None:
        """The earliest record time the filters admit, if it can narrow a ListOffsets lookup.

        ListOffsets takes times of 0 ms and later (negative values are its special
        specs), so an earlier bound narrows nothing.
        """
        lowest = self.timestamps_ms.lowest
        return lowest if lowest is not None and lowest > 0 else None

    def narrow(self, ranges: Iterable[OffsetRange]) -> list[OffsetRange]:
        """The parts of `ranges` in partitions the filters keep, at offsets they admit."""
        if self.reads_nothing:
            return []
        return [
            OffsetRange(r.tp, low, high)
            for r in ranges
            if self.reads(r.tp)
            for low, high in self.offsets.within(r.start, r.end)
        ]


NO_PUSHDOWN = Pushdown()


def start_at(
    ranges: Iterable[OffsetRange], starts: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """Ranges begun no earlier than `starts` (offsets found by timestamp); empty ones dropped."""
    moved = []
    for r in ranges:
        start = max(r.start, starts.get(r.tp, r.start))
        if start < r.end:
            moved.append(OffsetRange(r.tp, start, r.end))
    return moved


def without(spec: OffsetSpec, excluded: Iterable[TopicPartition]) -> OffsetSpec:
    """`spec` with no entries for partitions the filters exclude (which exist, unread).

    Entries naming partitions that do not exist stay, so that the option is still
    refused for naming them.
    """
    dropped = set(excluded)
    return replace(spec, offsets={tp: o for tp, o in spec.offsets.items() if tp not in dropped})


def push_filters(filters: Iterable[Filter]) -> tuple[Pushdown, list[Filter]]:
    """What `filters` (all of which must hold) narrow, and those Spark must still evaluate.

    The returned filters are the very objects given, as Spark requires.
    """
    topic: list[Condition] = []
    partitions = offsets = timestamps = Intervals.everything()
    offset_filters: list[Filter] = []
    unhandled: list[Filter] = []
    for pushed in filters:
        column = _column(pushed)
        op = _COMPARISONS.get(type(pushed))
        literals = _literals(pushed)
        if column not in NEVER_NULL:
            unhandled.append(pushed)
        elif isinstance(pushed, IsNotNull):
            continue
        elif isinstance(pushed, IsNull):
            partitions = Intervals.nothing()
        elif op is None or literals is None:
            unhandled.append(pushed)
        elif column == TOPIC and (names := _strings(literals)) is not None:
            topic.append(Condition(op, names))
        elif column == PARTITION and (numbers := _integers(literals)) is not None:
            partitions &= Intervals.where(op, numbers)
        elif column == OFFSET and (numbers := _integers(literals)) is not None:
            offsets &= Intervals.where(op, numbers)
            offset_filters.append(pushed)
        elif column == TIMESTAMP and (micros := _microseconds(literals)) is not None:
            timestamps &= _milliseconds(op, micros)
            unhandled.append(pushed)
        else:
            unhandled.append(pushed)
    if len(offsets.spans) > MAX_OFFSET_SPANS:
        offsets = offsets.hull()
        unhandled += offset_filters
    return Pushdown(tuple(topic), partitions, offsets, timestamps), unhandled


def _column(pushed: Filter) -> str | None:
    attribute = getattr(pushed, "attribute", None)
    if isinstance(attribute, tuple) and len(attribute) == 1:
        return str(attribute[0]).lower()
    return None


def _literals(pushed: Filter) -> tuple[object, ...] | None:
    """The filter's literal values: one, or an IN list's."""
    value = getattr(pushed, "value", None)
    if isinstance(pushed, In):
        return tuple(value) if isinstance(value, (list, tuple)) else None
    return (value,)


# Literals are used only when they have the column's own type; Spark evaluates the rest.


def _strings(literals: tuple[object, ...]) -> tuple[str, ...] | None:
    strings = tuple(v for v in literals if isinstance(v, str))
    return strings if len(strings) == len(literals) else None


def _integers(literals: tuple[object, ...]) -> list[int] | None:
    numbers = [v for v in literals if isinstance(v, int) and not isinstance(v, bool)]
    return numbers if len(numbers) == len(literals) else None


def _microseconds(literals: tuple[object, ...]) -> list[int] | None:
    """Microseconds since the epoch of timestamps with a time zone (Spark's TIMESTAMP)."""
    micros = [
        (v - _EPOCH) // _MICROSECOND
        for v in literals
        if isinstance(v, datetime) and v.tzinfo is not None
    ]
    return micros if len(micros) == len(literals) else None


def _milliseconds(op: str, micros: list[int]) -> Intervals:
    """Record times in ms (Spark sees ms * 1000 µs) for which a µs comparison holds."""
    if op in ("in", "="):
        return Intervals.points(m // 1000 for m in micros if m % 1000 == 0)
    (value,) = micros
    floor, ceiling = value // 1000, -(-value // 1000)
    return Intervals.where(op, [ceiling if op in ("<", ">=") else floor])
