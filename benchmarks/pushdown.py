"""Filter pushdown: reading the tail of a large topic costs about what a small topic does.

Starts an embedded ZooKeeper and one broker (``_cluster.local_cluster``), fills a topic of
``--partitions`` partitions with ``--rows`` records (pre-encoded batches sent with
``Producer.send_batch``, a few distinct batches sent over and over) and a one-partition
topic with ``--tail`` records, starts a local[2] SparkSession with
``spark.sql.python.filterPushdown.enabled=true``, and stops all of it at the end.

What is timed, each query written to the ``noop`` sink (every row read, nothing kept):

* ``tail_seconds``: ``spark.read.format("replog")`` of the large topic with
  ``filterPushdown=true`` and ``where("partition = 0 AND offset >= HW - tail")``: the last
  ``--tail`` records of partition 0. With pushdown the driver plans that one range only
  (``tail_planned_partitions``).
* ``small_seconds``: the same read of the whole ``--tail``-record topic, no filter.
* ``ratio`` = ``tail_seconds / small_seconds``; the issue's goal is below 2.
* ``without_pushdown_seconds``: the tail query once without the ``filterPushdown`` option,
  as Spark's Kafka source runs it: every record of the topic is read and Spark drops all
  but the tail. ``speedup`` is it divided by ``tail_seconds``.

A warm-up runs each query once first (Spark's first queries pay class loading and Python
workers). Then ``--repeat`` rounds run the tail and the small query alternately; the
medians are reported and every round is in the ``*_runs`` lists. ``load_avg_before`` and
``load_avg_after`` are the machine's 1-minute load averages.

Run from the repository root::

    .venv/bin/python benchmarks/pushdown.py
    .venv/bin/python benchmarks/pushdown.py --rows 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from _cluster import local_cluster
from _common import check_rows, emit, positive_int
from _spark import load_average, spark_run, timed_batch_noop
from produce import MAX_BATCH_BYTES, TOPIC, build_batches, send_all
from pyspark.sql import DataFrame, SparkSession

from spark_replica.client import (
    LATEST,
    Admin,
    Cluster,
    Producer,
    ProducerConfig,
    list_offsets,
    parse_acks,
)
from spark_replica.topics import TopicPartition

SMALL_TOPIC = "small"
PUSHDOWN_SETTING = "spark.sql.python.filterPushdown.enabled"
# The large topic is filled by sending these many distinct batches round and round.
DISTINCT_BATCHES = 8
FILL_TIMEOUT_S = 600.0
OFFSETS_WAIT_S = 30.0


async def _fill(
    bootstrap: list[tuple[str, int]], args: argparse.Namespace
) -> tuple[float, int, int]:
    """Create and fill both topics; return (fill seconds, partition 0's HW, records stored)."""
    distinct, _ = build_batches(
        DISTINCT_BATCHES * args.batch_records, args.value_bytes, args.batch_records
    )
    full, rest = divmod(args.rows, args.batch_records)
    batches = [distinct[i % DISTINCT_BATCHES] for i in range(full)]
    if rest:
        batches += build_batches(rest, args.value_bytes, rest)[0]
    small, _ = build_batches(args.tail, args.value_bytes, args.tail)
    cluster = Cluster(bootstrap, client_id="replog-bench-pushdown")
    try:
        admin = Admin(cluster)
        await admin.create_topic(TOPIC, args.partitions, 1)
        await admin.create_topic(SMALL_TOPIC, 1, 1)
        producer = Producer(cluster, ProducerConfig(acks=parse_acks("1")))
        for batch in small:
            await producer.send_batch(SMALL_TOPIC, 0, batch)
        started = time.perf_counter()
        await send_all(producer, batches, args.partitions, args.in_flight)
        seconds = time.perf_counter() - started
        await producer.close()
        tps = [TopicPartition(TOPIC, p) for p in range(args.partitions)]
        ends = await list_offsets(cluster, tps, LATEST, wait_s=OFFSETS_WAIT_S)
        return seconds, ends[tps[0]][0], sum(offset for offset, _ in ends.values())
    finally:
        await cluster.close()


def frame(spark: SparkSession, servers: str, topic: str, *, pushdown: bool) -> DataFrame:
    return (
        spark.read.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("filterPushdown", str(pushdown).lower())
        .load()
    )


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=positive_int, default=10_000_000, help="large topic's rows (10,000,000)"
    )
    parser.add_argument(
        "--tail", type=positive_int, default=1_000, help="rows read; the small topic's (1,000)"
    )
    parser.add_argument("--partitions", type=positive_int, default=2, help="partitions (2)")
    parser.add_argument("--value-bytes", type=positive_int, default=100, help="value size (100)")
    parser.add_argument(
        "--batch-records", type=positive_int, default=10_000, help="records per stored batch"
    )
    parser.add_argument(
        "--in-flight", type=positive_int, default=8, help="produce requests at once (8)"
    )
    parser.add_argument(
        "--repeat", type=positive_int, default=5, help="timed rounds; medians reported (5)"
    )
    args = parser.parse_args(argv)
    for records in (args.batch_records, args.tail):
        if records * (args.value_bytes + 17) + 65536 > MAX_BATCH_BYTES:
            parser.error(f"a batch of {records} records exceeds the broker's batch limit")
    if args.tail * args.partitions > args.rows:
        parser.error("--tail is more than a partition of the large topic holds")
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    load_before = load_average()
    with local_cluster(1) as cluster:
        servers = ",".join(f"{host}:{port}" for host, port in cluster.bootstrap)
        fill_s, first_end, stored = asyncio.run(
            asyncio.wait_for(_fill(cluster.bootstrap, args), FILL_TIMEOUT_S)
        )
        check_rows("the fill", stored, args.rows)
        tail_filter = f"partition = 0 AND offset >= {first_end - args.tail}"
        with spark_run("replog-bench-pushdown") as spark:
            spark.conf.set(PUSHDOWN_SETTING, "true")

            def tail() -> DataFrame:
                return frame(spark, servers, TOPIC, pushdown=True).where(tail_filter)

            def small() -> DataFrame:
                return frame(spark, servers, SMALL_TOPIC, pushdown=True)

            check_rows("the tail query", tail().count(), args.tail)
            check_rows("the small query", small().count(), args.tail)
            planned = tail().rdd.getNumPartitions()
            runs: dict[str, list[float]] = {"tail": [], "small": []}
            for _ in range(args.repeat):
                runs["tail"].append(timed_batch_noop(tail()))
                runs["small"].append(timed_batch_noop(small()))
            unpushed = frame(spark, servers, TOPIC, pushdown=False).where(tail_filter)
            without_s = timed_batch_noop(unpushed)
    tail_s, small_s = statistics.median(runs["tail"]), statistics.median(runs["small"])
    emit(
        {
            "bench": "pushdown",
            "rows": args.rows,
            "partitions": args.partitions,
            "tail": args.tail,
            "value_bytes": args.value_bytes,
            "repeat": args.repeat,
            "tail_seconds": round(tail_s, 3),
            "small_seconds": round(small_s, 3),
            "ratio": round(tail_s / small_s, 3),
            "tail_planned_partitions": planned,
            "without_pushdown_seconds": round(without_s, 3),
            "speedup": round(without_s / tail_s, 1),
            "tail_seconds_runs": [round(s, 3) for s in runs["tail"]],
            "small_seconds_runs": [round(s, 3) for s in runs["small"]],
            "fill_rows_per_s": round(args.rows / fill_s),
            "load_avg_before": load_before,
            "load_avg_after": load_average(),
        }
    )


if __name__ == "__main__":
    main()
