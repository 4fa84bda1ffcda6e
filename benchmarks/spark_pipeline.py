"""End-to-end rate and latency of a replog -> Spark -> replog streaming query; one JSON line.

Starts an embedded ZooKeeper and ``--brokers`` brokers (``_cluster.local_cluster``), creates a
source and a sink topic of ``--partitions`` partitions each (replication factor 1), starts a
local[2] SparkSession, and stops all of it at the end (the Spark JVM included).

The query is the streaming ETL a user writes::

    spark.readStream.format("replog").option("subscribe", SOURCE)
        .option("startingOffsets", "earliest").load()
        .select("key", "value")
        .writeStream.format("replog").option("topic", SINK)
        .option("checkpointLocation", ...).trigger(processingTime=...)

Once its first (empty) micro-batch is done, a producer thread writes ``--rate`` records/s
into the source topic (``--value-bytes`` values, the first 8 bytes a big-endian sequence
number; every few milliseconds the records due so far, as one Arrow batch split over the
partitions, acks=1), for ``--warmup-seconds`` and then ``--seconds``. Each record's
timestamp is its produce time (ms). The sink is given no timestamp column, so it stamps
every record with the time it encodes the record's batch (CreateTime); a record's latency
is its sink timestamp minus its source timestamp, matched by sequence number after the
query is stopped and both topics are read back with the client's Consumer.

Figures, over the records produced after the warm-up only:

* ``rows_per_s``: records out / (last sink timestamp - first source timestamp): equal to
  ``--rate`` when the query keeps up, lower when it falls behind.
* ``p50_ms`` / ``p99_ms`` / ``max_ms``: produce-to-sink latency percentiles.
* ``rows_in`` / ``rows_out``: records in the source and the sink topic (all, warm-up
  included); ``missing`` / ``duplicates``: source records absent from the sink, and sink
  records beyond one per source record (both 0 for an exactly-once sink).

The ceiling runs the same query shape, trigger and rate on ``_spark.py``'s memory
sources: a stream reader whose offsets grow at ``--rate`` rows/s (each row stamped with the
moment it became available) into a DataSourceStreamArrowWriter that only counts rows and
notes when it saw each batch (the query also selects ``timestamp`` for that). Its rows start
flowing, as the producer's do, once the query's first trigger is done. Its
``ceiling_rows_per_s`` and ``ceiling_p50_ms``/``ceiling_p99_ms`` are what Spark's Python
data source path allows at this rate and trigger with no I/O at all.

* ``ratio`` = ``rows_per_s / ceiling_rows_per_s``. Near 1 it only says that both kept up
  with ``--rate``: raise ``--rate`` until ``rows_per_s`` falls below it to find the
  pipeline's capacity.
* ``latency_ratio_p50`` = ``p50_ms / ceiling_p50_ms``.
* ``micro_batches`` and ``batch_ms_p50``: how many micro-batches each query ran and the
  median time of each step of one (Spark's ``durationMs``: ``latestOffset`` plans the
  batch, ``addBatch`` runs its read and write tasks, ``walCommit``/``commitOffsets`` write
  the checkpoint, ``triggerExecution`` is the whole).
* ``load_avg_before``/``load_avg_after``: the machine's 1-minute load averages.

Run from the repository root::

    .venv/bin/python benchmarks/spark_pipeline.py
    .venv/bin/python benchmarks/spark_pipeline.py --rate 50000 --seconds 30 --trigger-ms 0
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from _cluster import local_cluster
from _common import emit, percentile, positive_float, positive_int
from _spark import (
    CLUSTER_TIMEOUT_S,
    COUNT_FORMAT,
    MEMORY_FORMAT,
    load_average,
    read_latencies,
    spark_run,
    stored_records,
    temp_dir,
    with_cluster,
)
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_replica.client import Admin, Cluster, Consumer, Producer, ProducerConfig
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP
from spark_replica.wire.native.produce import ACKS_LEADER

SOURCE_TOPIC = "pipeline-in"
SINK_TOPIC = "pipeline-out"
TICK_S = 0.005
START_TIMEOUT_S = 120.0
DRAIN_TIMEOUT_S = 120.0
SEQ_BYTES = 8

CLIENT_ID = "replog-bench-spark-pipeline"


def create_topics(bootstrap: list[tuple[str, int]], partitions: int) -> None:
    async def create(cluster: Cluster) -> None:
        admin = Admin(cluster)
        for topic in (SOURCE_TOPIC, SINK_TOPIC):
            await admin.create_topic(topic, partitions, 1)

    with_cluster(bootstrap, create, CLIENT_ID, CLUSTER_TIMEOUT_S)


def read_topic(
    bootstrap: list[tuple[str, int]], topic: str, partitions: int
) -> list[tuple[int, int]]:
    """(sequence number, timestamp ms) of every record of ``topic``, read from offset 0."""

    async def read(cluster: Cluster) -> list[tuple[int, int]]:
        consumer = Consumer(cluster)
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.list_offsets(tps, LATEST_TIMESTAMP)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        found: list[tuple[int, int]] = []
        while any(consumer.position(tp) < ends[tp][0] for tp in tps):
            for fetched in await consumer.poll():
                values = fetched.records.column("value").to_pylist()
                stamps = fetched.records.column("timestamp").cast(pa.int64()).to_pylist()
                found.extend(
                    (int.from_bytes(v[:SEQ_BYTES], "big"), ts)
                    for v, ts in zip(values, stamps, strict=True)
                )
        return found

    return with_cluster(bootstrap, read, CLIENT_ID, DRAIN_TIMEOUT_S)


class SteadyProducer(threading.Thread):
    """Writes ``total`` records at ``rate`` records/s into the source topic, on its own loop.

    Every tick it sends the records due by then (sequence numbers continue from the last
    tick), all stamped with the current time, split evenly over the partitions; sends are
    not awaited one by one, so a slow acknowledgement does not slow the rate.
    """

    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        partitions: int,
        rate: float,
        total: int,
        value_bytes: int,
    ) -> None:
        super().__init__(name="replog-bench-producer", daemon=True)
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.rate = rate
        self.total = total
        self.padding = bytes(value_bytes - SEQ_BYTES)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.sent = 0

    def run(self) -> None:
        try:
            with_cluster(self.bootstrap, self._produce, CLIENT_ID)
        except BaseException as exc:
            self.error = exc

    def _records(self, first: int, end: int, now_ms: int) -> pa.RecordBatch:
        values = [seq.to_bytes(SEQ_BYTES, "big") + self.padding for seq in range(first, end)]
        return pa.record_batch(
            [pa.array(values, pa.binary()), pa.array([now_ms] * (end - first), pa.int64())],
            names=["value", "timestamp"],
        )

    async def _produce(self, cluster: Cluster) -> None:
        producer = Producer(cluster, ProducerConfig(acks=ACKS_LEADER))
        pending: set[asyncio.Task[int]] = set()
        started = time.monotonic()
        while self.sent < self.total and not self.stop_event.is_set():
            due = min(self.total, int((time.monotonic() - started) * self.rate))
            if due > self.sent:
                records = self._records(self.sent, due, time.time_ns() // 1_000_000)
                share = -(-records.num_rows // self.partitions)
                for partition in range(self.partitions):
                    piece = records.slice(partition * share, share)
                    if piece.num_rows:
                        task = asyncio.create_task(
                            producer.send_arrow(SOURCE_TOPIC, partition, piece)
                        )
                        pending.add(task)
                        task.add_done_callback(pending.discard)
                self.sent = due
            await asyncio.sleep(TICK_S)
        if pending:
            await asyncio.gather(*pending)
        await producer.close()


def _wait_for_first_batch(query: StreamingQuery) -> None:
    """Wait until the query has finished a micro-batch: its start costs are paid."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while query.lastProgress is None:
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError("the streaming query finished no micro-batch")
        time.sleep(0.1)


