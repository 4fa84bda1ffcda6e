"""Spark write throughput of `format("replog")` against Parquet's; prints one JSON line.

Starts an embedded ZooKeeper and ``--brokers`` brokers (``_cluster.local_cluster``), creates a
topic of ``--partitions`` partitions (replication factor 1), starts a local[2] SparkSession,
and stops all of it at the end (the Spark JVM included).

The input is a DataFrame of ``--rows`` rows with one binary ``value`` column of
``--value-bytes`` bytes (the row number, zero-padded), built with ``spark.range`` in
``--tasks`` partitions and cached and counted before anything is timed, so that every
figure starts from rows in Spark's memory.

What is timed:

* ``rows_per_s``: ``df.write.format("replog").option("topic", ...).mode("append").save()``
  with the sink's defaults (acks=all, idempotent producer per task; keyless records spread
  over the partitions), from the call until it returns, when every batch is acknowledged.
  The topic must then hold every record written.
* ``parquet_rows_per_s``: ``df.write.parquet`` of the same cached frame, uncompressed,
  into a temporary directory (removed after each round): what a user who only needs the
  rows stored would reach for. ``parquet_ratio`` = ``rows_per_s / parquet_rows_per_s``
  (the issue's goal is 1.0 or more).
* ``ceiling_rows_per_s``: the same write into ``bench_count`` (``_spark.py``), a
  DataSourceArrowWriter that only counts the Arrow batches Spark hands it. It is what
  Spark's Python data source write path costs with no sink behind it (JVM rows to Arrow,
  Arrow IPC to the Python workers): the upper bound for any Python sink on this machine.
  ``ratio`` = ``rows_per_s / ceiling_rows_per_s``.
* ``fixed_seconds`` / ``ceiling_fixed_seconds``: the same writes of the 20,000-row warm-up
  frame, once warm: what every write job costs whatever it writes (planning, creating the
  writer in a Python worker, starting the tasks, the commit). ``marginal_rows_per_s`` /
  ``ceiling_marginal_rows_per_s`` leave it out (rows / (seconds - fixed seconds)).
* ``sink_alone_rows_per_s``: the sink's task code (``writer_task.write_task``) run in this
  process without Spark, over the same rows in Arrow batches of Spark's default size
  (10,000 rows), into a second topic: how fast the connector routes, batches, encodes and
  sends on one core when nothing else competes for it.
* ``cpu_s_per_write`` / ``ceiling_cpu_s_per_write`` / ``parquet_cpu_s_per_write``: CPU
  seconds the whole machine was busy during one write of each kind (mean over the
  rounds). On 2 cores a write cannot take less wall time than half of it. On a shared
  machine other work lands in these too; the per-process figures do not:
  ``jvm_cpu_s_per_write`` (Spark's JVM: reading the cache, rows to Arrow),
  ``python_cpu_s_per_write`` (the Python workers: reading the Arrow input and the sink's
  own work) and ``broker_cpu_s_per_write`` (the broker: receiving, appending to the page
  cache), with the JVM's and the workers' share of the counting write and the JVM's of
  the Parquet write (Parquet runs no Python). A replog write reaches Parquet's speed only
  if these add up to no more than Parquet's JVM time.

Spark's start and the first write of each kind are paid by a warm-up of a few thousand
rows before anything is timed. Then ``--repeat`` rounds run the Parquet write, the counting
write and the replog write once each (the topic ends with ``--repeat`` x ``--rows``
records); the best of each kind is reported (the JVM keeps compiling its hot paths over the
first large writes, and other work on a shared machine comes and goes), and every round's
figure is in the ``*_runs`` lists. ``load_avg_before``/``load_avg_after`` are the machine's
1-minute load averages. The machine has 2 cores; Spark runs ``--tasks`` write tasks on
them, next to the broker.

Run from the repository root::

    .venv/bin/python benchmarks/spark_write.py
    .venv/bin/python benchmarks/spark_write.py --rows 1000000 --partitions 4
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from _cluster import local_cluster
from _common import check_rows, emit, machine_cpu_seconds, positive_int, process_cpu_seconds
from _spark import (
    CLUSTER_TIMEOUT_S,
    COUNT_FORMAT,
    load_average,
    marginal_rows_per_s,
    read_count_file,
    spark_cpu_seconds,
    spark_run,
    stored_records,
    temp_dir,
    with_cluster,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BinaryType, StructField, StructType

from connectors.spark.sink_options import parse_sink_options
from connectors.spark.writer_task import write_task
from spark_replica.client import Admin, Cluster

TOPIC = "bench"
ALONE_TOPIC = "bench-alone"
WARMUP_TOPIC = "warmup"
WARMUP_ROWS = 20_000
SPARK_ARROW_BATCH_ROWS = 10_000  # spark.sql.execution.arrow.maxRecordsPerBatch's default

CLIENT_ID = "replog-bench-spark-write"


def create_topics(bootstrap: list[tuple[str, int]], partitions: int) -> None:
    async def create(cluster: Cluster) -> None:
        admin = Admin(cluster)
        for topic in (TOPIC, ALONE_TOPIC, WARMUP_TOPIC):
            await admin.create_topic(topic, partitions, 1)

    with_cluster(bootstrap, create, CLIENT_ID, CLUSTER_TIMEOUT_S)


def input_frame(spark: SparkSession, rows: int, value_bytes: int, tasks: int) -> DataFrame:
    """``rows`` rows of one ``value_bytes``-byte binary column, cached and materialised."""
    frame = spark.range(0, rows, 1, tasks).selectExpr(
        f"cast(lpad(cast(id as string), {value_bytes}, '0') as binary) as value"
    )
    frame = frame.cache()
    frame.count()
    return frame


def write_replog(frame: DataFrame, servers: str, topic: str) -> float:
    """Seconds for ``df.write.format("replog")`` of ``frame`` into ``topic``."""
    started = time.perf_counter()
    (
        frame.write.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    return time.perf_counter() - started


def write_parquet(frame: DataFrame, path: Path) -> float:
    """Seconds for ``df.write.parquet`` of ``frame``, uncompressed; the files are removed."""
    started = time.perf_counter()
    frame.write.option("compression", "none").mode("overwrite").parquet(str(path))
    seconds = time.perf_counter() - started
    shutil.rmtree(path)
    return seconds


def write_count(frame: DataFrame, result: Path) -> tuple[float, int]:
    """Seconds for writing ``frame`` into the counting writer, and the rows it counted."""
    started = time.perf_counter()
    frame.write.format(COUNT_FORMAT).option("resultPath", str(result)).mode("append").save()
    seconds = time.perf_counter() - started
    return seconds, read_count_file(result)


def sink_alone(servers: str, rows: int, value_bytes: int) -> float:
    """Seconds for the sink's task code to write ``rows`` rows, in this process.

    The Arrow batches are built before the clock starts, with the values Spark's
    DataFrame holds.
    """
    options = {"replog.bootstrap.servers": servers, "topic": ALONE_TOPIC}
    sink = parse_sink_options(options, StructType([StructField("value", BinaryType())]))
    batches = []
    for first in range(0, rows, SPARK_ARROW_BATCH_ROWS):
        count = min(SPARK_ARROW_BATCH_ROWS, rows - first)
        values = [str(n).zfill(value_bytes).encode() for n in range(first, first + count)]
        batches.append(pa.record_batch([pa.array(values, pa.binary())], names=["value"]))

    def chunks() -> Iterator[pa.RecordBatch]:
        yield from batches

    started = time.perf_counter()
    write_task(chunks(), sink, None, 0)
    return time.perf_counter() - started


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=positive_int, default=5_000_000, help="rows (5,000,000)")
    parser.add_argument("--value-bytes", type=positive_int, default=100, help="value size (100)")
    parser.add_argument("--partitions", type=positive_int, default=2, help="topic partitions (2)")
    parser.add_argument("--brokers", type=positive_int, default=1, help="brokers (1)")
    parser.add_argument(
        "--tasks", type=positive_int, default=2, help="DataFrame partitions = write tasks (2)"
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        default=3,
        help="timed rounds; the best of each kind is reported (3)",
    )
    parser.add_argument(
        "--alone",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the sink's task code without Spark (on)",
    )
    return parser.parse_args(argv)


KINDS = ("write", "ceiling", "parquet")


@dataclass
class TimedRuns:
    """Seconds of every timed write of each kind, and the CPU seconds each kind took:
    the machine's, and the JVM's, the Python workers' and the broker's."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    cpu: dict[str, dict[str, float]] = field(
        default_factory=lambda: {
            k: dict.fromkeys(("machine", "jvm", "python", "broker"), 0.0) for k in KINDS
        }
    )

    def per_write(self, kind: str, part: str) -> float:
        return round(self.cpu[kind][part] / len(self.seconds[kind]), 2)


