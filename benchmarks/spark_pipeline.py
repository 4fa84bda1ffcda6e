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

Fixed rate (the default)
------------------------

One run at ``--rate``. Figures, over the records produced after the warm-up only:

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
  with ``--rate``: ``--search`` finds the pipeline's capacity.
* ``latency_ratio_p50`` = ``p50_ms / ceiling_p50_ms``.
* ``micro_batches`` and ``batch_ms_p50``: how many micro-batches each query ran and the
  median time of each step of one (Spark's ``durationMs``: ``latestOffset`` plans the
  batch, ``addBatch`` runs its read and write tasks, ``walCommit``/``commitOffsets`` write
  the checkpoint, ``triggerExecution`` is the whole).
* ``load_avg_before``/``load_avg_after``: the machine's 1-minute load averages.

Search (``--search``)
---------------------

Finds the highest rate the exactly-once pipeline sustains, and the same for Spark alone,
with one cluster and one SparkSession for every trial. A trial runs one query from a fresh
checkpoint (the replog one on a fresh pair of topics, deleted after it) for
``--warmup-seconds`` + ``--seconds`` (10 by default here) at one rate, then gives the sink
at most twice ``--p99-limit-ms`` to catch up before the query is stopped. A rate is
sustained when, over the rows that became available after the warm-up:

1. ``p99_ms`` <= ``--p99-limit-ms`` (2,000), a row never written counting with the latency
   it had reached when the query was stopped (a lower bound);
2. the backlog does not grow: the median latency of the last quarter of those rows (in the
   order they became available) exceeds that of the first quarter by at most
   ``--growth-limit-ms`` (500). A query that falls behind by a share f of the rate adds f
   seconds of latency per second, so over the 7.5 s between the quarters' middles of a
   10 s trial it shows from f of about 7 % on;
3. the backlog clears: every row is in the sink when the query is stopped;
4. no row is written twice (exactly-once), and, for the replog pipeline, the producer kept
   the rate: its measured records over the time from the first one's produce time to the
   last one's come to at least 95 % of the rate, else the trial did not test the rate.

Each search starts at its first rate and doubles it while trials pass (halves it while
they fail), in at most ``--max-trials`` - ``--bisect-steps`` trials, until one rate passed
and another failed; it then bisects between the highest passing and the lowest failing
rate for at most ``--bisect-steps`` more (rates are whole rows/s, as the rate source
wants them). The replog search starts at ``--rate``; the
Spark-alone one at the rate the replog search sustained, where the comparison is decided.
``sustained_rows_per_s`` is the highest passing rate (null if none did); ``*_capped`` says
that the search never saw a failure, so the figure is only a lower bound.

Spark alone is Spark's built-in ``rate`` source into its Parquet file sink, exactly-once,
with the same trigger and ``--partitions`` as the pipeline::

    spark.readStream.format("rate").option("rowsPerSecond", R)
        .option("numPartitions", P).load()
        .writeStream.format("parquet").option("path", ...)
        .option("checkpointLocation", ...).trigger(processingTime=...)

Its rows are measured as the replog ones are, from when a row is in the source to when the
sink writes it. The rate source makes the rows of second s of its clock (values
``s * R`` to ``(s + 1) * R - 1``) available at once, when that second ends, so a row's
available time is the source's start (the ``timestamp`` of value 0) + ``(value // R + 1)``
s; its ``timestamp`` column is earlier, spread over the second, which would charge Spark
with up to a second its source made the row wait. A row's write time is the modification
time of the Parquet file holding it, among the files of the sink's own log of committed
batches (``_spark_metadata``): the file is closed after its last row, so a row is charged
up to one task's write time more than a replog record, stamped when its Arrow batch is
encoded. Should a trial write no row at all, the clock's start is taken as the end of the
query's first trigger, no earlier than the real one. The rows are kept as groups (a second
of the clock in one file), so that a trial of a hundred million rows fits in memory. The
rate source keeps producing while the sink catches up; its clock starts before the query's
first trigger, and the catch-up time is counted from that trigger plus the warm-up and
measured seconds (rounded up to whole seconds), which gives Spark that little more time
than the replog pipeline, whose catch-up starts when the producer is done.

