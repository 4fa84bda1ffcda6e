"""Fetched batches on the Kafka listener: compressed with the right codec, and the fetch
limits applied to what is sent, not to what is stored (pure logic, no broker)."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatch

from brokerd.core.batch_validation import validate_produced
from brokerd.kafka.fetch_cache import FetchCache
from brokerd.kafka.fetch_convert import INLINE_STORED_BYTES, Conversion, StoredRead
from spark_replica.errors import CorruptMessageError, InvalidRecordError, code_of
from spark_replica.records import HEADER_SIZE, BatchHeader, build_batch, set_base_offset
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.records.convert import (
    fetch_codec,
    kafka_to_replog,
    replog_batch_to_kafka,
    replog_to_kafka,
)
from spark_replica.wire.schema import Data

TP = TopicPartition("t", 0)
VALUES = [b"value-%d " % i * (i % 40) for i in range(200)]
KEYS = [b"key-%d" % i if i % 3 else None for i in range(200)]


def stored(compression: str = "none", values: list[bytes] = VALUES, offset: int = 0) -> bytes:
    batch = bytearray(build_batch(values, keys=KEYS[: len(values)], compression=compression))
    set_base_offset(batch, offset)
    return bytes(batch)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_a_fetched_batch_is_compressed_with_each_codec_and_reads_back(codec: int) -> None:
    fetched = replog_to_kafka(stored("zstd"), codec)
    batch = DefaultRecordBatch(fetched)  # aiokafka's reader: another implementation
    assert batch.compression_type == codec
    assert [(r.key, r.value) for r in batch] == list(zip(KEYS, VALUES, strict=True))
    assert len(fetched) < len(replog_to_kafka(stored("zstd"))) or codec == 0


def test_the_fetch_codec_is_the_producers_the_stored_one_or_the_topics() -> None:
    produced_gzip = kafka_to_replog(replog_batch_to_kafka(stored(), 1))
    validate_produced(produced_gzip)  # the remembered codec is a defined attribute
    attributes = BatchHeader.decode(produced_gzip).attributes
    assert fetch_codec(attributes, "producer") == 1
    produced_plain = BatchHeader.decode(kafka_to_replog(replog_batch_to_kafka(stored()))).attributes
    assert fetch_codec(produced_plain, "producer") == 0
    native_zstd = BatchHeader.decode(stored("zstd")).attributes
    assert fetch_codec(native_zstd, "producer") == 4
    assert fetch_codec(attributes, "uncompressed") == 0
    assert fetch_codec(native_zstd, "snappy") == 2
    assert fetch_codec(produced_plain, "lz4") == 3
    with pytest.raises(InvalidRecordError, match="produced Kafka codec 5"):
        validate_produced(build_batch([b"x"], attributes=6 << 8))


def read(
    batches: list[bytes], max_bytes: int, compression_type: str = "uncompressed"
) -> StoredRead:
    result = Data(error_code=0, error_message=None, records=b"")
    return StoredRead(result, TP, b"".join(batches), max_bytes, compression_type)


def sizes(read_: StoredRead) -> list[int]:
    return [len(batch) for batch in read_.result.records]


def test_the_limits_count_converted_bytes_and_the_first_batch_always_goes() -> None:
    # ~0.5 MiB of records in each stored batch of a few KiB
    big = [b"x" * (512 * 1024)]
    first = read([stored("zstd", big, 0), stored("zstd", big, 1)], max_bytes=1024)
    second = read([stored("zstd", big, 2)], max_bytes=10 * 1024 * 1024)
    conversion = Conversion([first, second], 600 * 1024, FetchCache())
    assert conversion.run(inline=False)
    assert len(sizes(first)) == 1 and sizes(first)[0] > 512 * 1024  # over both limits
    assert sizes(second) == []  # the request's limit is spent


def test_later_partitions_take_what_fits_in_the_request_limit() -> None:
    small = [stored("none", VALUES[:20], offset) for offset in range(0, 100, 20)]
    one = len(replog_batch_to_kafka(small[0]))
    first = read(small[:2], max_bytes=10 * one)
    second = read(small[2:], max_bytes=10 * one)
    conversion = Conversion([first, second], 3 * one, FetchCache())
    assert conversion.run(inline=True)  # small and uncompressed: all on the loop
    assert len(sizes(first)) == 2 and len(sizes(second)) == 1


def test_an_inline_run_stops_at_an_expensive_batch_and_a_second_run_finishes() -> None:
    compressed = stored("zstd")
    cheap = read([stored("none", VALUES[:10])], max_bytes=1 << 20)
    expensive = read([compressed], max_bytes=1 << 20)
    conversion = Conversion([cheap, expensive], 1 << 20, FetchCache())
    assert not conversion.run(inline=True)
    assert len(sizes(cheap)) == 1 and expensive.result.records == b""
    assert conversion.run(inline=False)
    assert len(sizes(expensive)) == 1
    # Cached now: a second answer converts nothing, so it all happens on the loop.
    again = read([compressed], max_bytes=1 << 20)
    assert Conversion([again], 1 << 20, conversion.cache).run(inline=True)


def test_the_inline_allowance_is_bounded_per_answer() -> None:
    values = [b"v" * 1024] * 40
    batches = [stored("none", values, offset) for offset in range(0, 40 * 20, 40)]
    assert sum(map(len, batches)) > INLINE_STORED_BYTES
    answer = read(batches, max_bytes=64 << 20)
    conversion = Conversion([answer], 64 << 20, FetchCache())
    assert not conversion.run(inline=True)
    assert conversion.run(inline=False)
    assert len(sizes(answer)) == len(batches)


def test_a_batch_that_does_not_convert_is_that_partitions_error_alone() -> None:
    broken = bytearray(stored("none", VALUES[:5]))
    broken[HEADER_SIZE : HEADER_SIZE + 16] = b"\xff" * 16  # not an Arrow stream any more
    bad = read([bytes(broken)], max_bytes=1 << 20)
    good = read([stored("none", VALUES[:5])], max_bytes=1 << 20)
    assert Conversion([bad, good], 1 << 20, FetchCache()).run(inline=False)
    assert bad.result.error_code == code_of(CorruptMessageError("x"))
    assert bad.result.records == b""
    assert good.result.error_code == 0 and len(sizes(good)) == 1


def test_a_client_before_fetch_v10_gets_zstd_batches_uncompressed() -> None:
    compressed = stored("zstd")
    old, new = read([compressed], 1 << 20, "producer"), read([compressed], 1 << 20, "producer")
    cache = FetchCache()
    assert Conversion([old], 1 << 20, cache, zstd=False).run(inline=False)
    assert Conversion([new], 1 << 20, cache, zstd=True).run(inline=False)
    assert DefaultRecordBatch(old.result.records[0]).compression_type == 0
    assert DefaultRecordBatch(new.result.records[0]).compression_type == 4
