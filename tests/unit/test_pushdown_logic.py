"""Filter pushdown's planning logic with plain values: which filters narrow which ranges.

The property test plays both sides with a small model: the broker (the first offset at
or after a time) and Spark (evaluating every filter the reader hands back), and checks
that the rows read equal the rows of a full read that pass every filter.
"""

from __future__ import annotations

import operator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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
    Not,
    StringStartsWith,
)

from connectors.spark.offsets import OffsetRange
from connectors.spark.pushdown import (
    MAX_OFFSET_SPANS,
    NO_PUSHDOWN,
    Intervals,
    filter_pushdown_enabled,
    push_filters,
    start_at,
    without,
)
from connectors.spark.source_options import OffsetSpec
from spark_replica.errors import ConfigError
from spark_replica.topics import TopicPartition as TP

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
A0, A1, B0 = TP("a", 0), TP("a", 1), TP("b", 0)


def at_ms(ms: float) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def test_partition_and_offset_bound_read_only_that_range_and_spark_checks_nothing() -> None:
    filters: list[Filter] = [
        IsNotNull(("partition",)),
        IsNotNull(("offset",)),
        EqualTo(("partition",), 1),
        GreaterThanOrEqual(("offset",), 1_000_000),
    ]
    pushdown, unhandled = push_filters(filters)
    ranges = [OffsetRange(A0, 0, 2_000_000), OffsetRange(A1, 0, 2_000_000)]
    assert pushdown.narrow(ranges) == [OffsetRange(A1, 1_000_000, 2_000_000)]
    assert unhandled == []


def test_offset_beyond_the_end_reads_nothing() -> None:
    pushdown, _ = push_filters([GreaterThan(("offset",), 500)])
    assert pushdown.narrow([OffsetRange(A0, 0, 100)]) == []


def test_a_short_in_list_reads_one_range_per_run_of_offsets() -> None:
    pushdown, unhandled = push_filters([In(("offset",), [3, 4, 9, 50])])
    assert pushdown.narrow([OffsetRange(A0, 0, 20)]) == [
        OffsetRange(A0, 3, 5),
        OffsetRange(A0, 9, 10),
    ]
    assert unhandled == []


def test_a_long_in_list_reads_its_span_and_spark_filters_the_rows() -> None:
    values = list(range(0, 4 * MAX_OFFSET_SPANS, 2))
    listed = In(("offset",), values)
    bound = GreaterThanOrEqual(("offset",), 4)
    pushdown, unhandled = push_filters([listed, bound])
    assert pushdown.narrow([OffsetRange(A0, 0, 1000)]) == [OffsetRange(A0, 4, values[-1] + 1)]
    assert unhandled == [listed, bound]


def test_timestamp_filters_are_left_to_spark_and_only_move_starts() -> None:
    since = GreaterThanOrEqual(("timestamp",), at_ms(1000.5))
    pushdown, unhandled = push_filters([since, LessThan(("timestamp",), at_ms(5000))])
    assert unhandled[0] is since and len(unhandled) == 2
    assert pushdown.first_timestamp_ms == 1001
    assert start_at([OffsetRange(A0, 0, 10), OffsetRange(A1, 5, 10)], {A0: 7, A1: 2}) == [
        OffsetRange(A0, 7, 10),
        OffsetRange(A1, 5, 10),
    ]


def test_contradicting_timestamps_read_nothing() -> None:
    pushdown, _ = push_filters(
        [GreaterThan(("timestamp",), at_ms(10)), LessThanOrEqual(("timestamp",), at_ms(10))]
    )
    assert pushdown.reads_nothing
    pushdown, _ = push_filters([EqualTo(("timestamp",), at_ms(10.25))])
    assert pushdown.reads_nothing


def test_times_before_the_epoch_narrow_no_lookup() -> None:
    pushdown, _ = push_filters([GreaterThan(("timestamp",), at_ms(-5))])
    assert pushdown.first_timestamp_ms is None
    assert NO_PUSHDOWN.first_timestamp_ms is None


