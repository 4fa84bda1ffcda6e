"""Counts and lengths from the wire are refused before anything is sized from them, in
both codecs and in Kafka's record batches, by the one helper (spark_replica.wire.bounds);
what replog's compressed Arrow payloads declare is bounded before Arrow decompresses them
(spark_replica.payload_bounds, brokerd.batch_validation)."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc

import cramjam
import numpy as np
import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from brokerd.core.batch_validation import decompressed_payload_bytes, validate_produced
from spark_replica.errors import CorruptMessageError, MessageTooLargeError, ProtocolError
from spark_replica.payload_bounds import declared_payload_bytes
from spark_replica.records import (
    HEADER_SIZE,
    PAYLOAD_SCHEMA,
    PAYLOAD_SCHEMA_NO_HEADERS,
    build_batch,
    compute_crc,
    encode_batch,
)
from spark_replica.wire import primitives as kafka_primitives
from spark_replica.wire import primitives as native_primitives
from spark_replica.wire.bounds import bounded_count
from spark_replica.wire.kafka.messages.groups import OFFSET_FETCH_REQUEST
from spark_replica.wire.kafka.records.convert import kafka_to_replog

HUGE = 2**31 - 1
LAST_OFFSET_DELTA_AT, RECORD_COUNT_AT, ATTRIBUTES_AT = 23, 57, 21
# Far below what sizing anything from HUGE would take (a list of it is 16 GiB).
ALLOCATION_CEILING = 1 << 20


def test_the_helper_takes_what_fits_and_refuses_the_rest() -> None:
    assert bounded_count(0, 0, "array") == 0
    assert bounded_count(5, 10, "record", item_bytes=2) == 5
    with pytest.raises(ProtocolError, match="record count 6 cannot fit in the 10 bytes"):
        bounded_count(6, 10, "record", item_bytes=2)
    with pytest.raises(ProtocolError):
        bounded_count(-2, 10, "array")
    with pytest.raises(CorruptMessageError):
        bounded_count(HUGE, 100, "header", error=CorruptMessageError)


@pytest.mark.parametrize(
    ("frame", "read"),
    [
        (struct.pack(">i", HUGE) + bytes(8), lambda r: r.array_length()),
        (b"\xff\xff\xff\xff\x07" + bytes(8), lambda r: r.compact_array_length()),
        (b"\xff\xff\xff\xff\x07" + bytes(8), lambda r: r.tagged_field_count()),
        (struct.pack(">i", 3) + bytes(8), lambda r: r.array_length(item_bytes=4)),
        (struct.pack(">i", HUGE) + bytes(8), lambda r: r.bytes_()),
        (b"\xff\xff\xff\xff\x07" + bytes(8), lambda r: r.compact_bytes()),
        (struct.pack(">h", 32000) + bytes(8), lambda r: r.string()),
        (struct.pack(">i", -7) + bytes(8), lambda r: r.records()),
    ],
)
def test_kafka_reader_refuses_counts_and_lengths_the_frame_cannot_hold(frame, read) -> None:
    with pytest.raises(ProtocolError, match="cannot fit"):
        read(kafka_primitives.Reader(frame))


def test_kafka_tables_size_scalar_arrays_by_their_width() -> None:
    """An []int32 claiming more ints than the bytes left hold four-byte items: refused,
    though a one-byte-per-item bound would have let it through to the read."""
    # OffsetFetch v1: group id, topics [name, partition indexes []int32]
    body = struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
    body += struct.pack(">i", 3) + bytes(8)  # three int32 partitions claimed, two present
    with pytest.raises(ProtocolError, match="array count 3 cannot fit"):
        OFFSET_FETCH_REQUEST.from_bytes(1, body)


@pytest.mark.parametrize(
    ("frame", "read"),
    [
        (struct.pack(">i", HUGE) + bytes(8), lambda r: r.array(r.int8)),
        (struct.pack(">i", HUGE) + bytes(8), lambda r: r.bytes_()),
        (struct.pack(">i", -7) + bytes(8), lambda r: r.bytes_()),
        (struct.pack(">h", -3) + bytes(8), lambda r: r.string()),
        (struct.pack(">h", 32000) + bytes(8), lambda r: r.string()),
    ],
)
def test_native_reader_refuses_counts_and_lengths_the_frame_cannot_hold(frame, read) -> None:
    with pytest.raises(ProtocolError, match="cannot fit"):
        read(native_primitives.Reader(frame))


def kafka_batch(count: int = 1, codec: int = 0, value: bytes = b"v") -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for offset in range(count):
        builder.append(offset, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    return builder.build()


def claiming(data: bytearray, count: int) -> bytes:
    """The batch with its record count (and last offset delta, so the counts agree)
    changed to `count`, its CRC made right again."""
    struct.pack_into(">i", data, LAST_OFFSET_DELTA_AT, count - 1)
    struct.pack_into(">i", data, RECORD_COUNT_AT, count)
    struct.pack_into(">I", data, 17, compute_crc(data))
    return bytes(data)


def test_a_batch_claiming_two_billion_records_costs_nothing() -> None:
    lying = claiming(kafka_batch(), HUGE)
    assert len(lying) == 69
    tracemalloc.start()
    try:
        with pytest.raises(CorruptMessageError, match=f"record count {HUGE} cannot fit"):
            kafka_to_replog(lying)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < ALLOCATION_CEILING


def test_a_record_claiming_a_billion_headers_is_refused_before_reading_them() -> None:
    record_body = b"\x00\x00\x00\x01\x02v" + b"\xfe\xff\xff\xff\x07"  # header count 2^31-1
    records = bytes([len(record_body) << 1]) + record_body
    data = kafka_batch()[:HEADER_SIZE] + records
    struct.pack_into(">i", data, 8, len(data) - 12)
    with pytest.raises(CorruptMessageError, match="header count"):
        kafka_to_replog(claiming(data, 1))


def test_uncompressed_records_count_against_the_limit_across_batches() -> None:
    value = bytes(600_000)
    one = bytes(kafka_batch(value=value))
    assert len(kafka_to_replog(one, max_records_bytes=1_000_000)) > 0
    with pytest.raises(MessageTooLargeError):
        kafka_to_replog(one + one, max_records_bytes=1_000_000)


def test_compressed_records_count_against_the_limit_across_batches() -> None:
    def zstd_batch() -> bytes:
        plain = kafka_batch(value=bytes(600_000))
        compressed = bytes(cramjam.zstd.compress(bytes(plain[HEADER_SIZE:])))
        data = plain[:HEADER_SIZE] + compressed
        data[ATTRIBUTES_AT + 1] = 4
        struct.pack_into(">i", data, 8, len(data) - 12)
        return claiming(data, 1)

    one = zstd_batch()
    assert len(one) < 1000
    assert len(kafka_to_replog(one, max_records_bytes=1_000_000)) > 0
    with pytest.raises(MessageTooLargeError):
        kafka_to_replog(one + one, max_records_bytes=1_000_000)


def arrow_buffers_bytes(records: pa.RecordBatch) -> int:
    return sum(b.size for column in records.columns for b in column.buffers() if b is not None)


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compressed_payloads_declare_their_buffers_sizes(compression: str) -> None:
    batch = build_batch(
        [b"a" * 1000, None, b"c"],
        keys=[b"k", None, b""],
        headers=[[("h", b"v")], None, [("x", None)]],
        compression=compression,
    )
    payload = pa.py_buffer(memoryview(batch)[HEADER_SIZE:])
    records = pa.ipc.open_stream(payload).read_next_batch()
    assert records.schema.equals(PAYLOAD_SCHEMA)
    assert declared_payload_bytes(payload) == arrow_buffers_bytes(records)
    assert decompressed_payload_bytes(batch, limit=10_000) == arrow_buffers_bytes(records)
    assert decompressed_payload_bytes(build_batch([b"v"]), limit=0) == 0  # read in place


def test_an_arrow_bomb_is_refused_before_arrow_allocates_it() -> None:
    size = 32 << 20
    offsets = pa.py_buffer(np.array([0, size], np.int32))
    value = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(bytes(size))])
    timestamps = pa.array([1_700_000_000_000], pa.timestamp("ms", tz="UTC"))
    records = pa.RecordBatch.from_arrays(
        [pa.array([None], pa.binary()), value, timestamps], schema=PAYLOAD_SCHEMA_NO_HEADERS
    )
    bomb = bytes(encode_batch(records, compression="zstd"))
    del records, value
    assert len(bomb) < 64 * 1024
    allocated = pa.total_allocated_bytes()
    with pytest.raises(MessageTooLargeError, match=r"max\.message\.bytes 16777216"):
        decompressed_payload_bytes(bomb, limit=16 << 20)
    assert pa.total_allocated_bytes() - allocated < ALLOCATION_CEILING
    assert decompressed_payload_bytes(bomb, limit=size + 100) > size
    validate_produced(bomb)  # what the bound protects: it is a sound batch


def test_damaged_arrow_metadata_is_corrupt_message_never_another_error() -> None:
    batch = bytearray(build_batch([b"value"] * 3, keys=[b"k"] * 3, compression="zstd"))
    for position in range(HEADER_SIZE, len(batch)):
        damaged = bytearray(batch)
        damaged[position] ^= 0xFF
        with contextlib.suppress(CorruptMessageError):
            declared_payload_bytes(pa.py_buffer(bytes(damaged[HEADER_SIZE:])))