Output: the replog search's ``trials`` and ``spark_only_trials`` (each: ``rate``,
``p50_ms``/``p99_ms``/``max_ms`` (percentiles by numpy's inverted CDF, each group of rows
counting as many times as it has rows), ``rows_per_s`` (rows written / (last write - the
measured window's start)), the quarters' median latencies, ``backlog`` (``none``,
``growing`` or ``not cleared``), ``undelivered``, ``duplicates``, ``sustained`` and what
``failed``, ``micro_batches`` and ``batch_ms_p50``; the replog ones also
``produced_rows_per_s``), ``sustained_rows_per_s``, ``spark_only_sustained_rows_per_s``,
``ratio_to_spark_only`` (their quotient; the goal is 1.0 or more) and the run's settings
and load averages. The ceiling is not run in this mode.

Run from the repository root::

    .venv/bin/python benchmarks/spark_pipeline.py
    .venv/bin/python benchmarks/spark_pipeline.py --rate 50000 --seconds 30 --trigger-ms 0
    .venv/bin/python benchmarks/spark_pipeline.py --search
    .venv/bin/python benchmarks/spark_pipeline.py --search --rate 5000 --seconds 4 \\
        --max-trials 3 --bisect-steps 1
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
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
FIXED_SECONDS = 20.0
SEARCH_SECONDS = 10.0
CATCH_UP_LIMITS = 2  # a trial's sink gets this many p99 limits to catch up at the end
PRODUCER_SHARE = 0.95  # of the rate, below which a trial's producer fell behind

CLIENT_ID = "replog-bench-spark-pipeline"


class Topics(NamedTuple):
    source: str
    sink: str


class Records(NamedTuple):
    """Every record of a topic: its sequence number and its timestamp (ms)."""

    seqs: np.ndarray
    stamps: np.ndarray


@dataclass(frozen=True)
class QueryRun:
    """How a streaming query ran: its micro-batches, and whether its sink caught up."""

    micro_batches: int
    batch_ms_p50: dict[str, int]
    caught_up: bool
    first_trigger_ms: int  # wall clock when its first trigger was done
    stopped_ms: int  # wall clock when the query had stopped


@dataclass(frozen=True)
class Measured:
    """The rows of one run after its warm-up, in groups that became available and were
    written at the same times: one record each for replog, whose records are stamped one
    by one; a second of the rate source's clock in one Parquet file for Spark alone, which
    keeps tens of millions of rows to a few hundred groups.

    ``sink_ms`` of rows never written is the time the query stopped: their latency is then
    a lower bound, which is all that is known of it. ``window_start_ms`` is when the first
    of them was produced; for the rate source, the start of its second, whose rows all
    become available at its end.
    """

    available_ms: np.ndarray
    sink_ms: np.ndarray
    rows: np.ndarray
    delivered: np.ndarray
    duplicates: int
    window_start_ms: int


def create_topics(bootstrap: list[tuple[str, int]], partitions: int, topics: Topics) -> None:
    async def create(cluster: Cluster) -> None:
        admin = Admin(cluster)
        for topic in topics:
            await admin.create_topic(topic, partitions, 1)

    with_cluster(bootstrap, create, CLIENT_ID, CLUSTER_TIMEOUT_S)


def delete_topics(bootstrap: list[tuple[str, int]], topics: Topics) -> None:
    """Delete a trial's topics, so that a search's trials do not fill the brokers' disk."""

    async def delete(cluster: Cluster) -> None:
        admin = Admin(cluster)
        for topic in topics:
            await admin.delete_topic(topic)

    with_cluster(bootstrap, delete, CLIENT_ID, CLUSTER_TIMEOUT_S)


def _sequence_numbers(values: pa.Array) -> np.ndarray:
    """The big-endian sequence numbers leading each value, without a Python loop per
    record: a search reads millions of them per trial."""
    heads = pc.binary_slice(values, 0, SEQ_BYTES).cast(pa.binary(SEQ_BYTES))
    data = heads.buffers()[1]
    assert data is not None
    seqs = np.frombuffer(data, dtype=">i8", count=len(heads), offset=heads.offset * SEQ_BYTES)
    return seqs.astype(np.int64)


def read_topic(bootstrap: list[tuple[str, int]], topic: str, partitions: int) -> Records:
    """The sequence numbers and timestamps of every record of ``topic``, from offset 0."""

    async def read(cluster: Cluster) -> Records:
        consumer = Consumer(cluster)
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.list_offsets(tps, LATEST_TIMESTAMP)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        seqs: list[np.ndarray] = [np.empty(0, np.int64)]
        stamps: list[np.ndarray] = [np.empty(0, np.int64)]
        while any(consumer.position(tp) < ends[tp][0] for tp in tps):
            for fetched in await consumer.poll():
                seqs.append(_sequence_numbers(fetched.records.column("value")))
                stamps.append(fetched.records.column("timestamp").cast(pa.int64()).to_numpy(False))
        return Records(np.concatenate(seqs), np.concatenate(stamps))

    return with_cluster(bootstrap, read, CLIENT_ID, DRAIN_TIMEOUT_S)


class SteadyProducer(threading.Thread):
    """Writes ``total`` records at ``rate`` records/s into ``topic``, on its own loop.

    Every tick it sends the records due by then (sequence numbers continue from the last
    tick), all stamped with the current time, split evenly over the partitions; sends are
    not awaited one by one, so a slow acknowledgement does not slow the rate.
    """

    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        topic: str,
        partitions: int,
        rate: float,
        total: int,
        value_bytes: int,
    ) -> None:
        super().__init__(name="replog-bench-producer", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
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
                            producer.send_arrow(self.topic, partition, piece)
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


def _wait_until(done: Callable[[], bool], query: StreamingQuery, timeout_s: float) -> bool:
    """Poll ``done`` until it holds (True) or ``timeout_s`` passes (False); a failed query
    fails the benchmark at once rather than at the timeout."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _require(reached: bool, what: str) -> None:
    """A fixed-rate run's figures are only right once every row went through."""
    if not reached:
        raise TimeoutError(f"{what} not reached in {DRAIN_TIMEOUT_S} s")


def _batches(query: StreamingQuery) -> tuple[int, dict[str, int]]:
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


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _finish(query: StreamingQuery, caught_up: bool, first_trigger_ms: int) -> QueryRun:
    """Stop ``query`` and note when: the latency floor of the rows it never wrote."""
    _stop_when_idle(query)
    count, medians = _batches(query)
    return QueryRun(count, medians, caught_up, first_trigger_ms, _now_ms())


def _trigger(args: argparse.Namespace) -> dict[str, str]:
    return {"processingTime": f"{args.trigger_ms} milliseconds"}


def _row_counts(rate: float, args: argparse.Namespace) -> tuple[int, int]:
    """(warm-up rows, all rows) of a run at ``rate``."""
    warmup = int(rate * args.warmup_seconds)
    return warmup, warmup + int(rate * args.seconds)


def run_replog(
    spark: SparkSession,
    bootstrap: list[tuple[str, int]],
    topics: Topics,
    args: argparse.Namespace,
    rate: float,
    checkpoint: Path,
    catch_up_s: float,
) -> QueryRun:
    """Run the replog pipeline while the producer writes at ``rate``; once it is done,
    give the sink ``catch_up_s`` to hold every record, then stop the query."""
    servers = ",".join(f"{host}:{port}" for host, port in bootstrap)
    total = _row_counts(rate, args)[1]
    query = (
        spark.readStream.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("subscribe", topics.source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("topic", topics.sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**_trigger(args))
        .start()
    )
    producer = SteadyProducer(
        bootstrap, topics.source, args.partitions, rate, total, args.value_bytes
    )
    caught_up = False
    first_trigger_ms = 0
    try:
        _wait_for_first_batch(query)
        first_trigger_ms = _now_ms()
        producer.start()
        producer.join(timeout=args.warmup_seconds + args.seconds + DRAIN_TIMEOUT_S)
        if producer.is_alive() or producer.error is not None:
            raise RuntimeError(f"the producer did not finish: {producer.error}")
        caught_up = _wait_until(
            lambda: stored_records(bootstrap, topics.sink, args.partitions, CLIENT_ID) >= total,
            query,
            catch_up_s,
        )
    finally:
        producer.stop_event.set()
        if producer.is_alive():
            producer.join(timeout=30)
        run = _finish(query, caught_up, first_trigger_ms)
    return run


def run_ceiling(
    spark: SparkSession, args: argparse.Namespace, total: int, checkpoint: Path, results: Path
) -> QueryRun:
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
    caught_up = False
    first_trigger_ms = 0
    try:
        _wait_for_first_batch(query)
        first_trigger_ms = _now_ms()
        start_file.touch()
        caught_up = _wait_until(
            lambda: len(read_latencies(results)[0]) >= total, query, DRAIN_TIMEOUT_S
        )
    finally:
        run = _finish(query, caught_up, first_trigger_ms)
    _require(caught_up, "every memory row counted")
    return run


def _rate_seconds_committed(query: StreamingQuery) -> int:
    """Seconds of the rate source's clock the query has written: its offsets are seconds,
    and a progress event is only posted once the batch is committed."""
    progress = query.lastProgress
    if progress is None:
        return 0
    offset = progress["sources"][0]["endOffset"]
    return 0 if offset is None else int(json.loads(str(offset)))


def run_spark_only(
    spark: SparkSession, args: argparse.Namespace, rate: int, directory: Path, catch_up_s: float
) -> QueryRun:
    """Run Spark's rate source into its Parquet sink at ``rate`` for the warm-up and the
    measured seconds; then give the sink ``catch_up_s`` to write them all, and stop."""
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", str(rate))
        .option("numPartitions", str(args.partitions))
        .load()
        .writeStream.format("parquet")
        .option("path", str(directory / "parquet"))
        .option("checkpointLocation", str(directory / "checkpoint"))
        .trigger(**_trigger(args))
        .start()
    )
    seconds = math.ceil(args.warmup_seconds + args.seconds)
    caught_up = False
    first_trigger_ms = 0
    try:
        _wait_for_first_batch(query)
        first_trigger_ms = _now_ms()
        caught_up = _wait_until(
            lambda: _rate_seconds_committed(query) >= seconds, query, seconds + catch_up_s
        )
    finally:
        run = _finish(query, caught_up, first_trigger_ms)
    return run


def _committed_files(sink: Path) -> list[Path]:
    """The data files of the batches the Parquet sink committed, from its own log: files a
    failed or cut-off batch left behind are not part of the output.

    Each log file is a version line and then one JSON entry per file; a compaction file
    repeats the entries of the batches before it, hence the set. A sink that committed
    nothing may have no log yet.
    """
    added: set[str] = set()
    removed: set[str] = set()
    logs = sink / "_spark_metadata"
    for log in logs.iterdir() if logs.is_dir() else ():
        if log.name.startswith(".") or log.name.endswith(".crc"):
            continue
        for line in log.read_text().splitlines()[1:]:
            entry = json.loads(line)
            target = added if entry["action"] == "add" else removed
            target.add(unquote(urlparse(entry["path"]).path))
    return sorted(Path(path) for path in added - removed)


def _rate_start_ms(path: Path, values: np.ndarray) -> int:
    """When the rate source's clock started: the ``timestamp`` of its value 0."""
    stamps = pq.read_table(path, columns=["timestamp"]).column("timestamp")
    in_ms = stamps.cast(pa.timestamp("ms", stamps.type.tz), safe=False).cast(pa.int64())
    return int(in_ms.to_numpy()[np.flatnonzero(values == 0)[0]])


def _groups(
    seconds: np.ndarray, sink_ms: int, delivered: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(second, sink time, rows, delivered) groups of the rows of ``seconds``."""
    unique, rows = np.unique(seconds, return_counts=True)
    size = len(unique)
    return unique, np.full(size, sink_ms, np.int64), rows, np.full(size, delivered)


def read_spark_only(sink: Path, rate: int, args: argparse.Namespace, run: QueryRun) -> Measured:
    """The measured rows of a rate -> Parquet run, grouped, with when they became
    available in the source and when the sink wrote them (see the module docstring).

    Files are read one at a time, and of the rows only which are seen, so that a run of
    a hundred million rows fits in memory. Should no row have been written, the clock's
    start is taken as the end of the query's first trigger, which is no earlier: the
    latencies are then lower bounds.
    """
    warmup, total = _row_counts(rate, args)
    seen = np.zeros(total - warmup, bool)
    duplicates = 0
    start_ms: int | None = None
    groups: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for path in _committed_files(sink):
        values = pq.read_table(path, columns=["value"]).column("value").to_numpy()
        if start_ms is None and (values == 0).any():
            start_ms = _rate_start_ms(path, values)
        index = values[(values >= warmup) & (values < total)] - warmup
        duplicates += int(np.count_nonzero(seen[index]))
        seen[index] = True
        mtime_ms = path.stat().st_mtime_ns // 1_000_000
        groups.append(_groups((index + warmup) // rate, mtime_ms, True))
    groups.append(_groups((np.flatnonzero(~seen) + warmup) // rate, run.stopped_ms, False))
    if start_ms is None:
        start_ms = run.first_trigger_ms
    seconds, sink_ms, rows, delivered = (
        np.concatenate(column) for column in zip(*groups, strict=True)
    )
    return Measured(
        start_ms + (seconds + 1) * 1000,
        sink_ms,
        rows,
        delivered,
        duplicates,
        start_ms + warmup // rate * 1000,
    )


def _measure(
    seqs: np.ndarray,
    sink_ms: np.ndarray,
    warmup: int,
    available_ms: np.ndarray,
    stopped_ms: int,
    window_start_ms: int,
) -> Measured:
    """Match sink records (by sequence number) to the measured records ``warmup``
    onwards, whose produce times are ``available_ms``: a group each."""
    count = len(available_ms)
    index = seqs - warmup
    inside = (index >= 0) & (index < count)
    index = index[inside]
    copies = np.bincount(index, minlength=count)
    written = np.full(count, stopped_ms, np.int64)
    written[index] = sink_ms[inside]
    duplicates = int(len(index) - np.count_nonzero(copies))
    ones = np.ones(count, np.int64)
    return Measured(available_ms, written, ones, copies > 0, duplicates, window_start_ms)


def latency_figures(source_ms: np.ndarray, sink_ms: np.ndarray, prefix: str) -> dict[str, float]:
    """Rate and latency figures over the measured records' source and sink times (ms)."""
    if not len(source_ms):
        raise RuntimeError("no measured record reached the sink")
    latencies = (sink_ms - source_ms).astype(np.float64)
    span_s = (int(sink_ms.max()) - int(source_ms.min())) / 1000
    p50, p99 = np.percentile(latencies, [50, 99])
    return {
        f"{prefix}rows_per_s": round(len(source_ms) / span_s),
        f"{prefix}p50_ms": round(float(p50), 1),
        f"{prefix}p99_ms": round(float(p99), 1),
        f"{prefix}max_ms": round(float(latencies.max()), 1),
    }


def _percentiles(latencies: np.ndarray, rows: np.ndarray, q: list[float]) -> list[float]:
    """Percentiles of the rows' latencies, a group counting as many times as its rows."""
    found = np.percentile(latencies, q, weights=rows, method="inverted_cdf")
    return [round(float(value), 1) for value in found]


def judge(measured: Measured, rate: int, args: argparse.Namespace) -> dict[str, Any]:
    """One trial's figures and verdict, by the rules of the module docstring."""
    order = np.lexsort((measured.sink_ms, measured.available_ms))
    latencies = (measured.sink_ms - measured.available_ms)[order]
    rows = measured.rows[order]
    delivered = measured.delivered[order]
    before = np.cumsum(rows) - rows
    first = before < rows.sum() / 4
    last = before + rows > rows.sum() * 3 / 4
    p50, p99 = _percentiles(latencies, rows, [50, 99])
    first_p50 = _percentiles(latencies[first], rows[first], [50])[0]
    last_p50 = _percentiles(latencies[last], rows[last], [50])[0]
    written = int(rows[delivered].sum())
    rows_per_s = 0
    if written:
        span_ms = int(measured.sink_ms[measured.delivered].max()) - measured.window_start_ms
        rows_per_s = round(written * 1000 / span_ms)
    undelivered = int(rows.sum()) - written
    backlog = "none"
    if last_p50 - first_p50 > args.growth_limit_ms:
        backlog = "growing"
    elif undelivered:
        backlog = "not cleared"
    failed = [
        reason
        for reason, bad in (
            ("p99", p99 > args.p99_limit_ms),
            ("growing backlog", backlog == "growing"),
            ("backlog not cleared", undelivered > 0),
            ("duplicates", measured.duplicates > 0),
        )
        if bad
    ]
    return {
        "rate": rate,
        "rows_per_s": rows_per_s,
        "p50_ms": p50,
        "p99_ms": p99,
        "max_ms": float(latencies.max()),
        "first_quarter_p50_ms": first_p50,
        "last_quarter_p50_ms": last_p50,
        "backlog": backlog,
        "undelivered": undelivered,
        "duplicates": measured.duplicates,
        "sustained": not failed,
        "failed": failed,
    }


def _query_figures(run: QueryRun) -> dict[str, Any]:
    return {"micro_batches": run.micro_batches, "batch_ms_p50": run.batch_ms_p50}


def replog_trial(
    spark: SparkSession,
    bootstrap: list[tuple[str, int]],
    args: argparse.Namespace,
    rate: int,
    directory: Path,
) -> dict[str, Any]:
    """One search trial of the replog pipeline at ``rate``, on topics of its own."""
    topics = Topics(f"{SOURCE_TOPIC}-{directory.name}", f"{SINK_TOPIC}-{directory.name}")
    create_topics(bootstrap, args.partitions, topics)
    try:
        catch_up_s = CATCH_UP_LIMITS * args.p99_limit_ms / 1000
        run = run_replog(spark, bootstrap, topics, args, rate, directory, catch_up_s)
        source = read_topic(bootstrap, topics.source, args.partitions)
        sink = read_topic(bootstrap, topics.sink, args.partitions)
    finally:
        delete_topics(bootstrap, topics)
        shutil.rmtree(directory, ignore_errors=True)
    warmup, total = _row_counts(rate, args)
    produced = np.full(total, -1, np.int64)
    produced[source.seqs] = source.stamps
    available = produced[warmup:]
    if (available < 0).any():
        raise RuntimeError("the source topic lacks records the producer sent")
    measured = _measure(
        sink.seqs, sink.stamps, warmup, available, run.stopped_ms, int(available.min())
    )
    verdict = judge(measured, rate, args)
    span_s = (int(available.max()) - int(available.min())) / 1000
    produced_rate = len(available) / span_s if span_s > 0 else float(len(available))
    if produced_rate < PRODUCER_SHARE * rate:
        verdict["sustained"] = False
        verdict["failed"].append("producer behind")
    return {**verdict, "produced_rows_per_s": round(produced_rate), **_query_figures(run)}


def spark_only_trial(
    spark: SparkSession, args: argparse.Namespace, rate: int, directory: Path
) -> dict[str, Any]:
    """One search trial of Spark alone (rate source -> Parquet) at ``rate``."""
    try:
        catch_up_s = CATCH_UP_LIMITS * args.p99_limit_ms / 1000
        run = run_spark_only(spark, args, rate, directory, catch_up_s)
        measured = read_spark_only(directory / "parquet", rate, args, run)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return {**judge(measured, rate, args), **_query_figures(run)}


def search(
    trial: Callable[[int], dict[str, Any]], start: int, max_trials: int, bisect_steps: int
) -> tuple[int | None, list[dict[str, Any]], bool]:
    """(highest sustained rate or None, every trial, whether no trial failed).

    Doubling (or halving) brackets the capacity in few trials whatever the starting
    rate; bisecting then narrows it, ``bisect_steps`` times at most. Both share the
    ``max_trials`` budget, of which bracketing leaves ``bisect_steps`` to bisection.
    """
    trials: list[dict[str, Any]] = []
    good: int | None = None
    bad: int | None = None
    rate = start
    while len(trials) < max(1, max_trials - bisect_steps) and rate >= 1:
        trials.append(trial(rate))
        if trials[-1]["sustained"]:
            good = rate
            rate *= 2
        else:
            bad = rate
            rate //= 2
        if good is not None and bad is not None:
            break
    for _ in range(bisect_steps):
        if good is None or bad is None or len(trials) >= max_trials:
            break
        middle = (good + bad) // 2
        if middle == good:
            break
        trials.append(trial(middle))
        if trials[-1]["sustained"]:
            good = middle
        else:
            bad = middle
    return good, trials, bad is None


def run_fixed(args: argparse.Namespace) -> dict[str, Any]:
    """The fixed-rate run: the replog pipeline and its ceiling at ``--rate``."""
    warmup, total = _row_counts(args.rate, args)
    topics = Topics(SOURCE_TOPIC, SINK_TOPIC)
    with local_cluster(args.brokers) as cluster:
        create_topics(cluster.bootstrap, args.partitions, topics)
        with spark_run("replog-bench-spark-pipeline") as spark, temp_dir("replog-spark-") as tmp:
            run = run_replog(
                spark, cluster.bootstrap, topics, args, args.rate, tmp / "replog", DRAIN_TIMEOUT_S
            )
            _require(run.caught_up, "every record in the sink topic")
            ceiling_run = run_ceiling(spark, args, total, tmp / "memory", tmp / "counts")
            stamps, seen = read_latencies(tmp / "counts")
        source = read_topic(cluster.bootstrap, SOURCE_TOPIC, args.partitions)
        sink = read_topic(cluster.bootstrap, SINK_TOPIC, args.partitions)
    produced = np.full(total, -1, np.int64)
    produced[source.seqs] = source.stamps
    copies = np.bincount(sink.seqs, minlength=total)
    measured = (sink.seqs >= warmup) & (produced[sink.seqs] >= 0)
    figures = latency_figures(produced[sink.seqs[measured]], sink.stamps[measured], "")
    # The rate source's row n became available at start + n / rate: the warm-up rows are
    # exactly the first `warmup` in timestamp order.
    order = np.lexsort((np.asarray(seen, np.int64), np.asarray(stamps, np.int64)))[warmup:]
    ceiling = latency_figures(
        np.asarray(stamps, np.int64)[order], np.asarray(seen, np.int64)[order], "ceiling_"
    )
    return {
        "rows_in": len(source.seqs),
        "rows_out": len(sink.seqs),
        "measured_rows": int(np.count_nonzero(measured)),
        "missing": int(np.count_nonzero((produced >= 0) & (copies == 0))),
        "duplicates": int(len(sink.seqs) - np.count_nonzero(copies)),
        **figures,
        **_query_figures(run),
        **ceiling,
        "ceiling_rows": len(stamps),
        "ceiling_micro_batches": ceiling_run.micro_batches,
        "ceiling_batch_ms_p50": ceiling_run.batch_ms_p50,
        "ratio": round(figures["rows_per_s"] / ceiling["ceiling_rows_per_s"], 3),
        "latency_ratio_p50": round(figures["p50_ms"] / ceiling["ceiling_p50_ms"], 3),
    }


def run_search(args: argparse.Namespace) -> dict[str, Any]:
    """Both searches on one cluster and one SparkSession: the replog pipeline's first."""
    with (
        local_cluster(args.brokers) as cluster,
        spark_run("replog-bench-spark-pipeline") as spark,
        temp_dir("replog-spark-") as tmp,
    ):
        counter = itertools.count(1)  # names each trial's directory (and topics)

        def replog(rate: int) -> dict[str, Any]:
            return replog_trial(spark, cluster.bootstrap, args, rate, tmp / f"r{next(counter)}")

        def spark_only(rate: int) -> dict[str, Any]:
            return spark_only_trial(spark, args, rate, tmp / f"s{next(counter)}")

        start = max(1, round(args.rate))
        best, trials, capped = search(replog, start, args.max_trials, args.bisect_steps)
        spark_best, spark_trials, spark_capped = search(
            spark_only, best or start, args.max_trials, args.bisect_steps
        )
    ratio = round(best / spark_best, 3) if best and spark_best else None
    return {
        "sustained_rows_per_s": best,
        "spark_only_sustained_rows_per_s": spark_best,
        "ratio_to_spark_only": ratio,
        "capped": capped,
        "spark_only_capped": spark_capped,
        "trials": trials,
        "spark_only_trials": spark_trials,
    }


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="With --search: the highest rate the pipeline sustains (p99 under "
        "--p99-limit-ms, no growing backlog), beside the same search for Spark alone "
        "(rate source -> Parquet), as ratio_to_spark_only. See the module docstring.",
    )
    parser.add_argument(
        "--rate",
        type=positive_float,
        default=20_000.0,
        help="records/s produced; with --search, the first rate tried (20,000)",
    )
    parser.add_argument(
        "--seconds",
        type=positive_float,
        help=f"measured seconds ({FIXED_SECONDS:.0f}; with --search, {SEARCH_SECONDS:.0f} a trial)",
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
    parser.add_argument(
        "--search",
        action="store_true",
        help="search the highest sustained rate of the pipeline and of Spark alone",
    )
    parser.add_argument(
        "--max-trials",
        type=positive_int,
        default=11,
        help="trials per search at most (11: from the default rate, doubling reaches 1.28 M)",
    )
    parser.add_argument(
        "--bisect-steps",
        type=int,
        default=3,
        help="trials bisecting between the passing and the failing rate, within --max-trials (3)",
    )
    parser.add_argument(
        "--p99-limit-ms",
        type=positive_float,
        default=2000.0,
        help="p99 latency a sustained rate stays under (2,000)",
    )
    parser.add_argument(
        "--growth-limit-ms",
        type=positive_float,
        default=500.0,
        help="most the last quarter's median latency may exceed the first's (500)",
    )
    args = parser.parse_args(argv)
    if args.value_bytes < SEQ_BYTES:
        parser.error(f"--value-bytes must be at least {SEQ_BYTES} (the sequence number)")
    if args.warmup_seconds < 0 or args.trigger_ms < 0 or args.bisect_steps < 0:
        parser.error("--warmup-seconds, --trigger-ms and --bisect-steps must be 0 or more")
    if args.seconds is None:
        args.seconds = SEARCH_SECONDS if args.search else FIXED_SECONDS
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    load_before = load_average()
    results = run_search(args) if args.search else run_fixed(args)
    settings: dict[str, Any] = {"bench": "spark_pipeline"}
    if args.search:
        settings |= {
            "mode": "search",
            "start_rate": args.rate,
            "max_trials": args.max_trials,
            "bisect_steps": args.bisect_steps,
            "p99_limit_ms": args.p99_limit_ms,
            "growth_limit_ms": args.growth_limit_ms,
        }
    else:
        settings["rate"] = args.rate
    emit(
        {
            **settings,
            "seconds": args.seconds,
            "warmup_seconds": args.warmup_seconds,
            "trigger_ms": args.trigger_ms,
            "value_bytes": args.value_bytes,
            "partitions": args.partitions,
            "brokers": args.brokers,
            **results,
            "load_avg_before": load_before,
            "load_avg_after": load_average(),
        }
    )


if __name__ == "__main__":
    main()
