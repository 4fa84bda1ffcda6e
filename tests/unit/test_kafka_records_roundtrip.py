"""Kafka v2 batches -> replog batches -> Kafka v2 batches keep every record field.

aiokafka's record builder and reader are the oracle (in tests only): they build the
batches a Kafka producer sends and parse what a Kafka consumer would be fetched.
"""

from __future__ import annotations

import pyarrow as pa
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from brokerd.core.batch_validation import validate_produced
from spark_replica.records import (
    PAYLOAD_SCHEMA,
    PAYLOAD_SCHEMA_NO_HEADERS,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    build_batch,
    decode_payload,
    encode_batch,
    iter_batches,
    set_base_offset,
    set_leader_epoch,
)
from spark_replica.wire.kafka.records.convert import (
    kafka_codec,
    kafka_to_replog,
    replog_batch_to_kafka,
    replog_to_kafka,
)

BASE_TS = 1_700_000_000_000
Headers = list[tuple[str, bytes | None]]
Record = tuple[int, bytes | None, bytes | None, Headers]  # timestamp, key, value, headers


def kafka_batch(
    records: list[Record],
    *,
    codec: int = 0,
    producer: tuple[int, int, int] = (-1, -1, -1),
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        batch_size=1 << 30,
    )
    for offset, (timestamp, key, value, headers) in enumerate(records):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def kafka_records(batch: bytes) -> list[Record]:
    parsed = DefaultRecordBatch(batch)
    assert parsed.validate_crc()
    return [(r.timestamp, r.key, r.value, list(r.headers)) for r in parsed]


def mixed_records(count: int) -> list[Record]:
    return [
        (
            BASE_TS + 7 * i - (i % 5) * 1000,
            None if i % 7 == 0 else b"key-%d" % i,
            None if i % 11 == 0 else bytes([i % 256]) * (i * 37 % 300),
            [(f"h{j}", None if j == 1 else b"v" * j) for j in range(i % 4)],
        )
        for i in range(count)
    ]


def test_records_survive_both_ways_byte_for_byte() -> None:
    records = mixed_records(300)
    original = kafka_batch(records, producer=(4000, 2, 17))
    stored = kafka_to_replog(original)
    validate_produced(stored)
    assert replog_to_kafka(stored) == original
    assert kafka_records(replog_to_kafka(stored)) == records


def test_stored_columns_hold_the_records() -> None:
    records = mixed_records(30)
    payload = decode_payload(kafka_to_replog(kafka_batch(records)))
    assert payload.schema == PAYLOAD_SCHEMA
    assert payload.column("key").to_pylist() == [key for _, key, _, _ in records]
    assert payload.column("value").to_pylist() == [value for _, _, value, _ in records]
    stamps = payload.column("timestamp").cast(pa.int64()).to_pylist()
    assert stamps == [timestamp for timestamp, _, _, _ in records]
    headers = payload.column("headers").to_pylist()
    expected = [[{"key": k, "value": v} for k, v in h] or None for _, _, _, h in records]
    assert headers == expected


def test_batch_without_headers_stores_no_headers_column() -> None:
    records = [(BASE_TS, b"k", b"v", [])] * 5
    payload = decode_payload(kafka_to_replog(kafka_batch(records)))
    assert payload.schema == PAYLOAD_SCHEMA_NO_HEADERS


def test_header_fields_carry_over_and_stamps_of_the_leader_show() -> None:
    original = kafka_batch(mixed_records(10), producer=(77, 3, 1000))
    stored = bytearray(kafka_to_replog(original))
    stored_header = BatchHeader.decode(stored)
    assert (stored_header.producer_id, stored_header.producer_epoch) == (77, 3)
    assert (stored_header.base_sequence, stored_header.record_count) == (1000, 10)
    set_base_offset(stored, 123_456)
    set_leader_epoch(stored, 9)
    fetched = DefaultRecordBatch(replog_batch_to_kafka(memoryview(stored)))
    assert (fetched.base_offset, fetched.producer_id, fetched.base_sequence) == (123_456, 77, 1000)
    assert BatchHeader.decode(replog_to_kafka(stored)).leader_epoch == 9
    assert [r.offset for r in fetched] == list(range(123_456, 123_466))


