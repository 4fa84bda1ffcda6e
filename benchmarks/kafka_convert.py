"""Records per second of the Kafka record conversion, both directions, on one core.

The broker converts every record a Kafka client produces (Kafka v2 batch -> stored Arrow
batch) and every record it serves one (stored batch -> Kafka v2 batch), so these rates
bound the Kafka listener's throughput. Records have 10-byte keys and 100-byte values, in
batches of 1,000 by default, as a confluent-kafka producer batches them; the Kafka input
is built once, uncompressed, with the conversion's own writer. Prints one JSON line::

    python benchmarks/kafka_convert.py [--batches N] [--records N] [--seconds S]
        [--store-codec none|lz4|zstd] [--headers N]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import pyarrow as pa
from _common import emit, positive_int

from spark_replica.records import encode_batch
from spark_replica.wire.kafka.records.convert import kafka_to_replog, replog_to_kafka

KEY_BYTES = 10
VALUE_BYTES = 100


def stored_batches(batches: int, records: int, headers: int) -> bytes:
    """`batches` replog batches of `records` random records each, laid end to end."""
    out = []
    for number in range(batches):
        columns = {
            "key": pa.array([os.urandom(KEY_BYTES) for _ in range(records)], pa.binary()),
            "value": pa.array([os.urandom(VALUE_BYTES) for _ in range(records)], pa.binary()),
            "timestamp": pa.array([1_700_000_000_000 + i for i in range(records)], pa.int64()),
        }
        if headers:
            columns["headers"] = pa.array(
                [[{"key": f"h{j}", "value": b"header"} for j in range(headers)]] * records
            )
        out.append(
            encode_batch(
                pa.RecordBatch.from_pydict(columns),
                base_offset=number * records,
                leader_epoch=3,
                producer_id=42,
                producer_epoch=0,
                base_sequence=number * records,
            )
        )
    return b"".join(out)


def rate(convert: Callable[[], object], records: int, seconds: float) -> float:
    """Records per second of `convert` (which converts `records` records), best of runs."""
    convert()
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        convert()
        best = min(best, time.perf_counter() - start)
    return records / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=positive_int, default=20)
    parser.add_argument("--records", type=positive_int, default=1000, help="per batch")
    parser.add_argument("--seconds", type=float, default=3.0, help="per direction")
    parser.add_argument("--store-codec", choices=("none", "lz4", "zstd"), default="none")
    parser.add_argument("--headers", type=int, default=0, help="headers per record")
    args = parser.parse_args()
    stored = stored_batches(args.batches, args.records, args.headers)
    kafka = replog_to_kafka(stored)
    total = args.batches * args.records
    emit(
        {
            "bench": "kafka_convert",
            "records": total,
            "records_per_batch": args.records,
            "key_bytes": KEY_BYTES,
            "value_bytes": VALUE_BYTES,
            "headers_per_record": args.headers,
            "store_codec": args.store_codec,
            "kafka_to_replog_records_per_s": round(
                rate(lambda: kafka_to_replog(kafka, args.store_codec), total, args.seconds)
            ),
            "replog_to_kafka_records_per_s": round(
                rate(lambda: replog_to_kafka(stored), total, args.seconds)
            ),
        }
    )


if __name__ == "__main__":
    main()
