"""Shared pieces of the Spark benchmarks: the session, and the ceilings they are compared with.

A Spark benchmark of `format("replog")` alone says little: Spark's Python data source path
has a cost of its own (Python workers, Arrow IPC between the JVM and Python, task
scheduling) that no connector can go below. So each benchmark also runs the same query
shape against data sources defined here, which do no I/O at all:

* `bench_memory` (`MemorySource`) yields Arrow batches of the source's exact schema
  (`arrow_source_schema(False)`) built in memory, in batch sizes the caller chooses (the
  read benchmark passes the sizes the replog reader yields), or, with the `rate` option,
  as an unbounded stream whose offsets grow at a fixed rate (the pipeline benchmark).
* `bench_count` (`CountSink`) is an Arrow writer (batch and stream) that only counts its
  input rows; the stream writer also records, per row, when it saw the row, so that the
  pipeline benchmark can compute the latency floor.

Those figures are the ceilings; a replog figure divided by its ceiling is the share of
Spark's own Python data source throughput the connector reaches.

The classes are defined in this module, which Spark's Python workers cannot import (it is
not installed), so the module is registered with cloudpickle to be pickled by value.
Everything they use at run time is imported inside their methods. The session registers
`format("replog")` explicitly too (see `spark_session`), so the benchmarks run from any
directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from py4j.protocol import Py4JJavaError
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StructType

from connectors.spark.schema import source_schema
from connectors.spark.source import ReplogDataSource
from spark_replica.client import Cluster, Consumer
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP

if TYPE_CHECKING:
    import pyarrow as pa

MEMORY_FORMAT = "bench_memory"
COUNT_FORMAT = "bench_count"
QUERY_TIMEOUT_S = 600.0
CLUSTER_TIMEOUT_S = 60.0
JVM_STOP_TIMEOUT_S = 10.0

T = TypeVar("T")

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def spark_session(app_name: str) -> SparkSession:
    """A local[2] session on loopback whose Python workers run this interpreter.

    Workers use `python3` from PATH unless PYSPARK_PYTHON says otherwise, and would then
    miss the virtual environment's packages.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # Spark finds installed `pyspark_*` modules with pkgutil.iter_modules, which does not
    # see a module of an editable install unless the working directory holds it: register
    # `replog` explicitly so that the benchmarks run from any directory.
    session.dataSource.register(ReplogDataSource)
    session.dataSource.register(MemorySource)
    session.dataSource.register(CountSink)
    return session


def stop_spark(session: SparkSession) -> None:
    """Stop the session and the JVM that pyspark started for it.

    `SparkSession.stop` leaves the gateway JVM running until this Python process exits,
    which is too late when `main()` is called from another program.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    if gateway is None:
        return
    with contextlib.suppress(Exception):  # py4j raises whatever its socket raised
        gateway.shutdown()
    process: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    if process is not None:
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()  # the JVM exits when its stdin closes
        try:
            process.wait(timeout=JVM_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=JVM_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=JVM_STOP_TIMEOUT_S)
    SparkContext._gateway = None
    SparkContext._jvm = None


@contextlib.contextmanager
def spark_run(app_name: str) -> Iterator[SparkSession]:
    """A session for the ``with`` block; stopped (JVM included) however the block ends.

    A Java exception's message is fetched from the JVM when it is printed, which is too
    late once the JVM is stopped, so it is turned into a plain error first.
    """
    session = spark_session(app_name)
    try:
        yield session
    except Py4JJavaError as exc:
        raise RuntimeError(f"Spark failed: {exc}") from None
    finally:
        stop_spark(session)


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory removed at the end (checkpoints, result files)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def await_query(query: StreamingQuery, timeout_s: float = QUERY_TIMEOUT_S) -> None:
    """Wait for a query that ends by itself (AvailableNow); fail if it fails or hangs."""
    if not query.awaitTermination(timeout_s):
        query.stop()
        raise TimeoutError(f"streaming query {query.name} still running after {timeout_s} s")
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"streaming query failed: {error}")


def input_rows(query: StreamingQuery) -> int:
    """Rows the query read, over every micro-batch it reported."""
    return sum(progress["numInputRows"] for progress in query.recentProgress)


def timed_available_now(
    frame: DataFrame, checkpoint: Path, sink: str = "noop"
) -> tuple[float, int]:
    """Run ``frame`` to ``sink`` with Trigger.AvailableNow; return (seconds, rows read).

    The time runs from `start()` to the query's end, so it includes planning each
    micro-batch and writing the checkpoint, as a user's job pays them.
    """
    started = time.perf_counter()
    query = (
        frame.writeStream.format(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    await_query(query)
    return time.perf_counter() - started, input_rows(query)


def timed_batch_noop(frame: DataFrame) -> float:
    """Seconds to write ``frame`` to the noop sink: every row read, nothing kept."""
    started = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def load_average() -> float:
    """The machine's 1-minute load average: on a shared machine, how busy it was."""
    return round(os.getloadavg()[0], 2)


