"""Spark read throughput of `format("replog")` against its ceiling; prints one JSON line.

Starts an embedded ZooKeeper and ``--brokers`` brokers (``_cluster.local_cluster``), fills a
topic of ``--partitions`` partitions (replication factor 1) with ``--rows`` records of
``--value-bytes`` random bytes, starts a local[2] SparkSession, and stops all of it at the
end (the Spark JVM included).

What is timed:

* ``rows_per_s``: ``spark.readStream.format("replog")`` with ``startingOffsets=earliest``
  into the ``noop`` sink with Trigger.AvailableNow, from ``start()`` until the query ends
  (planning, the checkpoint and every task included). The query must report ``--rows``
  input rows.
* ``ceiling_rows_per_s``: the same query shape from ``bench_memory`` (``_spark.py``), a
  Python stream reader that yields Arrow batches of the same schema, the same number of
  partitions and the same batch sizes as the replog reader yields, built in memory before
  the clock matters. It is what Spark's Python data source path costs with no source
  behind it: the upper bound for any Python source on this machine.
* ``ratio`` = ``rows_per_s / ceiling_rows_per_s``: the share of that bound the connector
  reaches (the issue's goal is 0.9 or more, for this and ``batch_ratio``).
* ``fixed_seconds`` / ``ceiling_fixed_seconds``: the same stream queries over a topic of
  1,000 records per partition and the memory equivalent, the cost every AvailableNow query
  pays whatever it reads; ``marginal_rows_per_s`` / ``ceiling_marginal_rows_per_s`` are the
  rates without it (rows / (seconds - fixed seconds)): what each path sustains once running.
* ``batch_rows_per_s`` / ``batch_ceiling_rows_per_s`` / ``batch_ratio``: the same for
  ``spark.read.format("replog")`` and the memory source's batch reader, into ``noop``.
* ``reader_alone_rows_per_s``: the connector's partition reader (``read_range``) run in
  this process, without Spark, one partition after the other: how fast the connector
  fetches and builds Spark's rows on one core. It also yields the batch sizes that the
  ceiling then reproduces (``yielded_batches``, ``mean_batch_rows``).
* ``<kind>_jvm_cpu_s`` / ``<kind>_python_cpu_s`` / ``<kind>_broker_cpu_s`` for the kinds
  ``stream``, ``ceiling``, ``batch`` and ``batch_ceiling``: CPU seconds per query of Spark's
  JVM, its Python workers and the broker (mean over the rounds). On a shared machine the
  rates move with other work; these say what each query costs and where.
* ``fill_rows_per_s``: filling the topic with pre-encoded batches (untimed for the ratios).

Spark's start and the first query of each kind are paid by a warm-up on a small topic and a
small memory stream before anything is timed. Then ``--repeat`` rounds run each timed query
once, every replog query right after its ceiling; the best of each kind is reported (the
JVM keeps compiling its hot paths over the first large queries, and other work on a shared
machine comes and goes), and every round's figure is in the ``*_runs`` lists.
``load_avg_before``/``load_avg_after`` are the machine's 1-minute load averages. The
machine has 2 cores; Spark runs two tasks (one per partition) on them, next to the broker.

Run from the repository root::

    .venv/bin/python benchmarks/spark_read.py
    .venv/bin/python benchmarks/spark_read.py --rows 1000000 --partitions 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

from _cluster import local_cluster
from _common import check_rows, emit, positive_int, process_cpu_seconds
from _spark import (
    MEMORY_FORMAT,
    load_average,
    marginal_rows_per_s,
    spark_cpu_seconds,
    spark_run,
    temp_dir,
    timed_available_now,
    timed_batch_noop,
)
from produce import MAX_BATCH_BYTES, build_batches, send_all
from pyspark.sql import DataFrame, SparkSession

from connectors.spark.partition_reader import RangePartition, read_range
from spark_replica.client import Admin, Cluster, Consumer, Producer, ProducerConfig
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP
from spark_replica.wire.native.produce import ACKS_LEADER

TOPIC = "bench"  # produce.send_all writes to this topic
WARMUP_TOPIC = "warmup"
WARMUP_ROWS = 100_000
TINY_TOPIC = "tiny"
TINY_ROWS = 1_000  # per partition
FILL_TIMEOUT_S = 300.0
POLL_TIMEOUT_MS = 120_000


async def _fill(
    bootstrap: list[tuple[str, int]], partitions: int, batches: list[bytes], in_flight: int
) -> tuple[float, list[int]]:
    """Create the topics and send the batches; return (seconds, each partition's HW)."""
    warmup, _ = build_batches(WARMUP_ROWS, 100, 10_000)
    cluster = Cluster(bootstrap, client_id="replog-bench-spark-read")
    try:
        admin = Admin(cluster)
        await admin.create_topic(TOPIC, partitions, 1)
        await admin.create_topic(WARMUP_TOPIC, 1, 1)
        await admin.create_topic(TINY_TOPIC, partitions, 1)
        producer = Producer(cluster, ProducerConfig(acks=ACKS_LEADER))
        for batch in warmup:
            await producer.send_batch(WARMUP_TOPIC, 0, batch)
        tiny, _ = build_batches(TINY_ROWS * partitions, 100, TINY_ROWS)
        for partition, batch in enumerate(tiny):
            await producer.send_batch(TINY_TOPIC, partition, batch)
        started = time.perf_counter()
        await send_all(producer, batches, partitions, in_flight)
        seconds = time.perf_counter() - started
        await producer.close()
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        ends = await Consumer(cluster).list_offsets(tps, LATEST_TIMESTAMP)
        return seconds, [ends[tp][0] for tp in tps]
    finally:
        await cluster.close()


def reader_alone(servers: str, ends: list[int]) -> tuple[float, list[list[int]]]:
    """Read every partition with the connector's partition reader, in this process.

    Returns the seconds it took and, per partition, the row count of each batch it
    yielded: the sizes the memory source reproduces.
    """
    sizes: list[list[int]] = []
    started = time.perf_counter()
    for partition, end in enumerate(ends):
        part = RangePartition(TOPIC, partition, 0, end, servers, False, True, POLL_TIMEOUT_MS)
        sizes.append([batch.num_rows for batch in read_range(part)])
    return time.perf_counter() - started, sizes


def replog_frame(spark: SparkSession, servers: str, topic: str, stream: bool) -> DataFrame:
    reader = spark.readStream if stream else spark.read
    return (
        reader.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def memory_frame(
    spark: SparkSession, sizes: list[list[int]], value_bytes: int, stream: bool
) -> DataFrame:
    reader = spark.readStream if stream else spark.read
    return (
        reader.format(MEMORY_FORMAT)
        .option("sizes", json.dumps(sizes))
        .option("valueBytes", str(value_bytes))
        .load()
    )


def warm_up(spark: SparkSession, servers: str, checkpoints: Path) -> None:
    """One small query of every kind timed later, so no figure pays a first-use cost
    (JVM class loading, Python workers, the data source lookup)."""
    small = [[50_000] * 10, [50_000] * 10]
    timed_available_now(memory_frame(spark, small, 100, True), checkpoints / "warm-memory")
    timed_available_now(
        replog_frame(spark, servers, WARMUP_TOPIC, True), checkpoints / "warm-replog"
    )
    timed_batch_noop(memory_frame(spark, small, 100, False))
    timed_batch_noop(replog_frame(spark, servers, WARMUP_TOPIC, False))


def fixed_costs(
    spark: SparkSession, servers: str, partitions: int, checkpoints: Path
) -> tuple[float, float]:
    """Seconds of a stream query with almost nothing to read: (replog, memory), the best
    of two each.

    An AvailableNow query pays a fixed cost whatever it reads (starting, planning through
    the Python source runner, the checkpoint, a last trigger that finds nothing); over
    5,000,000 rows it is a good part of the time, so the marginal rates leave it out.
    """
    replog: list[float] = []
    memory: list[float] = []
    tiny = [[TINY_ROWS]] * partitions
    for round_ in range(2):
        seconds, _ = timed_available_now(
            replog_frame(spark, servers, TINY_TOPIC, True), checkpoints / f"tiny-replog-{round_}"
        )
        replog.append(seconds)
        seconds, _ = timed_available_now(
            memory_frame(spark, tiny, 100, True), checkpoints / f"tiny-memory-{round_}"
        )
        memory.append(seconds)
    return min(replog), min(memory)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=positive_int, default=5_000_000, help="rows (5,000,000)")
    parser.add_argument("--value-bytes", type=positive_int, default=100, help="value size (100)")
    parser.add_argument("--partitions", type=positive_int, default=2, help="partitions (2)")
    parser.add_argument("--brokers", type=positive_int, default=1, help="brokers (1)")
    parser.add_argument(
        "--batch-records", type=positive_int, default=10_000, help="records per stored batch"
    )
    parser.add_argument(
        "--in-flight", type=positive_int, default=8, help="produce requests at once (8)"
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        default=3,
        help="timed rounds; the best of each kind is reported (3)",
    )
    args = parser.parse_args(argv)
    if args.batch_records * (args.value_bytes + 17) + 65536 > MAX_BATCH_BYTES:
        parser.error(f"--batch-records {args.batch_records} exceeds the broker's batch limit")
    return args


KINDS = ("stream", "ceiling", "batch", "batch_ceiling")
CPU_PARTS = ("jvm", "python", "broker")


def _cpu_now(broker_pid: int) -> dict[str, float]:
    jvm, python = spark_cpu_seconds()
    return {"jvm": jvm, "python": python, "broker": sum(process_cpu_seconds(broker_pid))}


def timed_runs(
    spark: SparkSession,
    servers: str,
    sizes: list[list[int]],
    args: argparse.Namespace,
    checkpoints: Path,
    broker_pid: int,
) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:
    """Seconds of every timed query, ``--repeat`` rounds, each kind alternating with its
    ceiling so that drifting load and the JVM's warming up hit both alike; and the CPU
    seconds per query of each kind spent by Spark's JVM, its Python workers and the broker
    (on a shared machine, where the time went)."""
    runs: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpu = {kind: dict.fromkeys(CPU_PARTS, 0.0) for kind in KINDS}

    def timed(kind: str, query: Callable[..., float], *query_args: object) -> None:
        before = _cpu_now(broker_pid)
        runs[kind].append(query(*query_args))
        for part, value in _cpu_now(broker_pid).items():
            cpu[kind][part] += (value - before[part]) / args.repeat

    def stream(frame: DataFrame, checkpoint: Path, what: str) -> float:
        seconds, rows = timed_available_now(frame, checkpoint)
        check_rows(what, rows, args.rows)
        return seconds

    for round_ in range(args.repeat):
        memory = memory_frame(spark, sizes, args.value_bytes, True)
        timed("ceiling", stream, memory, checkpoints / f"memory-{round_}", "the memory stream")
        replog = replog_frame(spark, servers, TOPIC, True)
        timed("stream", stream, replog, checkpoints / f"replog-{round_}", "the replog stream")
        timed(
            "batch_ceiling", timed_batch_noop, memory_frame(spark, sizes, args.value_bytes, False)
        )
        timed("batch", timed_batch_noop, replog_frame(spark, servers, TOPIC, False))
    return runs, cpu


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    load_before = load_average()
    batches, _ = build_batches(args.rows, args.value_bytes, args.batch_records)
    with local_cluster(args.brokers) as cluster:
        servers = ",".join(f"{host}:{port}" for host, port in cluster.bootstrap)
        fill_s, ends = asyncio.run(
            asyncio.wait_for(
                _fill(cluster.bootstrap, args.partitions, batches, args.in_flight),
                FILL_TIMEOUT_S,
            )
        )
        del batches
        check_rows("the fill", sum(ends), args.rows)
        alone_s, sizes = reader_alone(servers, ends)
        check_rows("the partition reader", sum(map(sum, sizes)), args.rows)
        with spark_run("replog-bench-spark-read") as spark, temp_dir("replog-spark-") as tmp:
            warm_up(spark, servers, tmp)
            fixed, ceiling_fixed = fixed_costs(spark, servers, args.partitions, tmp)
            runs, cpu = timed_runs(spark, servers, sizes, args, tmp, cluster.broker_pid)
    rates = {kind: [args.rows / seconds for seconds in times] for kind, times in runs.items()}
    best = {kind: max(values) for kind, values in rates.items()}
    yielded = sum(len(s) for s in sizes)
    emit(
        {
            "bench": "spark_read",
            "rows": args.rows,
            "value_bytes": args.value_bytes,
            "partitions": args.partitions,
            "brokers": args.brokers,
            "repeat": args.repeat,
            "seconds": round(args.rows / best["stream"], 3),
            "rows_per_s": round(best["stream"]),
            "ceiling_seconds": round(args.rows / best["ceiling"], 3),
            "ceiling_rows_per_s": round(best["ceiling"]),
            "ratio": round(best["stream"] / best["ceiling"], 3),
            "fixed_seconds": round(fixed, 3),
            "ceiling_fixed_seconds": round(ceiling_fixed, 3),
            "marginal_rows_per_s": marginal_rows_per_s(
                args.rows, args.rows / best["stream"], fixed
            ),
            "ceiling_marginal_rows_per_s": marginal_rows_per_s(
                args.rows, args.rows / best["ceiling"], ceiling_fixed
            ),
            "batch_seconds": round(args.rows / best["batch"], 3),
            "batch_rows_per_s": round(best["batch"]),
            "batch_ceiling_rows_per_s": round(best["batch_ceiling"]),
            "batch_ratio": round(best["batch"] / best["batch_ceiling"], 3),
            "rows_per_s_runs": [round(r) for r in rates["stream"]],
            "ceiling_rows_per_s_runs": [round(r) for r in rates["ceiling"]],
            "batch_rows_per_s_runs": [round(r) for r in rates["batch"]],
            "batch_ceiling_rows_per_s_runs": [round(r) for r in rates["batch_ceiling"]],
            "reader_alone_rows_per_s": round(args.rows / alone_s),
            "yielded_batches": yielded,
            "mean_batch_rows": round(args.rows / yielded),
            "stored_batch_records": args.batch_records,
            "fill_rows_per_s": round(args.rows / fill_s),
            **{
                f"{kind}_{part}_cpu_s": round(cpu[kind][part], 2)
                for kind in KINDS
                for part in CPU_PARTS
            },
            "load_avg_before": load_before,
            "load_avg_after": load_average(),
        }
    )


if __name__ == "__main__":
    main()