def _wait_until(done: Callable[[], bool], query: StreamingQuery, what: str) -> None:
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while not done():
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached in {DRAIN_TIMEOUT_S} s")
        time.sleep(0.2)


def _batches(query: StreamingQuery) -> tuple[int, dict[str, float]]:
    """Micro-batches the query ran (Python sources run none while no data arrives), and
    the median milliseconds of each step of one with rows (Spark's ``durationMs``: e.g.
    ``latestOffset`` plans it, ``addBatch`` runs its tasks, ``walCommit`` and
    ``commitOffsets`` write the checkpoint), over the last ones Spark keeps (100)."""
    progress = query.lastProgress
    count = 0 if progress is None else int(progress["batchId"]) + 1
    steps: dict[str, list[float]] = {}
    for update in query.recentProgress:
        if update["numInputRows"]:
            for step, ms in update["durationMs"].items():
                steps.setdefault(step, []).append(float(ms))
    medians = {step: round(percentile(sorted(ms), 50)) for step, ms in sorted(steps.items())}
    return count, medians


def _stop_when_idle(query: StreamingQuery) -> None:
    """Stop the query between micro-batches, so that no batch is cut off (and aborted)."""
    deadline = time.monotonic() + 10.0
    while query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.01)
    query.stop()


def _trigger(args: argparse.Namespace) -> dict[str, str]:
    return {"processingTime": f"{args.trigger_ms} milliseconds"}