@pytest.mark.parametrize(
    "kind", [EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual]
)
@pytest.mark.parametrize("micros", [-1500, -1000, 0, 1, 999, 1000, 1001, 2500])
def test_record_times_in_ms_are_admitted_exactly_as_spark_compares_them(
    kind: type[Filter], micros: int
) -> None:
    literal = EPOCH + timedelta(microseconds=micros)
    pushdown, _ = push_filters([kind(("timestamp",), literal)])
    for ms in range(-4, 5):
        assert (ms in pushdown.timestamps_ms) == holds(
            kind(("timestamp",), literal), {"timestamp": at_ms(ms)}
        ), ms


def test_topic_filters_choose_partitions() -> None:
    pushdown, unhandled = push_filters(
        [In(("topic",), ["a", "c"]), GreaterThan(("topic",), "0"), LessThan(("partition",), 1)]
    )
    assert [tp for tp in (A0, A1, B0) if pushdown.reads(tp)] == [A0]
    assert unhandled == []


def test_is_null_on_a_column_that_is_never_null_reads_nothing() -> None:
    pushdown, unhandled = push_filters([IsNull(("offset",))])
    assert pushdown.reads_nothing and unhandled == []
    assert pushdown.narrow([OffsetRange(A0, 0, 10)]) == []


@pytest.mark.parametrize(
    "pushed",
    [
        Not(EqualTo(("partition",), 1)),
        StringStartsWith(("topic",), "a"),
        EqualTo(("key",), b"k"),
        IsNotNull(("key",)),
        EqualTo(("partition",), "1"),
        EqualTo(("partition",), True),
        In(("offset",), [1, None]),
        EqualTo(("timestamp",), datetime(2024, 1, 1)),  # no time zone: not Spark's TIMESTAMP
        EqualTo(("timestamptype",), 0),
        EqualTo(("value", "field"), 1),
    ],
)
def test_filters_it_cannot_apply_go_back_to_spark_and_narrow_nothing(pushed: Filter) -> None:
    pushdown, unhandled = push_filters([pushed])
    assert unhandled == [pushed] and unhandled[0] is pushed
    assert pushdown.narrow([OffsetRange(A1, 0, 10)]) == [OffsetRange(A1, 0, 10)]


def test_intervals() -> None:
    evens = Intervals.points([0, 2, 4, 5])
    assert evens.spans == ((0, 1), (2, 3), (4, 6))
    assert (evens & Intervals.where(">", [2])).spans == ((4, 6),)
    assert evens.within(1, 5) == [(2, 3), (4, 5)]
    assert evens.within(5, 5) == []
    assert Intervals.where("<", [-(2**63)]).empty
    assert 3 not in evens and 5 in evens


def test_option_parsing() -> None:
    assert not filter_pushdown_enabled({})
    assert filter_pushdown_enabled({"filterpushdown": " TRUE "})
    with pytest.raises(ConfigError, match="filterPushdown='yes'"):
        filter_pushdown_enabled({"filterPushdown": "yes"})


def test_offsets_of_excluded_partitions_are_dropped_but_unknown_ones_stay() -> None:
    spec = OffsetSpec("offsets", "startingOffsets", offsets={A0: 5, A1: 6, TP("a", 9): 1})
    assert without(spec, [A1]).offsets == {A0: 5, TP("a", 9): 1}


# The model for the property: three partitions of records whose times go back and
# forth, and a reference evaluation of each filter on a row.
PARTITIONS = (A0, A1, B0)
RECORDS_PER_PARTITION = 40
COLUMNS = ("topic", "partition", "offset", "timestamp")
OPS = (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In)


