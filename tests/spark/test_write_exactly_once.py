"""Exactly-once streaming writes: a leader SIGKILLed mid-query, a task that fails once,
and a query process SIGKILLed mid-batch and restarted from its checkpoint. In each, the
sink topic must end with every input record exactly once.

Input is deterministic, as the guarantee requires: JSON files written before they are
read, one file per micro-batch (maxFilesPerTrigger=1), so a replayed micro-batch reads
the same rows. Small batches (replog.batch.max.records) and small Arrow chunks make a
task send many batches, so a failure lands between batches and the replay has batches
older than the five a broker remembers per producer to recognise.

The query-kill test runs this module as a script (`python -m ...`) in its own session,
so that SIGKILL takes the whole Spark driver down as a crash would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from tests.support import FAST_REPLICATION, BrokerFactory

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
INPUT_SCHEMA = "id long, key string, value string"
ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
SMALL_ARROW_BATCHES = "20"
QUERY_TIMEOUT_S = 180.0
SINK_OPTIONS = {"replog.batch.max.records": "10"}
# Rows of the micro-batch that is interrupted: many and long, so that the writer has
# sent part of them while the UDF holds the rest back.
BIG_FILE_ROWS = 6000
BIG_FILE_PAD = 1000
PART_WRITTEN = 200


class InputFiles:
    """JSON files part-NNN.json, one per micro-batch, each appearing whole; every row is
    remembered. Every 5th row has no key; `pad` makes values long, so that a file is
    more than Spark buffers between its stages and a writer gets its input piece by
    piece.

    Spark's file source takes new files oldest first by modification time (in
    milliseconds), in listing order among equals: files written in the same millisecond
    could become micro-batches in either order. Each file's time is set a second after
    the last one's, so part-NNN is micro-batch NNN."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.rows: list[dict[str, Any]] = []
        self.files = 0
        self._last_mtime = 0.0
        directory.mkdir(parents=True, exist_ok=True)

    def add(self, count: int, pad: int = 0) -> range:
        """Write one file of `count` new rows; return their ids."""
        ids = range(len(self.rows), len(self.rows) + count)
        rows = [
            {
                "id": i,
                "key": None if i % 5 == 0 else f"k{i % 23}",
                "value": f"v{i}|{'x' * pad}" if pad else f"v{i}",
            }
            for i in ids
        ]
        staging = self.directory / f".part-{self.files:03d}.tmp"
        staging.write_text("".join(json.dumps(row) + "\n" for row in rows))
        self._last_mtime = max(time.time(), self._last_mtime + 1.0)
        os.utime(staging, (self._last_mtime, self._last_mtime))
        staging.rename(self.directory / f"part-{self.files:03d}.json")
        self.files += 1
        self.rows += rows
        return ids