def run_replog(
    spark: SparkSession,
    bootstrap: list[tuple[str, int]],
    args: argparse.Namespace,
    total: int,
    checkpoint: Path,
) -> tuple[int, dict[str, float]]:
    """Run the replog pipeline while the producer writes; return its micro-batch figures."""
    servers = ",".join(f"{host}:{port}" for host, port in bootstrap)
    query = (
        spark.readStream.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("subscribe", SOURCE_TOPIC)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("topic", SINK_TOPIC)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**_trigger(args))
        .start()
    )
    producer = SteadyProducer(bootstrap, args.partitions, args.rate, total, args.value_bytes)
    try:
        _wait_for_first_batch(query)
        producer.start()
        producer.join(timeout=args.warmup_seconds + args.seconds + DRAIN_TIMEOUT_S)
        if producer.is_alive() or producer.error is not None:
            raise RuntimeError(f"the producer did not finish: {producer.error}")
        _wait_until(
            lambda: stored_records(bootstrap, SINK_TOPIC, args.partitions, CLIENT_ID) >= total,
            query,
            "every record in the sink topic",
        )
    finally:
        producer.stop_event.set()
        if producer.is_alive():
            producer.join(timeout=30)
        _stop_when_idle(query)
    return _batches(query)


def run_ceiling(
    spark: SparkSession, args: argparse.Namespace, total: int, checkpoint: Path, results: Path
) -> tuple[int, dict[str, float]]:
    """Run the same query shape from the rate memory source into the counting writer.

    As the producer of the replog run, the rate source starts once the query has
    finished its first (empty) trigger.
    """
    results.mkdir()
    start_file = results.parent / "memory-start"
    query = (
        spark.readStream.format(MEMORY_FORMAT)
        .option("rate", str(args.rate))
        .option("total", str(total))
        .option("partitions", str(args.partitions))
        .option("valueBytes", str(args.value_bytes))
        .option("startFile", str(start_file))
        .load()
        .select("key", "value", "timestamp")
        .writeStream.format(COUNT_FORMAT)
        .option("resultDir", str(results))
        .option("checkpointLocation", str(checkpoint))
        .trigger(**_trigger(args))
        .start()
    )
    try:
        _wait_for_first_batch(query)
        start_file.touch()
        _wait_until(
            lambda: len(read_latencies(results)[0]) >= total,
            query,
            "every memory row counted",
        )
    finally:
        _stop_when_idle(query)
    return _batches(query)


