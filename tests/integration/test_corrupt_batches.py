"""Batches with a good CRC but a bad inside, against a real broker process.

The CRC only proves that the bytes arrived as the producer sent them; a buggy or
hostile producer can checksum a payload that is not an Arrow stream, or a header whose
record count, timestamps or attributes disagree with its payload. Stored, such a batch
would make every later reader of the partition fail on it, forever. The leader must
refuse it on append with a typed error (CORRUPT_MESSAGE when the payload cannot be
decoded, INVALID_RECORD when it decodes but breaks a rule), store nothing, and keep
serving the partition.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

from spark_replica.client import BrokerConnection, Cluster, Consumer, Producer
from spark_replica.errors import CorruptMessageError, InvalidRecordError
from spark_replica.records import (
    CRC_FIELD,
    CRC_FIELD_OFFSET,
    HEADER,
    HEADER_SIZE,
    HEADER_TYPE,
    LENGTH_PREFIX_SIZE,
    BatchHeader,
    build_batch,
    compute_crc,
)
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic
from tests.support import BrokerFactory, create_topic, run

TOPIC = "corrupt-batches"
BASE_TS = 1_700_000_000_000
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"

pytestmark = pytest.mark.slow


def good_batch(compression: str = "none") -> bytes:
    return build_batch(
        ["v0", "v1", "v2"],
        keys=["k0", None, "k2"],
        timestamps=[BASE_TS, BASE_TS + 2, BASE_TS + 1],
        compression=compression,
    )


def rechecked(batch: bytes, payload: bytes | None = None, **fields: int) -> bytes:
    """`batch` with header fields and/or payload replaced, its length and CRC made right.

    The CRC is computed afresh, so the broker's CRC check passes and only a look
    inside the batch can tell that something is wrong.
    """
    header = BatchHeader.decode(batch)
    body = batch[HEADER_SIZE:] if payload is None else payload
    header = dataclasses.replace(
        header, batch_length=HEADER_SIZE + len(body) - LENGTH_PREFIX_SIZE, **fields
    )
    data = bytearray(HEADER_SIZE) + body
    HEADER.pack_into(data, 0, *dataclasses.astuple(header))
    CRC_FIELD.pack_into(data, CRC_FIELD_OFFSET, compute_crc(data))
    return bytes(data)


def arrow_stream(*batches: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def with_payload(columns: dict[str, pa.Array]) -> bytes:
    """A good batch's header over a payload of these columns (3 rows expected)."""
    return rechecked(good_batch(), arrow_stream(pa.RecordBatch.from_pydict(columns)))


def frame_magic_broken(compression: str, magic: bytes) -> bytes:
    """A compressed batch whose first compressed buffer no longer starts a frame."""
    batch = bytearray(good_batch(compression))
    position = batch.index(magic, HEADER_SIZE)
    batch[position] ^= 0xFF
    return rechecked(bytes(batch))


VALUES = pa.array([b"v0", b"v1", b"v2"], pa.binary())
STAMPS = pa.array([BASE_TS, BASE_TS + 2, BASE_TS + 1], pa.timestamp("ms", tz="UTC"))


