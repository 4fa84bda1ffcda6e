"""Offset arithmetic of the Spark source: JSON form, -2/-1, splitting, admission control,
clamping and data-loss detection, checked without a cluster."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.spark.offsets import (
    DataLossError,
    OffsetRange,
    backlog,
    clamp_to_high_watermarks,
    data_loss_error,
    find_data_loss,
    limit_ranges,
    offset_ranges,
    offsets_for_timestamps,
    plan_end,
    resolve_offsets,
    skip_lost,
    split_ranges,
)
from spark_replica.errors import ConfigError
from spark_replica.partition_offsets import decode_offsets, encode_offsets, parse_offsets_json
from spark_replica.topics import TopicPartition as TP

A0, A1, A2, B0 = TP("a", 0), TP("a", 1), TP("a", 2), TP("b", 0)


def test_offsets_json_round_trip_is_sorted_and_stable() -> None:
    offsets = {A1: 7, B0: 0, A0: 23}
    encoded = encode_offsets(offsets)
    assert json.dumps(encoded) == '{"a": {"0": 23, "1": 7}, "b": {"0": 0}}'
    assert decode_offsets(json.loads(json.dumps(encoded))) == offsets


@pytest.mark.parametrize(
    "text",
    [
        "[1, 2]",
        '{"a": [1]}',
        '{"a": {"x": 1}}',
        '{"a": {"-1": 1}}',
        '{"a": {"0": -3}}',
        '{"a": {"0": "5"}}',
        '{"a": {"0": true}}',
        "{not json",
    ],
)
def test_malformed_offset_json_names_the_option(text: str) -> None:
    with pytest.raises(ConfigError, match="startingOffsets"):
        parse_offsets_json(text, "startingOffsets")


def test_placeholders_resolve_to_log_start_and_high_watermark() -> None:
    requested = {A0: -2, A1: -1, A2: 5}
    earliest = {A0: 3, A1: 0, A2: 0}
    latest = {A0: 10, A1: 20, A2: 30}
    assert resolve_offsets(requested, earliest, latest) == {A0: 3, A1: 20, A2: 5}


def test_ends_are_clamped_to_the_high_watermark() -> None:
    assert clamp_to_high_watermarks({A0: 50, A1: 5}, {A0: 10, A1: 10}) == {A0: 10, A1: 5}


def test_new_partitions_are_read_from_zero_and_empty_ranges_dropped() -> None:
    ranges = offset_ranges({A0: 5, A1: 9}, {A0: 8, A1: 9, A2: 4})
    assert ranges == [OffsetRange(A0, 5, 8), OffsetRange(A2, 0, 4)]


def test_no_split_when_there_are_enough_ranges() -> None:
    ranges = [OffsetRange(A0, 0, 100), OffsetRange(A1, 0, 1)]
    assert split_ranges(ranges, 2) == ranges
    assert split_ranges(ranges, None) == ranges


def test_split_is_proportional_to_range_size() -> None:
    split = split_ranges([OffsetRange(A0, 0, 90), OffsetRange(A1, 10, 40)], 4)
    assert [(r.tp, r.start, r.end) for r in split] == [
        (A0, 0, 30),
        (A0, 30, 60),
        (A0, 60, 90),
        (A1, 10, 40),
    ]


ranges_strategy = st.lists(
    st.tuples(st.integers(0, 1000), st.integers(0, 500)), min_size=1, max_size=6
).map(lambda items: [OffsetRange(TP("t", i), s, s + n) for i, (s, n) in enumerate(items)])


@given(ranges_strategy, st.integers(1, 64))
def test_split_never_drops_or_duplicates_an_offset(
    ranges: list[OffsetRange], min_partitions: int
) -> None:
    split = split_ranges(ranges, min_partitions)
    covered = sorted((r.tp, offset) for r in split for offset in range(r.start, r.end))
    wanted = sorted((r.tp, offset) for r in ranges for offset in range(r.start, r.end))
    assert covered == wanted
    assert all(r.size > 0 for r in split)
    total = sum(r.size for r in ranges)
    assert len(split) >= min(min_partitions, total)


def test_admission_control_follows_backlog_and_stays_within_the_limit() -> None:
    # The acceptance case: 101, 11 and 1 records under maxOffsetsPerTrigger=10.
    latest = {A0: 101, A1: 11, A2: 1}
    end = limit_ranges({}, latest, 10)
    assert backlog({}, end) == 10
    assert end[A0] > end[A1] >= end[A2]
    start: dict[TP, int] = {}
    batches = 0
    while start != latest:
        end = limit_ranges(start, latest, 10)
        assert 0 < backlog(start, end) <= 10
        start, batches = end, batches + 1
    assert batches == 12  # ceil(113 / 10): every batch but the last is full


@given(
    st.dictionaries(
        st.integers(0, 7), st.tuples(st.integers(0, 1000), st.integers(0, 1000)), max_size=8
    ),
    st.integers(1, 500),
)
def test_admission_control_never_exceeds_the_limit_and_always_moves(
    spans: dict[int, tuple[int, int]], limit: int
) -> None:
    start = {TP("t", p): s for p, (s, _) in spans.items()}
    latest = {TP("t", p): s + n for p, (s, n) in spans.items()}
    end = limit_ranges(start, latest, limit)
    admitted = backlog(start, end)
    assert admitted == min(limit, backlog(start, latest))
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)


def test_min_rows_waits_until_enough_records_or_the_delay() -> None:
    start = {A0: 10}
    latest = {A0: 14}
    waiting = plan_end(start, latest, max_rows=None, min_rows=5, waited_ms=10, max_delay_ms=100)
    assert waiting == start
    late = plan_end(start, latest, max_rows=None, min_rows=5, waited_ms=100, max_delay_ms=100)
    assert late == latest
    enough = plan_end(start, {A0: 15}, max_rows=3, min_rows=5, waited_ms=0, max_delay_ms=100)
    assert enough == {A0: 13}


def test_plan_end_keeps_partitions_without_news_and_never_goes_back() -> None:
    end = plan_end(
        {A0: 10, A1: 4}, {A0: 8}, max_rows=None, min_rows=None, waited_ms=0, max_delay_ms=0
    )
    assert end == {A0: 10, A1: 4}


def test_timestamps_without_a_match_fail_a_start_and_end_an_end_at_latest() -> None:
    found = {A0: 4, A1: -1}
    latest = {A0: 9, A1: 7}
    assert offsets_for_timestamps(found, latest, fail_without_match=False, option="x") == {
        A0: 4,
        A1: 7,
    }
    with pytest.raises(ConfigError, match="startingTimestamp: a-1"):
        offsets_for_timestamps(found, latest, fail_without_match=True, option="startingTimestamp")


def test_data_loss_kinds_are_found_and_skipped_forward() -> None:
    start = {A0: 5, A1: 50, A2: 3, B0: 7}
    present = [A0, A1, A2]
    log_starts = {A0: 8}
    log_ends = {A1: 20}
    losses = find_data_loss(start, present, log_starts, log_ends)
    assert [loss.tp for loss in losses] == [A0, A1, B0]
    assert "5..7 were deleted" in losses[0].message
    assert "past the end of the log, 20" in losses[1].message
    assert "gone" in losses[2].message
    assert skip_lost(start, present, log_starts, log_ends) == {A0: 8, A1: 20, A2: 3}


def test_data_loss_error_says_how_to_go_on() -> None:
    error = data_loss_error("a-0: offsets 0..4 were deleted")
    assert isinstance(error, DataLossError)
    assert "failOnDataLoss=false" in str(error)