def latency_figures(pairs: list[tuple[int, int]], prefix: str) -> dict[str, float]:
    """Rate and latency figures over (source ms, sink ms) pairs of the measured records."""
    if not pairs:
        raise RuntimeError("no measured record reached the sink")
    latencies = sorted(float(sink - source) for source, sink in pairs)
    span_s = (max(s for _, s in pairs) - min(s for s, _ in pairs)) / 1000
    return {
        f"{prefix}rows_per_s": round(len(pairs) / span_s),
        f"{prefix}p50_ms": round(percentile(latencies, 50), 1),
        f"{prefix}p99_ms": round(percentile(latencies, 99), 1),
        f"{prefix}max_ms": round(latencies[-1], 1),
    }


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rate", type=positive_float, default=20_000.0, help="records/s produced (20,000)"
    )
    parser.add_argument(
        "--seconds", type=positive_float, default=20.0, help="measured seconds (20)"
    )
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=5.0,
        help="seconds produced before the measured ones, left out of the figures (5)",
    )
    parser.add_argument("--value-bytes", type=positive_int, default=100, help="value size (100)")
    parser.add_argument("--partitions", type=positive_int, default=2, help="partitions (2)")
    parser.add_argument("--brokers", type=positive_int, default=1, help="brokers (1)")
    parser.add_argument(
        "--trigger-ms",
        type=int,
        default=100,
        help="processingTime trigger interval in ms; 0 starts each batch at once (100)",
    )
    args = parser.parse_args(argv)
    if args.value_bytes < SEQ_BYTES:
        parser.error(f"--value-bytes must be at least {SEQ_BYTES} (the sequence number)")
    if args.warmup_seconds < 0 or args.trigger_ms < 0:
        parser.error("--warmup-seconds and --trigger-ms must be 0 or more")
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    load_before = load_average()
    warmup = int(args.rate * args.warmup_seconds)
    total = warmup + int(args.rate * args.seconds)
    with local_cluster(args.brokers) as cluster:
        create_topics(cluster.bootstrap, args.partitions)
        with spark_run("replog-bench-spark-pipeline") as spark, temp_dir("replog-spark-") as tmp:
            batches = run_replog(spark, cluster.bootstrap, args, total, tmp / "replog")
            ceiling_batches = run_ceiling(spark, args, total, tmp / "memory", tmp / "counts")
            stamps, seen = read_latencies(tmp / "counts")
        source = read_topic(cluster.bootstrap, SOURCE_TOPIC, args.partitions)
        sink = read_topic(cluster.bootstrap, SINK_TOPIC, args.partitions)
    produced = dict(source)
    out_seqs = [seq for seq, _ in sink]
    duplicates = len(out_seqs) - len(set(out_seqs))
    missing = len(produced.keys() - set(out_seqs))
    measured = [(produced[seq], ts) for seq, ts in sink if seq >= warmup and seq in produced]
    figures = latency_figures(measured, "")
    # The rate source's row n became available at start + n / rate: the warm-up rows are
    # exactly the first `warmup` in timestamp order.
    memory_pairs = sorted(zip(stamps, seen, strict=True))[warmup:]
    ceiling = latency_figures(memory_pairs, "ceiling_")
    emit(
        {
            "bench": "spark_pipeline",
            "rate": args.rate,
            "seconds": args.seconds,
            "warmup_seconds": args.warmup_seconds,
            "trigger_ms": args.trigger_ms,
            "value_bytes": args.value_bytes,
            "partitions": args.partitions,
            "brokers": args.brokers,
            "rows_in": len(source),
            "rows_out": len(sink),
            "measured_rows": len(measured),
            "missing": missing,
            "duplicates": duplicates,
            **figures,
            "micro_batches": batches[0],
            "batch_ms_p50": batches[1],
            **ceiling,
            "ceiling_rows": len(stamps),
            "ceiling_micro_batches": ceiling_batches[0],
            "ceiling_batch_ms_p50": ceiling_batches[1],
            "ratio": round(figures["rows_per_s"] / ceiling["ceiling_rows_per_s"], 3),
            "latency_ratio_p50": round(figures["p50_ms"] / ceiling["ceiling_p50_ms"], 3),
            "load_avg_before": load_before,
            "load_avg_after": load_average(),
        }
    )


if __name__ == "__main__":
    main()
