"""CPU cost of the wire codecs on the produce and fetch path; prints one JSON line.

Every produce and every fetch goes through these codecs, on the client and on the broker,
so their cost is paid per request. Each message is one topic of ``--partitions``
partitions carrying ``--record-bytes`` of records each (the records are kept by
reference, so the figures are the cost of the fields around them). Timed: encoding into
a fresh Writer (the native messages with the native frames' large-field threshold) and
decoding the encoded body, in CPU time (``time.process_time``), the best of ``--repeats``
runs of ``--loops`` calls each, reported as microseconds per call. No broker, no I/O.

The native messages (replog's Produce and Fetch, request and response) and Kafka's
(Produce v8 and Fetch v11) are timed alike: ``<message>_encode_us`` and ``_decode_us``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from spark_replica.wire.kafka.messages.core import (
    FETCH_REQUEST,
    FETCH_RESPONSE,
    PRODUCE_REQUEST,
    PRODUCE_RESPONSE,
)
from spark_replica.wire.native.fetch import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FetchTopicResult,
)
from spark_replica.wire.native.frames import NATIVE_LARGE_FIELD_BYTES
from spark_replica.wire.native.produce import (
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
    ProduceTopicResult,
)
from spark_replica.wire.primitives import Reader, Writer
from spark_replica.wire.schema import Data, Message

KAFKA_PRODUCE_VERSION = 8
KAFKA_FETCH_VERSION = 11


def best_us(call: Callable[[], Any], loops: int, repeats: int) -> float:
    """The fastest of `repeats` runs of `loops` calls, in CPU microseconds per call."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(loops):
            call()
        best = min(best, time.process_time() - start)
    return round(best / loops * 1e6, 2)


def native_messages(partitions: int, records: bytes) -> dict[str, Any]:
    """One of each native message, `partitions` partitions of one topic."""
    ids = range(partitions)
    return {
        "native_produce_request": ProduceRequest(
            -1, 30_000, [ProduceTopic("bench", [ProducePartition(p, records) for p in ids])]
        ),
        "native_produce_response": ProduceResponse(
            [
                ProduceTopicResult(
                    "bench", [ProducePartitionResult(p, 0, None, 1000 * p, 0) for p in ids]
                )
            ]
        ),
        "native_fetch_request": FetchRequest(
            500,
            1,
            50 << 20,
            [FetchTopic("bench", [FetchPartition(p, 1000 * p, 1 << 20, 3) for p in ids])],
        ),
        "native_fetch_response": FetchResponse(
            [
                FetchTopicResult(
                    "bench",
                    [FetchPartitionResult(p, 0, None, 2000, 0, 2000, records) for p in ids],
                )
            ]
        ),
    }


def kafka_messages(partitions: int, records: bytes) -> dict[str, tuple[Message, int, Data]]:
    """Kafka's Produce and Fetch, request and response, shaped like the native ones."""
    ids = range(partitions)
    produce = Data(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            Data(name="bench", partition_data=[Data(index=p, records=records) for p in ids])
        ],
    )
    produced = Data(
        responses=[
            Data(
                name="bench",
                partition_responses=[
                    Data(index=p, error_code=0, base_offset=1000 * p, log_append_time_ms=-1)
                    for p in ids
                ],
            )
        ],
        throttle_time_ms=0,
    )
    fetch = Data(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        topics=[
            Data(
                topic="bench",
                partitions=[
                    Data(partition=p, fetch_offset=1000 * p, partition_max_bytes=1 << 20)
                    for p in ids
                ],
            )
        ],
    )
    fetched = Data(
        throttle_time_ms=0,
        error_code=0,
        responses=[
            Data(
                topic="bench",
                partitions=[
                    Data(partition_index=p, error_code=0, high_watermark=2000, records=records)
                    for p in ids
                ],
            )
        ],
    )
    return {
        "kafka_produce_request": (PRODUCE_REQUEST, KAFKA_PRODUCE_VERSION, produce),
        "kafka_produce_response": (PRODUCE_RESPONSE, KAFKA_PRODUCE_VERSION, produced),
        "kafka_fetch_request": (FETCH_REQUEST, KAFKA_FETCH_VERSION, fetch),
        "kafka_fetch_response": (FETCH_RESPONSE, KAFKA_FETCH_VERSION, fetched),
    }


def time_native(message: Any, loops: int, repeats: int) -> tuple[float, float]:
    """Encode and decode cost of one native message, as the native frames write it."""

    def encode() -> Writer:
        writer = Writer(NATIVE_LARGE_FIELD_BYTES)
        message.write(writer)
        return writer

    body = encode().getvalue()
    cls = type(message)
    return best_us(encode, loops, repeats), best_us(lambda: cls.read(Reader(body)), loops, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--loops", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    records = bytes(range(256)) * (args.record_bytes // 256) + bytes(args.record_bytes % 256)
    result: dict[str, Any] = {
        "benchmark": "wire_codec",
        "partitions": args.partitions,
        "record_bytes": args.record_bytes,
    }

    for name, message in native_messages(args.partitions, records).items():
        encode_us, decode_us = time_native(message, args.loops, args.repeats)
        result[f"{name}_encode_us"] = encode_us
        result[f"{name}_decode_us"] = decode_us

    for name, (table, version, data) in kafka_messages(args.partitions, records).items():
        body = table.to_bytes(version, data)
        result[f"{name}_encode_us"] = best_us(
            lambda t=table, v=version, d=data: t.encode(v, d, Writer()), args.loops, args.repeats
        )
        result[f"{name}_decode_us"] = best_us(
            lambda t=table, v=version, b=body: t.decode(v, Reader(b)), args.loops, args.repeats
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