def _cpu_ticks(pid: int) -> tuple[int, int]:
    """(utime + stime, the same of its children it has waited for) of `pid`; 0s if gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = [int(value) for value in stat.read().rsplit(")", 1)[1].split()[11:15]]
    except OSError:
        return 0, 0
    return fields[0] + fields[1], fields[2] + fields[3]


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                for child in map(int, f.read().split()):
                    found += [child, *_descendants(child)]
    return found


def spark_cpu_seconds() -> tuple[float, float]:
    """CPU seconds so far of this session's JVM and of its Python workers.

    On a shared machine, the machine's busy time says little about one job; these say
    where a job's CPU went. The Python side is every process under the JVM (pyspark's
    daemon, the workers it forks, the data source runners the JVM starts) and the ones
    that ended, whose time their parent keeps once it has waited for them.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    process: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    if process is None:
        return 0.0, 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    jvm, ended = _cpu_ticks(process.pid)
    workers = ended + sum(sum(_cpu_ticks(pid)) for pid in _descendants(process.pid))
    return jvm / ticks, workers / ticks


def with_cluster(
    bootstrap: list[tuple[str, int]],
    work: Callable[[Cluster], Awaitable[T]],
    client_id: str,
    timeout_s: float | None = None,
) -> T:
    """Run `work(cluster)` on a fresh event loop; close the cluster's connections after."""

    async def scoped() -> T:
        cluster = Cluster(bootstrap, client_id=client_id)
        try:
            return await asyncio.wait_for(work(cluster), timeout_s)
        finally:
            await cluster.close()

    return asyncio.run(scoped())


def stored_records(
    bootstrap: list[tuple[str, int]], topic: str, partitions: int, client_id: str
) -> int:
    """Records the topic holds: the sum of its partitions' high watermarks."""

    async def count(cluster: Cluster) -> int:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await Consumer(cluster).list_offsets(tps, LATEST_TIMESTAMP)
        return sum(offset for offset, _ in ends.values())

    return with_cluster(bootstrap, count, client_id, CLUSTER_TIMEOUT_S)


def marginal_rows_per_s(rows: int, seconds: float, fixed: float) -> int | None:
    """Rows/s beyond the fixed cost; None if the run was not clearly longer than it."""
    return round(rows / (seconds - fixed)) if seconds > fixed * 1.05 else None


def read_count_file(path: Path) -> int:
    """The row count a `bench_count` batch write left in ``path``."""
    return int(json.loads(path.read_text())["rows"])


# --------------------------------------------------------------------------- memory source


@dataclass(frozen=True)
class MemoryPartition(InputPartition):
    """One task of the memory source: the sizes of the batches it yields, or an offset
    range of the rate stream (`first` and `end`, timestamps from `start_ms` and `rate`)."""

    index: int
    sizes: tuple[int, ...] = ()
    value_bytes: int = 100
    first: int = 0
    end: int = 0
    start_ms: int = 0
    rate: float = 0.0


