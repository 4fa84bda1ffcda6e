"""Consume throughput from one broker on loopback, as Arrow batches or per record; one JSON line.

Starts an embedded ZooKeeper and one broker (``_cluster.local_cluster``), creates a topic with
``--partitions`` partitions and replication factor 1, and stops both processes at the end.

First, untimed, it produces the workload exactly as ``produce.py`` does (random values of
``--record-bytes``, ``--batch-records`` per batch, acks=1, ``--in-flight`` requests at once).
Then it times one ``Consumer`` reading every record from offset 0: ``poll`` is called until
all records have come back as ``FetchedRecords`` holding ``pyarrow.RecordBatch`` es (each
batch's CRC checked and its Arrow IPC payload opened zero-copy, as the consumer does by
default). ``fetch_p50_ms``/``fetch_p99_ms`` are percentiles of the time each ``poll`` took,
one Fetch round trip plus decoding.

``--api record`` times the same reading one record at a time instead, as an application
does: ``async for record in consumer`` (a ``ConsumerRecord`` per record, its value's length
summed so every value is touched). ``--api sync`` does the same with ``SyncConsumer``
(``for record in consumer``, the asyncio consumer on a thread of its own). Neither sees the
individual polls, so they print no fetch percentiles.

Units (1 MB = 1e6 bytes): ``mb_per_s`` counts record value bytes only
(records x record_bytes / 1e6 / seconds); ``wire_mb_per_s`` counts the stored batch bytes read
(61-byte batch headers plus Arrow IPC payloads; response framing excluded).
``ratio_to_loopback`` is ``wire_mb_per_s`` over the loopback TCP throughput between two
processes, measured in the same run before ZooKeeper starts.

Run from the repository root::

    .venv/bin/python benchmarks/consume.py --record-bytes 100
    .venv/bin/python benchmarks/consume.py --record-bytes 100 --api record
"""

from __future__ import annotations

import argparse
import asyncio
import time

from _cluster import local_cluster
from _common import MB, emit, measure_limits, percentile
from produce import (
    RUN_TIMEOUT_S,
    TOPIC,
    add_workload_arguments,
    build_batches,
    create_topic,
    finish_arguments,
    send_all,
    wait_until_stored,
)

from spark_replica.client import Cluster, Consumer, Producer, ProducerConfig, SyncConsumer
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_LEADER

CONSUME_TIMEOUT_S = 120.0


async def consume_all(
    cluster: Cluster, partitions: list[TopicPartition], records: int
) -> list[float]:
    """Poll from offset 0 until ``records`` records arrived; return each poll's seconds."""
    consumer = Consumer(cluster)
    consumer.assign(partitions)
    for tp in partitions:
        consumer.seek(tp, 0)
    deadline = time.perf_counter() + CONSUME_TIMEOUT_S
    latencies: list[float] = []
    seen = 0
    while seen < records:
        polled = time.perf_counter()
        fetched = await consumer.poll()
        latencies.append(time.perf_counter() - polled)
        seen += sum(chunk.records.num_rows for chunk in fetched)
        if polled > deadline:
            raise TimeoutError(f"only {seen} of {records} records read in {CONSUME_TIMEOUT_S} s")
    if seen != records:
        raise RuntimeError(f"read {seen} records, {records} were produced")
    return latencies


async def consume_each_record(
    cluster: Cluster, partitions: list[TopicPartition], records: int
) -> tuple[int, int]:
    """``async for`` from offset 0 until ``records`` records arrived; return (records, bytes)."""
    consumer = Consumer(cluster)
    consumer.assign(partitions)
    for tp in partitions:
        consumer.seek(tp, 0)
    seen = value_bytes = 0
    async for record in consumer.records(idle_timeout_s=CONSUME_TIMEOUT_S):
        value_bytes += len(record.value)
        seen += 1
        if seen == records:
            break
    return seen, value_bytes


