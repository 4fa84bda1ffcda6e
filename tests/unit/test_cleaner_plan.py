"""The cleaning plan against its definition: the last record per key, expired tombstones gone."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from brokerd.log.cleaner_plan import (
    BatchKeys,
    BatchPlan,
    OffsetMap,
    build_offset_map,
    max_keys_for,
    plan_cleaning,
)
from spark_replica.records import BatchHeader

KEYS = [b"a", b"b", b"c", b"d", b"e", None]


@dataclass(frozen=True)
class Record:
    key: bytes | None
    tombstone: bool


def header(
    base_offset: int, count: int, producer_id: int = -1, base_sequence: int = -1
) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset,
        batch_length=0,
        leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=count - 1,
        first_timestamp=0,
        max_timestamp=0,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
        record_count=count,
    )


def as_batches(groups: list[list[Record]], start: int = 0) -> list[BatchKeys]:
    """Batches laid end to end from offset `start`."""
    batches = []
    offset = start
    for group in groups:
        batches.append(
            BatchKeys(
                header(offset, len(group)),
                [r.key for r in group],
                [r.tombstone for r in group],
            )
        )
        offset += len(group)
    return batches


def kept_offsets(plans: list[BatchPlan]) -> list[int]:
    return [
        run.base_offset + i for p in plans for run in p.runs for i in range(run.stop - run.start)
    ]


def expected_offsets(records: list[Record], horizon: int) -> list[int]:
    last: dict[bytes, int] = {}
    for offset, record in enumerate(records):
        if record.key is not None:
            last[record.key] = offset
    return sorted(
        offset for offset in last.values() if not (records[offset].tombstone and offset < horizon)
    )


records_strategy = st.builds(Record, st.sampled_from(KEYS), st.booleans())
groups_strategy = st.lists(
    st.lists(records_strategy, min_size=1, max_size=6), min_size=1, max_size=12
)


def flatten(groups: list[list[Record]]) -> list[Record]:
    return [record for group in groups for record in group]


@settings(max_examples=150, deadline=None)
@given(groups=groups_strategy, horizon=st.integers(0, 80))
def test_keeps_exactly_the_last_record_per_key_minus_expired_tombstones(
    groups: list[list[Record]], horizon: int
) -> None:
    batches = as_batches(groups)
    offset_map = build_offset_map(batches, max_keys=1000, first_dirty=0)
    plans = plan_cleaning(batches, offset_map, horizon)
    records = flatten(groups)
    assert offset_map.end_offset == len(records)
    assert kept_offsets(plans) == expected_offsets(records, horizon)


@settings(max_examples=150, deadline=None)
@given(groups=groups_strategy, horizon=st.integers(0, 80))
def test_runs_keep_offsets_and_stay_inside_their_batch(
    groups: list[list[Record]], horizon: int
) -> None:
    batches = as_batches(groups)
    plans = plan_cleaning(batches, build_offset_map(batches, 1000, 0), horizon)
    previous = -1
    for plan in plans:
        for run in plan.runs:
            assert 0 <= run.start < run.stop <= plan.header.record_count
            assert run.base_offset == plan.header.base_offset + run.start
            assert run.base_offset > previous
            previous = run.base_offset + run.stop - run.start - 1


@settings(max_examples=100, deadline=None)
@given(old=groups_strategy, new=groups_strategy)
def test_cleaning_the_clean_part_again_with_new_dirty_records_equals_one_cleaning(
    old: list[list[Record]], new: list[list[Record]]
) -> None:
    """A second cleaning maps only the new (dirty) records, yet ends where one big one would."""
    first = as_batches(old)
    first_plans = plan_cleaning(first, build_offset_map(first, 1000, 0), 0)
    old_records = flatten(old)
    survivors = [
        BatchKeys(
            header(run.base_offset, run.stop - run.start),
            [old_records[run.base_offset + i].key for i in range(run.stop - run.start)],
            [old_records[run.base_offset + i].tombstone for i in range(run.stop - run.start)],
        )
        for plan in first_plans
        for run in plan.runs
    ]
    dirty = as_batches(new, start=len(old_records))
    offset_map = build_offset_map(dirty, 1000, first_dirty=len(old_records))
    second = plan_cleaning([*survivors, *dirty], offset_map, 0)
    assert kept_offsets(second) == expected_offsets(old_records + flatten(new), 0)


def mapped_by_definition(batches: list[BatchKeys], max_keys: int) -> OffsetMap:
    """Rule 1 record by record: whole batches while their new keys fit, the first always."""
    last: dict[bytes | None, int] = {}
    end = 0
    for batch in batches:
        new = {key for key in batch.keys if key is not None and key not in last}
        if last and len(last) + len(new) > max_keys:
            break
        for index, key in enumerate(batch.keys):
            if key is not None:
                last[key] = batch.header.base_offset + index
        end = batch.header.next_offset
    return OffsetMap(last, end)


@settings(max_examples=200, deadline=None)
@given(groups=groups_strategy, max_keys=st.integers(1, 7), horizon=st.integers(0, 80))
def test_a_full_map_and_the_plan_over_it_follow_the_rules_record_by_record(
    groups: list[list[Record]], max_keys: int, horizon: int
) -> None:
    """The map and plan work on whole batches at once; record by record, the rules give
    the same map (a small one fills up) and keep the same records."""
    batches = as_batches(groups)
    offset_map = build_offset_map(batches, max_keys, first_dirty=0)
    assert offset_map == mapped_by_definition(batches, max_keys)
    records = flatten(groups)
    expected = [
        offset
        for offset, record in enumerate(records)
        if record.key is not None
        and offset_map.last_offsets.get(record.key, offset) <= offset
        and not (record.tombstone and offset < horizon)
    ]
    assert kept_offsets(plan_cleaning(batches, offset_map, horizon)) == expected


def test_tombstones_stay_until_the_horizon_passes_them() -> None:
    groups = [[Record(b"a", False), Record(b"b", False)], [Record(b"a", True)]]
    batches = as_batches(groups)
    offset_map = build_offset_map(batches, 1000, 0)
    assert kept_offsets(plan_cleaning(batches, offset_map, tombstone_horizon=2)) == [1, 2]
    assert kept_offsets(plan_cleaning(batches, offset_map, tombstone_horizon=3)) == [1]


def test_records_without_a_key_are_dropped() -> None:
    batches = as_batches([[Record(None, False), Record(b"a", False)]])
    plans = plan_cleaning(batches, build_offset_map(batches, 1000, 0), 0)
    assert kept_offsets(plans) == [1]


def test_a_full_offset_map_ends_the_cleaning_at_a_batch_boundary() -> None:
    groups = [
        [Record(b"a", False), Record(b"b", False)],
        [Record(b"c", False)],
        [Record(b"a", False)],
    ]
    batches = as_batches(groups)
    offset_map = build_offset_map(batches, max_keys=2, first_dirty=0)
    assert offset_map == OffsetMap({b"a": 0, b"b": 1}, end_offset=2)
    plans = plan_cleaning(batches, offset_map, 0)
    assert [p.whole for p in plans] == [True, True, True]


def test_the_first_batch_is_mapped_even_if_it_overfills_the_map() -> None:
    batches = as_batches([[Record(b"a", False), Record(b"b", False), Record(b"c", False)]])
    assert build_offset_map(batches, max_keys=1, first_dirty=0).end_offset == 3


def test_a_split_batch_keeps_each_records_sequence() -> None:
    batches = [
        BatchKeys(
            header(0, 4, producer_id=7, base_sequence=2**31 - 2),
            [b"a", b"b", b"c", b"d"],
            [False] * 4,
        ),
        BatchKeys(header(4, 2, producer_id=7, base_sequence=2), [b"b", b"z"], [False] * 2),
    ]
    plans = plan_cleaning(batches, build_offset_map(batches, 1000, 0), 0)
    runs = plans[0].runs
    assert [(r.base_offset, r.stop - r.start, r.base_sequence) for r in runs] == [
        (0, 1, 2**31 - 2),
        (2, 2, 0),
    ]
    assert plans[1].whole


def test_a_producers_last_batch_keeps_its_last_record() -> None:
    """Superseded by another producer's record, it would go; the producer's last sequence stays."""
    batches = [
        BatchKeys(header(0, 2, producer_id=7, base_sequence=0), [b"a", b"b"], [False, False]),
        BatchKeys(header(2, 1, producer_id=8, base_sequence=0), [b"b"], [False]),
    ]
    offset_map = build_offset_map(batches, 1000, 0)
    plans = plan_cleaning(batches, offset_map, 0)
    assert plans[0].whole
    later = plan_cleaning(batches, offset_map, 0, producers_after=frozenset({7}))
    assert [(r.base_offset, r.stop - r.start) for r in later[0].runs] == [(0, 1)]


def test_max_keys_follow_kafkas_entry_size() -> None:
    assert max_keys_for(24 * 1000) == 1000
    assert max_keys_for(1) == 1