def start_query(
    spark: SparkSession,
    input_dir: Path,
    checkpoint: Path,
    bootstrap: str,
    topic: str,
    transform: Callable[[DataFrame], DataFrame] = lambda df: df,
    options: Mapping[str, str] = SINK_OPTIONS,
) -> StreamingQuery:
    rows = (
        spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(input_dir))
    )
    return (
        transform(rows)
        .select("key", "value")
        .writeStream.format("replog")
        .option("replog.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )


def wait_for(
    condition: Callable[[], bool],
    what: str,
    query: StreamingQuery | None = None,
    timeout_s: float = QUERY_TIMEOUT_S,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s:.0f} s")
        time.sleep(0.25)


def committed(checkpoint: Path, batch_id: int) -> bool:
    return (checkpoint / "commits" / str(batch_id)).exists()


def stored_ids(stored: list[Any]) -> Counter[int]:
    return Counter(int(record.value.split(b"|")[0][1:]) for record in stored)


def assert_exactly_once(
    spark: SparkSession, expected: list[dict[str, Any]], stored: list[Any]
) -> None:
    """Every input row is in the topic once: counts, then content with chispa."""
    duplicated = {i: n for i, n in stored_ids(stored).items() if n > 1}
    assert not duplicated, f"records written more than once: {dict(list(duplicated.items())[:10])}"
    assert len(stored) == len(expected)
    schema = "key binary, value binary"
    want = spark.createDataFrame(
        [(None if r["key"] is None else r["key"].encode(), r["value"].encode()) for r in expected],
        schema,
    )
    got = spark.createDataFrame([(r.key, r.value) for r in stored], schema)
    assert_df_equality(want, got, ignore_row_order=True)


@pytest.fixture
def small_arrow_batches(spark: SparkSession) -> Iterator[None]:
    """Arrow chunks of a few rows, so a writer sees its input arrive piece by piece."""
    before = spark.conf.get(ARROW_BATCH_CONF)
    spark.conf.set(ARROW_BATCH_CONF, SMALL_ARROW_BATCHES)
    try:
        yield
    finally:
        spark.conf.set(ARROW_BATCH_CONF, before)


def stop(query: StreamingQuery) -> None:
    if query.isActive:
        query.stop()


def test_leader_killed_during_streaming_write(
    spark: SparkSession,
    brokers: BrokerFactory,
    topic_tools: Any,
    topic_name: str,
    stored_records: Callable[..., list[Any]],
    tmp_path: Path,
) -> None:
    # When the killed leader is also the controller, the partitions it follows keep it in
    # their ISR until replica.lag.time.max.ms passes, and acks=all writes wait that long.
    for broker_id in (1, 2, 3):
        brokers.start(broker_id, **FAST_REPLICATION)
    tools = topic_tools(brokers.bootstrap)
    tools.create(topic_name, 3, 3, **{"min.insync.replicas": "2"})
    bootstrap = ",".join(f"{host}:{port}" for host, port in brokers.bootstrap)
    checkpoint = tmp_path / "checkpoint"
    files = InputFiles(tmp_path / "input")
    for _ in range(3):
        files.add(400)
    query = start_query(
        spark,
        files.directory,
        checkpoint,
        bootstrap,
        topic_name,
        lambda df: df.repartition(2, "id"),  # two write tasks, two producer ids per batch
    )
    try:
        wait_for(lambda: committed(checkpoint, 0), "first micro-batch", query)
        for _ in range(5):
            files.add(400)
        wait_for(lambda: committed(checkpoint, 2), "third micro-batch", query)
        leader = tools.describe(topic_name)[0].leader
        brokers.brokers[leader].kill()
        wait_for(lambda: committed(checkpoint, 7), "every micro-batch", query)
        assert query.isActive, "the query kept running through the leader's death"
    finally:
        stop(query)
    live = [(b.host, b.port) for b in brokers.brokers.values() if b.process is not None]
    stored = stored_records(live, topic_name)
    assert_exactly_once(spark, files.rows, stored)
    keyless = {record.partition for record in stored if record.key is None}
    assert keyless == {0, 1, 2}, "two tasks' keyless runs move on with each micro-batch"


ValueCheck = Callable[[int, str], str]


def through(check: ValueCheck) -> Callable[[DataFrame], DataFrame]:
    """Pass every value through a Python UDF, which may stop the task at a chosen row."""
    checked = F.udf(check, "string")
    return lambda df: df.select("key", checked(F.col("id"), F.col("value")).alias("value"))


def fail_once_at(failing_id: int, markers: Path) -> ValueCheck:
    """The first time the UDF meets `failing_id` it waits for the test's go-ahead (given
    once part of the task's output is in the topic) and then raises."""

    def check(row_id: int, value: str) -> str:
        failed = markers / "failed"
        if row_id == failing_id and not failed.exists():
            (markers / "reached").touch()
            deadline = time.monotonic() + QUERY_TIMEOUT_S
            while not (markers / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            failed.touch()
            raise RuntimeError(f"planned failure at row {row_id}")
        return value

    return check


def block_at(blocking_id: int, markers: Path) -> ValueCheck:
    """The UDF stops at `blocking_id` until the process is killed (a bounded wait)."""

    def check(row_id: int, value: str) -> str:
        if row_id == blocking_id:
            (markers / "reached").touch()
            time.sleep(QUERY_TIMEOUT_S)
            raise RuntimeError("the test did not kill the query")
        return value

    return check


def partly_written(
    stored_records: Callable[..., list[Any]],
    bootstrap: list[tuple[str, int]],
    topic: str,
    ids: range,
) -> Callable[[], bool]:
    """True once a good part of `ids` is in the topic (the task stopped before the last)."""

    def check() -> bool:
        stored = stored_ids(stored_records(bootstrap, topic))
        return sum(stored[i] for i in ids) >= PART_WRITTEN

    return check


def fail_mid_micro_batch(query: StreamingQuery, markers: Path, written: Callable[[], bool]) -> None:
    """Let a query running `fail_once_at` reach its failing row, wait until `written`
    (part of the micro-batch is in the topic), then let the task fail and the query end
    with it."""
    try:
        wait_for(lambda: (markers / "reached").exists(), "the failing row", query)
        wait_for(written, "part of the failing micro-batch in the topic", query)
        (markers / "go").touch()
        with pytest.raises(StreamingQueryException, match="planned failure"):
            query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        stop(query)


def test_task_failing_once_then_restart_writes_each_record_once(
    spark: SparkSession,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Callable[..., list[Any]],
    tmp_path: Path,
    small_arrow_batches: None,
) -> None:
    topics.create(topic_name, 3)
    checkpoint, markers = tmp_path / "checkpoint", tmp_path
    files = InputFiles(tmp_path / "input")
    files.add(400)
    files.add(400)
    interrupted = files.add(BIG_FILE_ROWS, BIG_FILE_PAD)  # micro-batch 2
    files.add(400)
    transform = through(fail_once_at(interrupted[-1], markers))
    query = start_query(
        spark, files.directory, checkpoint, bootstrap_servers, topic_name, transform
    )
    fail_mid_micro_batch(
        query,
        markers,
        partly_written(stored_records, spark_cluster.bootstrap, topic_name, interrupted),
    )
    assert not committed(checkpoint, 2)

    restarted = start_query(
        spark, files.directory, checkpoint, bootstrap_servers, topic_name, transform
    )
    try:
        wait_for(lambda: committed(checkpoint, 3), "every micro-batch", restarted)
    finally:
        stop(restarted)
    assert_exactly_once(spark, files.rows, stored_records(spark_cluster.bootstrap, topic_name))


def run_query_until_killed(arguments: dict[str, Any]) -> None:
    """The body of the query process (see __main__ below)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config(ARROW_BATCH_CONF, SMALL_ARROW_BATCHES)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    query = start_query(
        spark,
        Path(arguments["input"]),
        Path(arguments["checkpoint"]),
        arguments["bootstrap"],
        arguments["topic"],
        through(block_at(arguments["blocking_id"], Path(arguments["markers"]))),
        arguments["options"],
    )
    query.awaitTermination(QUERY_TIMEOUT_S)


def live_session_processes(session_id: int) -> list[int]:
    """PIDs of the live (not zombie) processes of a session: the query process and all
    it started, Spark's Python daemon and workers included (they change process group,
    not session)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _parent, _group, session = stat[stat.rindex(")") + 2 :].split()[:4]
        if int(session) == session_id and state != "Z":
            found.append(int(entry.name))
    return found


def kill_query_process(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGKILL the query process and everything in its session; wait until all are gone."""
    deadline = time.monotonic() + timeout_s
    while members := live_session_processes(process.pid):
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.poll()
        if time.monotonic() > deadline:
            raise AssertionError(f"processes {members} outlived SIGKILL for {timeout_s:.0f} s")
        time.sleep(0.1)
    process.wait(timeout=timeout_s)


def kill_query_mid_micro_batch(
    files: InputFiles,
    checkpoint: Path,
    bootstrap: str,
    topic: str,
    interrupted: range,
    written: Callable[[], bool],
    options: Mapping[str, str] = SINK_OPTIONS,
) -> None:
    """Run the query in a process of its own (this module as a script) until the UDF
    holds back the last row of `interrupted` and `written` holds (part of that
    micro-batch is in the topic), then SIGKILL the process and all it started."""
    markers = checkpoint.parent / "kill-markers"
    markers.mkdir()
    arguments = {
        "input": str(files.directory),
        "checkpoint": str(checkpoint),
        "bootstrap": bootstrap,
        "topic": topic,
        "markers": str(markers),
        "blocking_id": interrupted[-1],
        "options": dict(options),
    }
    log_path = markers / "query.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.test_write_exactly_once", json.dumps(arguments)],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: (markers / "reached").exists() or process.poll() is not None,
            "the blocking row",
        )
        assert process.poll() is None, log_path.read_text()[-3000:]
        wait_for(written, "part of the interrupted micro-batch in the topic")
    finally:
        kill_query_process(process)


def test_query_killed_mid_batch_and_restarted_writes_each_record_once(
    spark: SparkSession,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Callable[..., list[Any]],
    tmp_path: Path,
    small_arrow_batches: None,
) -> None:
    topics.create(topic_name, 3)
    checkpoint = tmp_path / "checkpoint"
    files = InputFiles(tmp_path / "input")
    files.add(400)
    interrupted = files.add(BIG_FILE_ROWS, BIG_FILE_PAD)  # micro-batch 1
    files.add(400)
    written = partly_written(stored_records, spark_cluster.bootstrap, topic_name, interrupted)
    kill_query_mid_micro_batch(
        files, checkpoint, bootstrap_servers, topic_name, interrupted, written
    )
    assert committed(checkpoint, 0)
    assert not committed(checkpoint, 1)

    restarted = start_query(
        spark,
        files.directory,
        checkpoint,
        bootstrap_servers,
        topic_name,
        through(lambda _, value: value),
    )
    try:
        wait_for(lambda: committed(checkpoint, 2), "every micro-batch", restarted)
    finally:
        stop(restarted)
    assert_exactly_once(spark, files.rows, stored_records(spark_cluster.bootstrap, topic_name))


if __name__ == "__main__":
    run_query_until_killed(json.loads(sys.argv[1]))
