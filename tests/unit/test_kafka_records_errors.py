"""Every way a produced Kafka batch can be wrong gets its typed error, and nothing else."""

from __future__ import annotations

import struct

import cramjam
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from brokerd.core.batch_validation import validate_produced
from spark_replica.errors import (
    BrokerResponseError,
    ConfigError,
    CorruptMessageError,
    InvalidRecordError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from spark_replica.records import HEADER, HEADER_SIZE, compute_crc
from spark_replica.wire.kafka.records.convert import kafka_codec, kafka_to_replog, replog_to_kafka

BASE_TS = 1_700_000_000_000
ATTRIBUTES_OFFSET = 21
RECORD_COUNT_OFFSET = 57


def batch(count: int = 3, *, transactional: int = 0, headers: bool = False) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset in range(count):
        builder.append(
            offset,
            timestamp=BASE_TS,
            key=b"k",
            value=b"v",
            headers=[("h", b"x")] if headers else [],
        )
    return builder.build()


def rechecked(data: bytearray) -> bytearray:
    """The batch with its length and CRC made right again after an edit."""
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, compute_crc(data))
    return data


def with_records(records: bytes, *, codec: int = 0, count: int | None = None) -> bytearray:
    """A header of batch() around other records bytes, named with `codec`."""
    data = batch(1 if count is None else count)[:HEADER_SIZE] + records
    data[ATTRIBUTES_OFFSET + 1] = codec
    return rechecked(data)


def record(body: bytes) -> bytes:
    """One record: its zigzag length (< 64 bytes) and body."""
    return bytes([len(body) << 1]) + body


@pytest.mark.parametrize("magic", [0, 1])
def test_old_message_formats_are_unsupported(magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=None if magic == 0 else BASE_TS, key=b"k", value=b"v")
    with pytest.raises(UnsupportedForMessageFormatError):
        kafka_to_replog(bytes(builder.build()))


