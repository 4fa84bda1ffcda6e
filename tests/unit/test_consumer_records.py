"""Per-record conversion of fetched Arrow batches, and the positions kept while iterating."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_replica.client import Cluster, Consumer, FetchedRecords, SyncConsumer
from spark_replica.client.consumer_records import ConsumerRecord, IdleTimer, deliver, to_records
from spark_replica.errors import ClientClosedError, ConfigError
from spark_replica.records import HEADER_TYPE, build_batch, decode_payload, encode_batch
from spark_replica.topics import TopicPartition

TP = TopicPartition("events", 3)
OTHER = TopicPartition("events", 4)


def fetched(
    values: list[bytes | None],
    first_offset: int = 0,
    tp: TopicPartition = TP,
    **columns: list,
) -> FetchedRecords:
    batch = build_batch(values, **columns)
    return FetchedRecords(tp, first_offset, decode_payload(batch))


def test_keys_values_timestamps_and_headers_come_through() -> None:
    chunk = fetched(
        [b"v0", None, b"v2"],
        first_offset=40,
        keys=[None, b"k1", b"k2"],
        timestamps=[1_000, 2_000, 3_000],
        headers=[[("trace", b"abc"), ("empty", None)], None, []],
    )
    assert to_records(chunk) == [
        ConsumerRecord("events", 3, 40, 1_000, None, b"v0", (("trace", b"abc"), ("empty", None))),
        ConsumerRecord("events", 3, 41, 2_000, b"k1", None, ()),
        ConsumerRecord("events", 3, 42, 3_000, b"k2", b"v2", ()),
    ]


def test_a_batch_without_a_headers_column_gives_empty_headers() -> None:
    records = to_records(fetched([b"a", b"b"], timestamps=[5, 6]))
    assert [r.headers for r in records] == [(), ()]
    assert [r.key for r in records] == [None, None]


def test_a_chunk_sliced_inside_a_batch_keeps_offsets_and_headers_aligned() -> None:
    whole = fetched(
        [b"a", b"b", b"c", b"d"],
        timestamps=[1, 2, 3, 4],
        headers=[[("n", b"0")], [("n", b"1")], [("n", b"2")], [("n", b"3")]],
    )
    chunk = FetchedRecords(TP, 102, whole.records.slice(2))
    records = to_records(chunk)
    assert [(r.offset, r.value, r.timestamp_ms, r.headers) for r in records] == [
        (102, b"c", 3, (("n", b"2"),)),
        (103, b"d", 4, (("n", b"3"),)),
    ]


def test_a_null_header_entry_is_dropped_and_the_rest_kept() -> None:
    headers = pa.array(
        [[{"key": "a", "value": b"1"}, None, {"key": "b", "value": None}]], HEADER_TYPE
    )
    batch = pa.record_batch(
        [pa.array([b"v"]), pa.array([7], pa.int64()), headers],
        names=["value", "timestamp", "headers"],
    )
    chunk = FetchedRecords(TP, 0, decode_payload(bytes(encode_batch(batch))))
    assert to_records(chunk)[0].headers == (("a", b"1"), ("b", None))


header_lists = st.none() | st.lists(
    st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3
)


@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=8),
            st.none() | st.binary(max_size=8),
            st.integers(0, 2**41),
            header_lists,
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(0, 2**40),
)
def test_column_wise_conversion_equals_reading_row_by_row(rows: list, first: int) -> None:
    keys, values, timestamps, headers = (list(column) for column in zip(*rows, strict=True))
    chunk = fetched(values, first, keys=keys, timestamps=timestamps, headers=headers)
    expected = [
        ConsumerRecord(
            TP.topic,
            TP.partition,
            first + n,
            timestamps[n],
            row["key"],
            row["value"],
            tuple((h["key"], h["value"]) for h in row["headers"] or ()),
        )
        for n, row in enumerate(chunk.records.to_pylist())
    ]
    assert to_records(chunk) == expected


def consumer_at(**positions: int) -> SimpleNamespace:
    """What `deliver` uses of a consumer: its positions, as poll left them."""
    return SimpleNamespace(positions={TP: positions["tp"], OTHER: positions["other"]})


def round_of_two_partitions() -> list[FetchedRecords]:
    return [
        fetched([b"a0", b"a1"], 10),
        fetched([b"b0"], 50, OTHER),
        fetched([b"a2", b"a3"], 12),
    ]


def test_positions_follow_the_records_handed_out_not_the_fetch() -> None:
    consumer = consumer_at(tp=14, other=51)
    records = deliver(consumer, round_of_two_partitions())  # type: ignore[arg-type]
    assert next(records).value == b"a0"
    assert consumer.positions == {TP: 11, OTHER: 50}
    assert [r.value for r in records] == [b"a1", b"b0", b"a2", b"a3"]
    assert consumer.positions == {TP: 14, OTHER: 51}


def test_stopping_half_way_leaves_positions_at_the_next_record() -> None:
    consumer = consumer_at(tp=14, other=51)
    records = deliver(consumer, round_of_two_partitions())  # type: ignore[arg-type]
    taken = [next(records).offset for _ in range(2)]
    records.close()
    assert taken == [10, 11]
    assert consumer.positions == {TP: 12, OTHER: 50}


def test_a_seek_while_iterating_drops_the_rest_of_that_partition() -> None:
    consumer = consumer_at(tp=14, other=51)
    seen = []
    for record in deliver(consumer, round_of_two_partitions()):  # type: ignore[arg-type]
        seen.append((record.partition, record.offset))
        if record.offset == 10:
            consumer.positions[TP] = 0
    assert seen == [(3, 10), (4, 50)]
    assert consumer.positions == {TP: 0, OTHER: 51}


def test_a_partition_unassigned_while_iterating_gets_no_more_records() -> None:
    consumer = consumer_at(tp=14, other=51)
    seen = []
    for record in deliver(consumer, round_of_two_partitions()):  # type: ignore[arg-type]
        seen.append(record.offset)
        consumer.positions = {OTHER: consumer.positions[OTHER]}
    assert seen == [10, 50]
    assert consumer.positions == {OTHER: 51}


def test_a_gap_between_batches_is_stepped_over() -> None:
    consumer = consumer_at(tp=30, other=0)
    chunks = [fetched([b"x"], 10), fetched([b"y"], 20)]
    assert [r.offset for r in deliver(consumer, chunks)] == [10, 20]  # type: ignore[arg-type]
    assert consumer.positions[TP] == 21


@pytest.mark.parametrize("offset", [0, 5])
def test_records_are_plain_values(offset: int) -> None:
    record = ConsumerRecord("t", 0, offset, 1, None, b"v", ())
    assert record == ConsumerRecord("t", 0, offset, 1, None, b"v", ())
    assert "offset=" in repr(record)
    with pytest.raises(AttributeError):
        record.extra = 1  # type: ignore[attr-defined]


def test_the_idle_timer_counts_from_the_last_round_with_records() -> None:
    idle = IdleTimer(2.0, now=100.0)
    assert not idle.expired([], now=101.0)
    assert not idle.expired([fetched([b"x"])], now=101.5)
    assert not idle.expired([], now=103.0)
    assert idle.expired([], now=103.5)
    assert not IdleTimer(None, now=0.0).expired([], now=1e9)


def test_an_idle_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="idle_timeout_s"):
        IdleTimer(0, now=0.0)


def test_iterating_a_consumer_with_nothing_assigned_is_refused() -> None:
    consumer = Consumer(Cluster([("127.0.0.1", 9)]))

    async def first() -> ConsumerRecord:
        return await anext(aiter(consumer))

    with pytest.raises(ConfigError, match="no partitions are assigned"):
        asyncio.run(first())


def test_a_closed_sync_consumer_refuses_calls_and_closes_once() -> None:
    consumer = SyncConsumer("127.0.0.1:9")  # nothing connects until a call needs it
    consumer.close()
    consumer.close()
    with pytest.raises(ClientClosedError):
        consumer.poll(timeout=0.1)
    with pytest.raises(ClientClosedError):
        consumer.assign([TP])
    with pytest.raises(ClientClosedError):
        consumer.seek_to_beginning()
    with pytest.raises(ClientClosedError):
        next(iter(consumer))
    with pytest.raises(ConfigError, match="not host:port"):
        SyncConsumer("no-port")
