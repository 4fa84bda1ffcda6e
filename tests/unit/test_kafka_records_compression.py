"""Kafka's codecs in produced batches: each one the clients write, in both snappy shapes."""

from __future__ import annotations

import struct

import cramjam
import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from brokerd.core.batch_validation import validate_produced
from spark_replica.errors import CorruptMessageError, MessageTooLargeError
from spark_replica.records import HEADER_SIZE, compute_crc, decode_payload
from spark_replica.wire.kafka.records.convert import kafka_codec, kafka_to_replog, replog_to_kafka
from spark_replica.wire.kafka.records.decompress import (
    FIRST_TRY_BYTES,
    FIRST_TRY_RATIO,
    XERIAL_MAGIC,
)

BASE_TS = 1_700_000_000_000
RECORDS = [
    (BASE_TS + i, b"key-%d" % i, b"value " * (i % 50), [("h", b"%d" % i)]) for i in range(400)
]


def kafka_batch(codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    for offset, (timestamp, key, value, headers) in enumerate(RECORDS):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def recompressed(codec: int, compressed: bytes) -> bytes:
    """The uncompressed batch's header around other compressed records."""
    data = bytearray(kafka_batch(0)[:HEADER_SIZE]) + compressed
    data[22] = codec
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, compute_crc(data))
    return bytes(data)


def uncompressed_records() -> bytes:
    return kafka_batch(0)[HEADER_SIZE:]


def xerial(blocks: list[bytes]) -> bytes:
    framed = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for block in blocks:
        compressed = bytes(cramjam.snappy.compress_raw(block))
        framed += struct.pack(">i", len(compressed)) + compressed
    return framed


def read_back(records: bytes) -> list[tuple[int, bytes | None, bytes | None, list]]:
    stored = kafka_to_replog(records)
    validate_produced(stored)
    return [
        (r.timestamp, r.key, r.value, list(r.headers))
        for r in DefaultRecordBatch(replog_to_kafka(stored))
    ]


@pytest.mark.parametrize(
    ("codec", "name"), [(0, "none"), (1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")]
)
def test_each_codec_the_clients_write(codec: int, name: str) -> None:
    records = kafka_batch(codec)
    assert kafka_codec(records) == name
    assert read_back(records) == RECORDS


def test_raw_snappy_as_librdkafka_writes_it() -> None:
    compressed = bytes(cramjam.snappy.compress_raw(uncompressed_records()))
    assert read_back(recompressed(2, compressed)) == RECORDS


def test_xerial_snappy_in_several_blocks_as_the_java_client_writes_it() -> None:
    records = uncompressed_records()
    blocks = [records[:1000], records[1000:1001], records[1001:]]
    assert read_back(recompressed(2, xerial(blocks))) == RECORDS


def test_xerial_blocks_are_bounded_together() -> None:
    framed = xerial([bytes(600_000), bytes(600_000)])
    with pytest.raises(MessageTooLargeError):
        kafka_to_replog(recompressed(2, framed), max_records_bytes=1_000_000)


@pytest.mark.parametrize("cut", [4, 18, -3])
def test_xerial_framing_cut_short_is_corrupt(cut: int) -> None:
    framed = xerial([uncompressed_records()])
    with pytest.raises(CorruptMessageError):
        kafka_to_replog(recompressed(2, framed[: len(XERIAL_MAGIC) + 8] + framed[16:cut]))


def test_xerial_block_length_past_the_data_is_corrupt() -> None:
    framed = XERIAL_MAGIC + struct.pack(">iii", 1, 1, 1000) + b"short"
    with pytest.raises(CorruptMessageError):
        kafka_to_replog(recompressed(2, framed))


def test_records_decompressing_to_exactly_the_limit_are_accepted() -> None:
    records = uncompressed_records()
    compressed = bytes(cramjam.zstd.compress(records))
    stored = kafka_to_replog(recompressed(4, compressed), max_records_bytes=len(records))
    validate_produced(stored)
    with pytest.raises(MessageTooLargeError):
        kafka_to_replog(recompressed(4, compressed), max_records_bytes=len(records) - 1)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_records_overflowing_the_first_buffer_are_decompressed_again(codec: int) -> None:
    """2 MB of zeros compress far past FIRST_TRY_RATIO and overflow FIRST_TRY_BYTES."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for offset in range(2000):
        builder.append(offset, timestamp=BASE_TS, key=None, value=bytes(1000), headers=[])
    records = bytes(builder.build())
    assert max(FIRST_TRY_BYTES, FIRST_TRY_RATIO * len(records)) < 2000 * 1000
    payload = decode_payload(kafka_to_replog(records))
    assert payload.column("value").to_pylist() == [bytes(1000)] * 2000