def literal(column: str) -> st.SearchStrategy[object]:
    if column == "topic":
        return st.sampled_from(["a", "b", "c", ""])
    if column == "partition":
        return st.integers(-1, 3)
    if column == "offset":
        return st.integers(-2, RECORDS_PER_PARTITION + 2)
    # Near the records' times, on and between whole milliseconds.
    return st.builds(
        lambda ms, us: EPOCH + timedelta(milliseconds=ms, microseconds=us),
        st.integers(-1, 12),
        st.sampled_from([0, 0, 1, 500, 999]),
    )


@st.composite
def filters(draw: st.DrawFn) -> Filter:
    column = draw(st.sampled_from(COLUMNS))
    kind = draw(st.sampled_from((*OPS, IsNull, IsNotNull, Not)))
    if kind in (IsNull, IsNotNull):
        return kind((column,))
    if kind is Not:
        return Not(EqualTo((column,), draw(literal(column))))
    if kind is In:
        return In((column,), draw(st.lists(literal(column), max_size=20)))
    return kind((column,), draw(literal(column)))


COMPARE = {
    EqualTo: operator.eq,
    EqualNullSafe: operator.eq,
    GreaterThan: operator.gt,
    GreaterThanOrEqual: operator.ge,
    LessThan: operator.lt,
    LessThanOrEqual: operator.le,
}


def holds(pushed: Filter, row: dict[str, object]) -> bool:
    """What Spark makes of a filter on a row whose columns are never null."""
    if isinstance(pushed, Not):
        return not holds(pushed.child, row)
    if isinstance(pushed, IsNull):
        return False
    if isinstance(pushed, IsNotNull):
        return True
    value = row[pushed.attribute[0]]
    if isinstance(pushed, In):
        return value in pushed.value
    return bool(COMPARE[type(pushed)](value, pushed.value))


def first_at_or_after(times_ms: list[int], since_ms: int) -> int:
    """What a leader answers to ListOffsets by time (-1: no such record)."""
    return next((offset for offset, t in enumerate(times_ms) if t >= since_ms), -1)


@settings(max_examples=300, deadline=None)
@given(
    chosen=st.lists(filters(), max_size=5),
    jitters=st.lists(
        st.lists(
            st.integers(-3, 3), min_size=RECORDS_PER_PARTITION, max_size=RECORDS_PER_PARTITION
        ),
        min_size=len(PARTITIONS),
        max_size=len(PARTITIONS),
    ),
)
def test_rows_read_then_filtered_by_spark_equal_a_full_read_filtered(
    chosen: list[Filter], jitters: list[list[int]]
) -> None:
    # Times grow with offsets by one ms every few records, some back and forth.
    times_of = {
        tp: [max(offset // 4 + jitter, 0) for offset, jitter in enumerate(partition_jitters)]
        for tp, partition_jitters in zip(PARTITIONS, jitters, strict=True)
    }

    def row(tp: TP, offset: int) -> dict[str, object]:
        return {
            "topic": tp.topic,
            "partition": tp.partition,
            "offset": offset,
            "timestamp": at_ms(times_of[tp][offset]),
        }

    everything = [OffsetRange(tp, 0, RECORDS_PER_PARTITION) for tp in PARTITIONS]
    expected = [
        (r.tp, o)
        for r in everything
        for o in range(r.start, r.end)
        if all(holds(f, row(r.tp, o)) for f in chosen)
    ]

    pushdown, unhandled = push_filters(chosen)
    assert all(any(f is given_f for given_f in chosen) for f in unhandled)
    ranges = pushdown.narrow(everything)
    starts: dict[TP, int] = {}
    since = pushdown.first_timestamp_ms
    if since is not None:
        found = {r.tp: first_at_or_after(times_of[r.tp], since) for r in ranges}
        starts = {tp: offset for tp, offset in found.items() if offset >= 0}
    read = [
        (r.tp, o)
        for r in start_at(ranges, starts)
        for o in range(r.start, r.end)
        if all(holds(f, row(r.tp, o)) for f in unhandled)
    ]
    assert sorted(read) == sorted(expected)