def _rows(
    count: int,
    value_bytes: int,
    partition: int,
    first_offset: int,
    timestamps_us: pa.Array | None = None,
) -> pa.RecordBatch:
    """`count` rows in the source's Arrow schema, built column-wise (zero-filled values)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from connectors.spark.schema import arrow_source_schema

    data = pa.py_buffer(bytes(count * value_bytes))
    offsets = pa.array(range(0, (count + 1) * value_bytes, value_bytes), pa.int32())
    values = pa.Array.from_buffers(pa.binary(), count, [None, offsets.buffers()[1], data])
    if timestamps_us is None:
        now_us = time.time_ns() // 1000
        timestamps_us = pa.repeat(pa.scalar(now_us, pa.int64()), count)
    columns = [
        pa.nulls(count, pa.binary()),
        values,
        pa.repeat(pa.scalar("memory", pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pc.add(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), count)), first_offset - 1),
        timestamps_us.cast(pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.repeat(pa.scalar(0, pa.int32()), count),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_source_schema(False))


def _sized_partitions(sizes: list[list[int]], value_bytes: int) -> list[InputPartition]:
    return [MemoryPartition(index, tuple(s), value_bytes) for index, s in enumerate(sizes)]


def _yield_sizes(part: MemoryPartition) -> Iterator[pa.RecordBatch]:
    """Yield batches of the partition's sizes; each distinct size is built once, up front,
    so that the timed part is Spark taking batches from memory."""
    built = {size: _rows(size, part.value_bytes, part.index, 0) for size in set(part.sizes)}
    for size in part.sizes:
        yield built[size]


def _yield_rate_range(part: MemoryPartition) -> Iterator[pa.RecordBatch]:
    """Yield offsets [first, end) of the rate stream, each stamped with the time at which
    the stream made it available (start + offset / rate)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = part.end - part.first
    if count <= 0:
        return
    offsets = pa.array(range(part.first, part.end), pa.int64())
    micros = pc.add(
        pc.cast(pc.floor(pc.multiply(offsets, 1_000_000 / part.rate)), pa.int64()),
        part.start_ms * 1000,
    )
    yield _rows(count, part.value_bytes, part.index, part.first, micros)


class MemoryBatchReader(DataSourceReader):
    """`spark.read.format("bench_memory")`: one task per entry of `sizes`."""

    def __init__(self, sizes: list[list[int]], value_bytes: int) -> None:
        self.sizes = sizes
        self.value_bytes = value_bytes

    def partitions(self) -> list[InputPartition]:
        return _sized_partitions(self.sizes, self.value_bytes)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, MemoryPartition)
        return _yield_sizes(partition)