def _cpu_now(broker_pid: int) -> dict[str, float]:
    jvm, python = spark_cpu_seconds()
    return {
        "machine": machine_cpu_seconds(),
        "jvm": jvm,
        "python": python,
        "broker": sum(process_cpu_seconds(broker_pid)),
    }


def timed_runs(
    spark: SparkSession, servers: str, args: argparse.Namespace, results: Path, broker_pid: int
) -> TimedRuns:
    """``--repeat`` rounds of Parquet, the ceiling, then replog, so that drifting load and
    the JVM's warming up hit all alike; with the CPU time each kind took."""
    frame = input_frame(spark, args.rows, args.value_bytes, args.tasks)
    runs = TimedRuns()
    try:
        for round_ in range(args.repeat):
            for kind in KINDS:
                before = _cpu_now(broker_pid)
                if kind == "ceiling":
                    seconds, counted = write_count(frame, results / f"count-{round_}.json")
                    check_rows("the counting writer", counted, args.rows)
                elif kind == "parquet":
                    seconds = write_parquet(frame, results / "parquet")
                else:
                    seconds = write_replog(frame, servers, TOPIC)
                after = _cpu_now(broker_pid)
                runs.seconds[kind].append(seconds)
                for part, value in after.items():
                    runs.cpu[kind][part] += value - before[part]
    finally:
        frame.unpersist()
    return runs


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    load_before = load_average()
    with local_cluster(args.brokers) as cluster:
        servers = ",".join(f"{host}:{port}" for host, port in cluster.bootstrap)
        create_topics(cluster.bootstrap, args.partitions)
        with spark_run("replog-bench-spark-write") as spark, temp_dir("replog-spark-") as tmp:
            warmup = input_frame(spark, WARMUP_ROWS, args.value_bytes, args.tasks)
            write_count(warmup, tmp / "warmup-count.json")
            write_parquet(warmup, tmp / "warmup-parquet")
            write_replog(warmup, servers, WARMUP_TOPIC)
            # Warm now, the same small writes again show the fixed cost of a write job.
            ceiling_fixed, _ = write_count(warmup, tmp / "fixed-count.json")
            fixed = write_replog(warmup, servers, WARMUP_TOPIC)
            warmup.unpersist()
            runs = timed_runs(spark, servers, args, tmp, cluster.broker_pid)
        written = stored_records(cluster.bootstrap, TOPIC, args.partitions, CLIENT_ID)
        check_rows("the topic", written, args.rows * args.repeat)
        alone_s = sink_alone(servers, args.rows, args.value_bytes) if args.alone else None
        if alone_s is not None:
            alone_written = stored_records(
                cluster.bootstrap, ALONE_TOPIC, args.partitions, CLIENT_ID
            )
            check_rows("the alone topic", alone_written, args.rows)
    rates = {
        kind: [args.rows / seconds for seconds in times] for kind, times in runs.seconds.items()
    }
    best = {kind: max(values) for kind, values in rates.items()}
    emit(
        {
            "bench": "spark_write",
            "rows": args.rows,
            "value_bytes": args.value_bytes,
            "partitions": args.partitions,
            "brokers": args.brokers,
            "tasks": args.tasks,
            "acks": "all",
            "repeat": args.repeat,
            "seconds": round(args.rows / best["write"], 3),
            "rows_per_s": round(best["write"]),
            "ceiling_seconds": round(args.rows / best["ceiling"], 3),
            "ceiling_rows_per_s": round(best["ceiling"]),
            "ratio": round(best["write"] / best["ceiling"], 3),
            "parquet_seconds": round(args.rows / best["parquet"], 3),
            "parquet_rows_per_s": round(best["parquet"]),
            "parquet_ratio": round(best["write"] / best["parquet"], 3),
            "fixed_seconds": round(fixed, 3),
            "ceiling_fixed_seconds": round(ceiling_fixed, 3),
            "marginal_rows_per_s": marginal_rows_per_s(args.rows, args.rows / best["write"], fixed),
            "ceiling_marginal_rows_per_s": marginal_rows_per_s(
                args.rows, args.rows / best["ceiling"], ceiling_fixed
            ),
            "rows_per_s_runs": [round(r) for r in rates["write"]],
            "ceiling_rows_per_s_runs": [round(r) for r in rates["ceiling"]],
            "parquet_rows_per_s_runs": [round(r) for r in rates["parquet"]],
            "sink_alone_rows_per_s": None if alone_s is None else round(args.rows / alone_s),
            "cpu_s_per_write": runs.per_write("write", "machine"),
            "ceiling_cpu_s_per_write": runs.per_write("ceiling", "machine"),
            "parquet_cpu_s_per_write": runs.per_write("parquet", "machine"),
            "jvm_cpu_s_per_write": runs.per_write("write", "jvm"),
            "python_cpu_s_per_write": runs.per_write("write", "python"),
            "broker_cpu_s_per_write": runs.per_write("write", "broker"),
            "ceiling_jvm_cpu_s_per_write": runs.per_write("ceiling", "jvm"),
            "ceiling_python_cpu_s_per_write": runs.per_write("ceiling", "python"),
            "parquet_jvm_cpu_s_per_write": runs.per_write("parquet", "jvm"),
            "load_avg_before": load_before,
            "load_avg_after": load_average(),
        }
    )


if __name__ == "__main__":
    main()