def test_several_batches_convert_in_order() -> None:
    first, second = mixed_records(5), mixed_records(64)
    stored = kafka_to_replog(kafka_batch(first) + kafka_batch(second, codec=3))
    validate_produced(stored)
    batches = [bytes(batch) for _, batch in iter_batches(stored)]
    assert len(batches) == 2
    back = replog_to_kafka(stored)
    assert kafka_records(back[: len(replog_batch_to_kafka(batches[0]))]) == first
    assert kafka_codec(back) == "none"


def test_stored_batches_may_be_compressed_with_arrow_codecs() -> None:
    records = mixed_records(50)
    for codec in ("lz4", "zstd"):
        stored = kafka_to_replog(kafka_batch(records), store_codec=codec)
        validate_produced(stored)
        assert BatchHeader.decode(stored).compression == codec
        assert kafka_records(replog_to_kafka(stored)) == records


def test_large_batch_with_wide_varints() -> None:
    """Past 8,192 records offset deltas take three bytes; values past 8 KiB two-byte lengths."""
    records = [
        (BASE_TS + i * 100_000, b"k", b"x" * (9000 if i % 1000 == 1 else i % 3), [])
        for i in range(10_000)
    ]
    stored = kafka_to_replog(kafka_batch(records))
    validate_produced(stored)
    assert kafka_records(replog_to_kafka(stored)) == records


def test_one_record_with_many_headers_among_many_without() -> None:
    records: list[Record] = [(BASE_TS, b"k", b"v", [])] * 40
    records[17] = (BASE_TS, b"k", b"v", [(f"header-{j}", b"%d" % j) for j in range(500)])
    records[3] = (BASE_TS, None, None, [("a", None), ("", b"")])
    assert kafka_records(replog_to_kafka(kafka_to_replog(kafka_batch(records)))) == records


def test_log_append_time_batches_give_every_record_the_max_timestamp() -> None:
    stored = build_batch(
        [b"a", b"b", b"c"],
        timestamps=[BASE_TS, BASE_TS + 5, BASE_TS + 2],
        attributes=TIMESTAMP_TYPE_LOG_APPEND,
    )
    fetched = replog_to_kafka(stored)
    parsed = DefaultRecordBatch(fetched)
    assert parsed.timestamp_type == 1
    assert [r.timestamp for r in parsed] == [BASE_TS + 5] * 3
    again = decode_payload(kafka_to_replog(fetched))
    assert again.column("timestamp").cast(pa.int64()).to_pylist() == [BASE_TS + 5] * 3


def test_batches_written_by_replog_clients_read_as_kafka() -> None:
    """Null and empty header lists are no headers; a null header key is an empty one."""
    stored = build_batch(
        [b"one", None, b"three"],
        keys=[None, b"k2", "k3"],
        timestamps=[BASE_TS, BASE_TS - 10, BASE_TS + 10],
        headers=[None, [], [("trace", b"x"), ("empty", None)]],
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
    )
    assert kafka_records(replog_to_kafka(stored)) == [
        (BASE_TS, None, b"one", []),
        (BASE_TS - 10, b"k2", None, []),
        (BASE_TS + 10, b"k3", b"three", [("trace", b"x"), ("empty", None)]),
    ]
    struct_type = pa.struct([("key", pa.string()), ("value", pa.binary())])
    headers = pa.array([[{"key": None, "value": b"v"}]], pa.list_(struct_type))
    columns = {"value": pa.array([b"v"]), "timestamp": pa.array([BASE_TS]), "headers": headers}
    unnamed = encode_batch(pa.RecordBatch.from_pydict(columns))
    assert kafka_records(replog_to_kafka(unnamed)) == [(BASE_TS, None, b"v", [("", b"v")])]


optional_bytes = st.none() | st.binary(max_size=300)
record_strategy = st.tuples(
    st.integers(BASE_TS - 10**9, BASE_TS + 10**9),
    optional_bytes,
    optional_bytes,
    st.lists(st.tuples(st.text(max_size=20), optional_bytes), max_size=4),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=150), st.sampled_from([0, 1, 2, 3, 4]))
def test_any_records_round_trip(records: list[Record], codec: int) -> None:
    original = kafka_batch(records, codec=codec)
    stored = kafka_to_replog(original)
    validate_produced(stored)
    assert kafka_records(replog_to_kafka(stored)) == records