def consume_each_record_sync(
    bootstrap: list[tuple[str, int]], partitions: list[TopicPartition], records: int
) -> tuple[float, int, int]:
    """As consume_each_record with a SyncConsumer; return (seconds, records, bytes)."""
    with SyncConsumer(bootstrap, client_id="replog-bench-consume") as consumer:
        consumer.assign_topic(TOPIC)  # metadata fetched before the clock starts
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        started = time.perf_counter()
        seen = value_bytes = 0
        for record in consumer.records(idle_timeout_s=CONSUME_TIMEOUT_S):
            value_bytes += len(record.value)
            seen += 1
            if seen == records:
                break
        return time.perf_counter() - started, seen, value_bytes


def check_read(seen: int, value_bytes: int, args: argparse.Namespace) -> None:
    if seen != args.records or value_bytes != args.records * args.record_bytes:
        raise RuntimeError(
            f"read {seen} records ({value_bytes} value bytes) of the {args.records} produced"
        )


async def _run(
    bootstrap: list[tuple[str, int]], args: argparse.Namespace, batches: list[bytes]
) -> tuple[float, list[float]]:
    """Produce ``batches`` (untimed), then time reading them back; return (seconds, polls).

    ``--api sync`` only produces here: its consumer runs outside asyncio, in main().
    """
    cluster = Cluster(bootstrap, client_id="replog-bench-consume")
    try:
        partitions = await create_topic(cluster, args.partitions)
        await send_all(
            Producer(cluster, ProducerConfig(acks=ACKS_LEADER)),
            batches,
            args.partitions,
            args.in_flight,
        )
        await wait_until_stored(cluster, partitions, args.records)
        started = time.perf_counter()
        if args.api == "arrow":
            latencies = await consume_all(cluster, partitions, args.records)
        elif args.api == "record":
            check_read(*await consume_each_record(cluster, partitions, args.records), args)
            latencies = []
        else:
            return 0.0, []
        return time.perf_counter() - started, latencies
    finally:
        await cluster.close()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser)
    parser.add_argument(
        "--api",
        choices=["arrow", "record", "sync"],
        default="arrow",
        help="arrow: poll() batches (default); record: async for per record; sync: SyncConsumer",
    )
    args = parser.parse_args(argv)
    finish_arguments(parser, args)
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    limits = measure_limits(args.limits_seconds)
    batches, _ = build_batches(args.records, args.record_bytes, args.batch_records)
    wire_bytes = sum(len(batch) for batch in batches)
    with local_cluster() as cluster:
        seconds, latencies = asyncio.run(
            asyncio.wait_for(_run(cluster.bootstrap, args, batches), RUN_TIMEOUT_S)
        )
        if args.api == "sync":
            partitions = [TopicPartition(TOPIC, p) for p in range(args.partitions)]
            seconds, seen, value_bytes = consume_each_record_sync(
                cluster.bootstrap, partitions, args.records
            )
            check_read(seen, value_bytes, args)
    wire_mb_per_s = wire_bytes / MB / seconds
    polls: dict[str, object] = {}
    if latencies:
        latencies_ms = sorted(latency * 1000 for latency in latencies)
        polls = {
            "fetches": len(latencies),
            "fetch_p50_ms": round(percentile(latencies_ms, 50), 2),
            "fetch_p99_ms": round(percentile(latencies_ms, 99), 2),
        }
    emit(
        {
            "bench": "consume",
            "api": args.api,
            "rf": 1,
            "record_bytes": args.record_bytes,
            "records": args.records,
            "batch_records": args.batch_records,
            "partitions": args.partitions,
            "seconds": round(seconds, 3),
            "records_per_s": round(args.records / seconds),
            "mb_per_s": round(args.records * args.record_bytes / MB / seconds, 1),
            "wire_mb_per_s": round(wire_mb_per_s, 1),
            **polls,
            "loopback_mb_per_s": limits["loopback_mb_per_s"],
            "ratio_to_loopback": round(wire_mb_per_s / limits["loopback_mb_per_s"], 3),
        }
    )


if __name__ == "__main__":
    main()