class MemoryStreamReader(DataSourceStreamReader):
    """A stream holding exactly the rows of `sizes`, all available at once.

    `latestOffset` has the `(start, limit)` signature, as the replog reader's has, so
    Spark plans both through the same admission-control path.
    """

    def __init__(self, sizes: list[list[int]], value_bytes: int) -> None:
        self.sizes = sizes
        self.value_bytes = value_bytes
        self.total = sum(sum(s) for s in sizes)

    def initialOffset(self) -> dict:
        return {"offset": 0}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        return {"offset": self.total}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if start["offset"] >= end["offset"]:
            return []
        return _sized_partitions(self.sizes, self.value_bytes)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, MemoryPartition)
        return _yield_sizes(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: the rows live in memory."""


class RateStreamReader(DataSourceStreamReader):
    """A stream whose offsets grow at `rate` rows/s, up to `total` rows; each row's
    timestamp is when it became available, like a record's produce time.

    The clock starts at the first `latestOffset` call that finds `start_file` (written by
    the benchmark once the query's first trigger is done), so that, as with a producer
    started at that moment, no row waits for the query's own start.
    """

    def __init__(
        self, rate: float, total: int, partitions: int, value_bytes: int, start_file: str
    ) -> None:
        self.rate = rate
        self.total = total
        self.partition_count = partitions
        self.value_bytes = value_bytes
        self.start_file = start_file
        self.start_ms: int | None = None

    def initialOffset(self) -> dict:
        return {"offset": 0}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        now_ms = time.time_ns() // 1_000_000
        if self.start_ms is None:
            if not os.path.exists(self.start_file):
                return {"offset": 0}
            self.start_ms = now_ms
        elapsed_ms = now_ms - self.start_ms
        return {"offset": min(self.total, int(elapsed_ms * self.rate / 1000))}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        first, stop = start["offset"], end["offset"]
        count = self.partition_count
        bounds = [first + (stop - first) * i // count for i in range(count + 1)]
        return [
            MemoryPartition(
                index,
                value_bytes=self.value_bytes,
                first=bounds[index],
                end=bounds[index + 1],
                start_ms=self.start_ms or 0,
                rate=self.rate,
            )
            for index in range(count)
            if bounds[index + 1] > bounds[index]
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, MemoryPartition)
        return _yield_rate_range(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: rows are generated on demand."""


class MemorySource(DataSource):
    """`format("bench_memory")`: the source's schema, rows from memory.

    Options: `sizes` (JSON list per partition of batch sizes) and `valueBytes`; or
    `rate` (rows/s), `total` (rows), `partitions`, `valueBytes` and `startFile` (the clock
    starts once it exists) for the rate stream.
    """

    @classmethod
    def name(cls) -> str:
        return MEMORY_FORMAT

    def schema(self) -> StructType:
        return source_schema(False)

    def _sizes(self) -> list[list[int]]:
        return [list(map(int, sizes)) for sizes in json.loads(self.options["sizes"])]

    def reader(self, schema: StructType) -> DataSourceReader:
        return MemoryBatchReader(self._sizes(), int(self.options.get("valuebytes", 100)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        value_bytes = int(self.options.get("valuebytes", 100))
        if "rate" in self.options:
            return RateStreamReader(
                float(self.options["rate"]),
                int(self.options["total"]),
                int(self.options["partitions"]),
                value_bytes,
                self.options["startfile"],
            )
        return MemoryStreamReader(self._sizes(), value_bytes)


# --------------------------------------------------------------------------- counting sink


@dataclass(frozen=True)
class CountMessage(WriterCommitMessage):
    """Rows one task saw; for streams also each row's timestamp and when it was seen (ms)."""

    rows: int
    timestamps_ms: list[Any] = field(default_factory=list)  # pyarrow int64 arrays
    seen_ms: list[int] = field(default_factory=list)  # one per array above


class CountingArrowWriter(DataSourceArrowWriter):
    """`df.write.format("bench_count")`: counts its input rows, keeps nothing.

    The driver-side commit writes the total to `resultPath`, the only way back to the
    benchmark process (commit runs in a Python worker, not in it).
    """

    def __init__(self, result_path: str) -> None:
        self.result_path = result_path

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CountMessage:
        return CountMessage(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, CountMessage))
        Path(self.result_path).write_text(json.dumps({"rows": rows}))


class CountingStreamArrowWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("bench_count")`: counts rows and notes when it saw each.

    With a `timestamp` column in the input, every batch's row timestamps and the time
    the batch arrived go into the commit message; the commit writes them to
    `resultDir/batch-<id>.arrow` for the benchmark to compute latencies from.
    """

    def __init__(self, result_dir: str) -> None:
        self.result_dir = result_dir

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CountMessage:
        import pyarrow as pa

        rows = 0
        stamps: list[pa.Array] = []
        seen: list[int] = []
        for batch in iterator:
            now = time.time_ns() // 1_000_000
            rows += batch.num_rows
            if "timestamp" in batch.schema.names and batch.num_rows:
                micros = batch.column("timestamp").cast(pa.int64())
                stamps.append(pa.compute.divide(micros, 1000))
                seen.append(now)
        return CountMessage(rows, stamps, seen)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        import pyarrow as pa

        stamps: list[pa.Array] = []
        seen: list[pa.Array] = []
        for message in messages:
            if not isinstance(message, CountMessage):
                continue
            for array, at in zip(message.timestamps_ms, message.seen_ms, strict=True):
                stamps.append(array)
                seen.append(pa.repeat(pa.scalar(at, pa.int64()), len(array)))
        if not stamps:
            return
        table = pa.table(
            {"timestamp_ms": pa.concat_arrays(stamps), "seen_ms": pa.concat_arrays(seen)}
        )
        path = Path(self.result_dir) / f"batch-{batchId}.arrow"
        partial = path.with_suffix(".partial")
        with pa.ipc.new_file(str(partial), table.schema) as out:
            out.write_table(table)
        partial.replace(path)  # a reader never sees half a file

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: nothing was kept."""


class CountSink(DataSource):
    """`format("bench_count")`: the counting writers (`resultPath` / `resultDir`)."""

    @classmethod
    def name(cls) -> str:
        return COUNT_FORMAT

    def schema(self) -> StructType:
        return StructType()

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return CountingArrowWriter(self.options["resultpath"])

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        return CountingStreamArrowWriter(self.options["resultdir"])


def read_latencies(result_dir: Path) -> tuple[list[int], list[int]]:
    """(row timestamps, times seen) in ms from a `bench_count` stream's result files."""
    import pyarrow as pa

    stamps: list[int] = []
    seen: list[int] = []
    for path in sorted(result_dir.glob("batch-*.arrow")):
        with pa.ipc.open_file(str(path)) as reader:
            table = reader.read_all()
        stamps.extend(table.column("timestamp_ms").to_pylist())
        seen.extend(table.column("seen_ms").to_pylist())
    return stamps, seen