@pytest.mark.parametrize(
    "records",
    [
        b"",
        bytes(10),
        bytes(batch())[:-1],
        bytes(batch()) + bytes(5),
        bytes(batch())[:16] + b"\x07" + bytes(batch())[17:],
    ],
    ids=["empty", "short-header", "cut-short", "trailing-bytes", "unknown-magic"],
)
def test_framing_errors_are_corrupt_message(records: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        kafka_to_replog(records)


def test_crc_mismatch_is_corrupt_message() -> None:
    data = batch()
    data[-1] ^= 0x01
    with pytest.raises(CorruptMessageError, match="CRC"):
        kafka_to_replog(data)


def test_transactional_batches_without_a_producer_id_are_refused() -> None:
    with pytest.raises(InvalidRecordError, match="transactional"):
        kafka_to_replog(batch(transactional=1))


def test_control_batches_are_refused() -> None:
    data = batch()
    data[ATTRIBUTES_OFFSET + 1] |= 0x20
    with pytest.raises(InvalidRecordError, match="control"):
        kafka_to_replog(rechecked(data))


def test_record_count_disagreeing_with_last_offset_delta() -> None:
    data = batch()
    struct.pack_into(">i", data, RECORD_COUNT_OFFSET, 4)
    with pytest.raises(InvalidRecordError):
        kafka_to_replog(rechecked(data))


@pytest.mark.parametrize("count", [2, 4])
def test_records_not_matching_the_declared_count(count: int) -> None:
    records = bytes(batch(3))[HEADER_SIZE:]
    with pytest.raises(CorruptMessageError):
        kafka_to_replog(with_records(records, count=count))


def test_offset_deltas_out_of_order_are_invalid() -> None:
    first = record(b"\x00\x00\x02\x02k\x02v\x00")  # offset delta 1
    second = record(b"\x00\x00\x00\x02k\x02v\x00")  # offset delta 0
    with pytest.raises(InvalidRecordError, match="offset deltas"):
        kafka_to_replog(with_records(first + second, count=2))


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x00\x00\x03",  # key length -2
        b"\x00\x00\x00\x40k\x02v\x00",  # key length 32 runs past the record
        b"\x00\x00\x00\x02k\x02v\x01",  # header count -1
        b"\x00\x00\x00\x02k\x02v\x02\x10h",  # header key past the record
        b"\x00\x00\x00\x02k\x02v\x02\x01",  # header key length -1
        b"\x00\x00\x00\x02k\x02v\x02\x02h\x03",  # header value length -2
        b"\x00\x00\x00\x02k\x02v\x00\x00",  # a byte left over
        b"\x00\x00\x00\x02k\x02",  # value missing
        b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00\x02k\x02v\x00",  # varlong of 11
        b"\x00\x00\x80\x80\x80\x80\x80\x00\x02k\x02v\x00",  # varint of 6 bytes
    ],
)
def test_malformed_records_are_corrupt_message(body: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        kafka_to_replog(with_records(record(body)))


def test_negative_record_length_is_corrupt_message() -> None:
    with pytest.raises(CorruptMessageError):
        kafka_to_replog(with_records(b"\x03\x00\x00\x00"))
    # length -7 (zigzag 13), walked as 6 so that the walk ends where the records do
    with pytest.raises(CorruptMessageError, match="negative"):
        kafka_to_replog(with_records(b"\x0d" + bytes(6)))


def test_record_length_past_the_batch_is_corrupt_message() -> None:
    with pytest.raises(CorruptMessageError):
        kafka_to_replog(with_records(b"\xfe\x01\x00\x00\x00\x02k\x02v\x00"))


def test_header_key_that_is_not_utf8_is_invalid() -> None:
    body = b"\x00\x00\x00\x02k\x02v\x02\x02\xff\x02x"
    with pytest.raises(InvalidRecordError, match="UTF-8"):
        kafka_to_replog(with_records(record(body)))


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codecs_are_unsupported(codec: int) -> None:
    data = with_records(bytes(batch(1))[HEADER_SIZE:], codec=codec)
    with pytest.raises(UnsupportedCompressionTypeError):
        kafka_to_replog(data)
    with pytest.raises(UnsupportedCompressionTypeError):
        kafka_codec(data)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_records_that_do_not_decompress_are_corrupt(codec: int) -> None:
    with pytest.raises(CorruptMessageError):
        kafka_to_replog(with_records(b"\x00\x01garbage that is no codec's", codec=codec))


BOMB = bytes(2_000_000)


@pytest.mark.parametrize(
    ("codec", "compressed"),
    [
        (1, bytes(cramjam.gzip.compress(BOMB))),
        (2, bytes(cramjam.snappy.compress_raw(BOMB))),
        (3, bytes(cramjam.lz4.compress(BOMB))),
        (4, bytes(cramjam.zstd.compress(BOMB))),
    ],
    ids=["gzip", "snappy", "lz4", "zstd"],
)
def test_decompression_is_bounded(codec: int, compressed: bytes) -> None:
    with pytest.raises(MessageTooLargeError):
        kafka_to_replog(with_records(compressed, codec=codec), max_records_bytes=1_000_000)


def test_unknown_store_codec_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        kafka_to_replog(batch(), store_codec="gzip")


@pytest.mark.parametrize("stored", [b"", bytes(70), b"\x00" * 8 + b"\x00\x00\x00\x40"])
def test_replog_batches_that_are_not_batches_are_corrupt(stored: bytes) -> None:
    if not stored:
        assert replog_to_kafka(stored) == b""
        return
    with pytest.raises(CorruptMessageError):
        replog_to_kafka(stored)


def test_replog_payload_that_is_not_arrow_is_corrupt() -> None:
    data = bytearray(HEADER_SIZE) + b"not arrow"
    HEADER.pack_into(data, 0, 0, len(data) - 12, 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1)
    with pytest.raises(CorruptMessageError):
        replog_to_kafka(rechecked(data))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_records_raise_only_typed_errors(data: st.DataObject) -> None:
    """Bytes changed after the header, CRC made right: converted soundly or refused typed."""
    records = bytearray(bytes(batch(4, headers=True))[HEADER_SIZE:])
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(records) - 1))
        records[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(records)))
    try:
        stored = kafka_to_replog(with_records(bytes(records[:cut]), count=4))
    except BrokerResponseError as exc:
        assert isinstance(exc, CorruptMessageError | InvalidRecordError)
        return
    validate_produced(stored)