def bad_batches() -> dict[str, tuple[Callable[[], bytes], type[Exception]]]:
    """name -> (a batch with a good CRC, the error the leader must answer)."""
    good = good_batch()
    header = BatchHeader.decode(good)
    return {
        "payload-not-arrow": (
            lambda: rechecked(good, b"\x5a" * (len(good) - HEADER_SIZE)),
            CorruptMessageError,
        ),
        "payload-cut-in-half": (
            lambda: rechecked(
                good, good[HEADER_SIZE : HEADER_SIZE + (len(good) - HEADER_SIZE) // 2]
            ),
            CorruptMessageError,
        ),
        "bytes-after-the-stream": (
            lambda: rechecked(good, good[HEADER_SIZE:] + b"\x00" * 16),
            CorruptMessageError,
        ),
        "lz4-frame-broken": (
            lambda: frame_magic_broken("lz4", LZ4_FRAME_MAGIC),
            CorruptMessageError,
        ),
        "zstd-frame-broken": (
            lambda: frame_magic_broken("zstd", ZSTD_FRAME_MAGIC),
            CorruptMessageError,
        ),
        "count-above-payload": (
            lambda: rechecked(good, record_count=4, last_offset_delta=3),
            InvalidRecordError,
        ),
        "count-below-payload": (
            lambda: rechecked(good, record_count=2, last_offset_delta=1),
            InvalidRecordError,
        ),
        "last-offset-delta-disagrees": (
            lambda: rechecked(good, last_offset_delta=7),
            CorruptMessageError,
        ),
        "first-timestamp-disagrees": (
            lambda: rechecked(good, first_timestamp=header.first_timestamp + 1),
            InvalidRecordError,
        ),
        "max-timestamp-disagrees": (
            lambda: rechecked(good, max_timestamp=header.max_timestamp - 1),
            InvalidRecordError,
        ),
        "unknown-codec": (lambda: rechecked(good, attributes=1), InvalidRecordError),
        "unknown-attribute-bit": (lambda: rechecked(good, attributes=0x40), InvalidRecordError),
        "value-column-not-binary": (
            lambda: with_payload(
                {"key": VALUES, "value": pa.array([1, 2, 3], pa.int64()), "timestamp": STAMPS}
            ),
            InvalidRecordError,
        ),
        "no-value-column": (
            lambda: with_payload({"key": VALUES, "timestamp": STAMPS}),
            InvalidRecordError,
        ),
        "null-timestamp": (
            lambda: with_payload(
                {
                    "key": VALUES,
                    "value": VALUES,
                    "timestamp": pa.array(
                        [BASE_TS, None, BASE_TS + 1], pa.timestamp("ms", tz="UTC")
                    ),
                }
            ),
            InvalidRecordError,
        ),
        "two-arrow-batches": (
            lambda: rechecked(
                good,
                arrow_stream(
                    pa.RecordBatch.from_pydict(
                        {"key": VALUES, "value": VALUES, "timestamp": STAMPS}
                    ),
                    pa.RecordBatch.from_pydict(
                        {"key": VALUES, "value": VALUES, "timestamp": STAMPS}
                    ),
                ),
            ),
            InvalidRecordError,
        ),
        "good-then-undecodable": (
            lambda: good + rechecked(good, b"\x5a" * (len(good) - HEADER_SIZE)),
            CorruptMessageError,
        ),
    }


@pytest.fixture(scope="module")
def address(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int]]:
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("corrupt-batches"),
    )
    try:
        broker = factory.start(1)
        run(create_topic([(broker.host, broker.port)], TOPIC, 1))
        yield (broker.host, broker.port)
    finally:
        factory.stop_all()


async def produce_raw(address: tuple[str, int], records: bytes) -> tuple[int, int, int, int]:
    """(error code, base offset) of one acks=all produce, with the log end offset before
    and after it."""
    conn = BrokerConnection(*address)
    await conn.connect()
    fetch = FetchRequest(0, 1, 1 << 20, [FetchTopic(TOPIC, [FetchPartition(0, 0, 1 << 20)])])
    try:
        (before,) = (await conn.send(fetch)).topics[0].partitions
        request = ProduceRequest(-1, 10_000, [ProduceTopic(TOPIC, [ProducePartition(0, records)])])
        (result,) = (await conn.send(request)).topics[0].partitions
        (after,) = (await conn.send(fetch)).topics[0].partitions
        return result.error_code, result.base_offset, before.log_end_offset, after.log_end_offset
    finally:
        await conn.close()


@pytest.mark.parametrize("case", list(bad_batches()))
def test_bad_batch_is_refused_with_its_typed_error_and_nothing_is_stored(
    address: tuple[str, int], case: str
) -> None:
    make, error = bad_batches()[case]
    code, base_offset, end_before, end_after = run(produce_raw(address, make()))
    assert (code, base_offset) == (error.code, -1)
    assert end_after == end_before


def test_partition_stays_readable_after_refused_batches(address: tuple[str, int]) -> None:
    """Good batches (plain, compressed, with headers) append and read back after refusals."""
    for make, _ in bad_batches().values():
        run(produce_raw(address, make()))
    with_headers = build_batch(["h0"], timestamps=[BASE_TS], headers=[[("trace", b"\x01")]])
    good = [good_batch(), good_batch("lz4"), good_batch("zstd"), with_headers]
    assert pa.ipc.open_stream(with_headers[HEADER_SIZE:]).schema.field("headers").type == (
        HEADER_TYPE
    )

    async def scenario() -> list[bytes | None]:
        cluster = Cluster([address])
        try:
            producer = Producer(cluster)
            for batch in good:
                await producer.send_batch(TOPIC, 0, batch)
            consumer = Consumer(cluster)
            tp = TopicPartition(TOPIC, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning()
            values: list[bytes | None] = []
            for _ in range(100):
                for chunk in await consumer.poll(max_wait_ms=100):
                    values += chunk.records.column("value").to_pylist()
                if consumer.position(tp) >= consumer.high_watermarks.get(tp, 1):
                    break
            return values
        finally:
            await cluster.close()

    assert run(scenario()) == [b"v0", b"v1", b"v2"] * 3 + [b"h0"]
