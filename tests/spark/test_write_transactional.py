"""The sink with `transactional=true`: a read_committed reader polling the output while
the query runs never sees part of a micro-batch on a partition, through a task that
fails mid-micro-batch (the query fails, its transaction is left open) and the query's
restart from its checkpoint (the new driver epoch aborts it; the micro-batch is written
again under fresh producer ids), and a rerun of a micro-batch whose transaction committed
before Spark recorded it (its tasks are told so and write nothing); and through the
query's process SIGKILLed mid-micro-batch, driver and all. At the end each input record
is there exactly once.

Each input file is one micro-batch (maxFilesPerTrigger=1), so a record's id in its value
says which micro-batch wrote it. The reader reads, at every round, up to the last stable
offset of each partition it has just asked: what read_committed makes visible at that
moment, whatever a fetch's size cuts.

With `transactional=false` the reader sees the failed attempt's part of micro-batch 2 as
the task writes it, and the test fails.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_replica.client import Cluster, Consumer, ConsumerConfig
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP
from tests.spark.conftest import StoredRecord
from tests.spark.test_write_exactly_once import (  # noqa: F401 (small_arrow_batches: a fixture)
    QUERY_TIMEOUT_S,
    SINK_OPTIONS,
    InputFiles,
    assert_exactly_once,
    committed,
    fail_mid_micro_batch,
    fail_once_at,
    kill_query_mid_micro_batch,
    partly_written,
    small_arrow_batches,
    start_query,
    stop,
    through,
    wait_for,
)
from tests.support import BrokerFactory

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PARTITIONS = 3
TRANSACTIONAL = {**SINK_OPTIONS, "transactional": "true"}
READ_ROUND_TIMEOUT_S = 30.0
# The interrupted micro-batch: enough rows that part of them is written before the
# failure, few enough to keep the test short.
INTERRUPTED_ROWS = 2000
INTERRUPTED_PAD = 200


def record_id(value: bytes) -> int:
    return int(value.split(b"|")[0][1:])


@dataclass
class CommittedReader:
    """Polls the topic with read_committed in a thread of its own until stopped and
    every record is read (bounded); after each round (read up to every partition's LSO,
    asked at the round's start) it keeps how many records of each (partition,
    micro-batch) it has seen."""

    bootstrap: list[tuple[str, int]]
    topic: str
    batch_of: dict[int, int]  # record id -> micro-batch
    rounds: list[Counter[tuple[int, int]]] = field(default_factory=list)
    records: list[StoredRecord] = field(default_factory=list)
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        try:
            asyncio.run(self._read())
        except BaseException as exc:
            self.error = exc

    async def _read(self) -> None:
        cluster = Cluster(self.bootstrap)
        try:
            consumer = Consumer(cluster, ConsumerConfig(isolation_level="read_committed"))
            partitions = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(partitions)
            seen: Counter[tuple[int, int]] = Counter()
            # Once stopped (the query ended), rounds go on until every record is read:
            # the markers of the last commit may still be on their way.
            finished_by: float | None = None
            while finished_by is None or (
                sum(seen.values()) < len(self.batch_of) and time.monotonic() < finished_by
            ):
                if finished_by is None and self._stop.is_set():
                    finished_by = time.monotonic() + READ_ROUND_TIMEOUT_S
                await self._read_to_stable(consumer, partitions, seen)
                self.rounds.append(Counter(seen))
                await asyncio.sleep(0.05)
        finally:
            await cluster.close()

    async def _read_to_stable(
        self,
        consumer: Consumer,
        partitions: list[TopicPartition],
        seen: Counter[tuple[int, int]],
    ) -> None:
        stable = {
            tp: offset
            for tp, (offset, _) in (
                await consumer.list_offsets(partitions, LATEST_TIMESTAMP)
            ).items()
        }
        async with asyncio.timeout(READ_ROUND_TIMEOUT_S):
            while any(consumer.position(tp) < stable[tp] for tp in partitions):
                for fetched in await consumer.poll(max_wait_ms=100):
                    rows = fetched.records.to_pylist()
                    for row in rows:
                        seen[(fetched.tp.partition, self.batch_of[record_id(row["value"])])] += 1
                        self.records.append(
                            StoredRecord(fetched.tp.partition, -1, row["key"], row["value"], None)
                        )

    def stop(self) -> None:
        self._stop.set()


@pytest.fixture
def reader_thread() -> Iterator[list[tuple[CommittedReader, threading.Thread]]]:
    started: list[tuple[CommittedReader, threading.Thread]] = []
    yield started
    for reader, thread in started:
        reader.stop()
        thread.join(READ_ROUND_TIMEOUT_S * 2)


def start_reader(
    bootstrap: list[tuple[str, int]],
    topic: str,
    batches: list[range],
    started: list[tuple[CommittedReader, threading.Thread]],
) -> None:
    """A CommittedReader of `topic` polling in its own thread (stopped by reader_thread)."""
    batch_of = {i: batch for batch, ids in enumerate(batches) for i in ids}
    reader = CommittedReader(bootstrap, topic, batch_of)
    thread = threading.Thread(target=reader.run, daemon=True)
    started.append((reader, thread))
    thread.start()


def check_what_was_read(
    spark: SparkSession,
    started: list[tuple[CommittedReader, threading.Thread]],
    files: InputFiles,
    in_log: list[StoredRecord],
) -> None:
    """Stop the reader; at no round did it see part of a (partition, micro-batch), and
    in the end it read every input record once, while the log (`in_log`, read
    uncommitted) holds more: the aborted attempt's records."""
    ((reader, thread),) = started
    reader.stop()
    thread.join(READ_ROUND_TIMEOUT_S * 2)
    assert reader.error is None, reader.error
    final = reader.rounds[-1]
    assert sum(final.values()) == len(files.rows), "every record is read in the end"
    for number, seen in enumerate(reader.rounds):
        partial = {key: (n, final[key]) for key, n in seen.items() if n != final[key]}
        assert not partial, f"round {number}: (partition, micro-batch): (seen, all) {partial}"
    assert_exactly_once(spark, files.rows, reader.records)
    assert len(in_log) > len(reader.records), "the aborted attempt's records stay unread"


def test_a_read_committed_reader_never_sees_part_of_a_micro_batch(
    spark: SparkSession,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Any,
    tmp_path: Path,
    small_arrow_batches: None,  # noqa: F811
    reader_thread: list[tuple[CommittedReader, threading.Thread]],
) -> None:
    topics.create(topic_name, PARTITIONS, 3)
    checkpoint, markers = tmp_path / "checkpoint", tmp_path
    files = InputFiles(tmp_path / "input")
    batches = [files.add(300), files.add(300)]
    interrupted = files.add(INTERRUPTED_ROWS, INTERRUPTED_PAD)  # micro-batch 2
    batches += [interrupted, files.add(300)]
    start_reader(spark_cluster.bootstrap, topic_name, batches, reader_thread)

    transform = through(fail_once_at(interrupted[-1], markers))
    query = start_query(
        spark, files.directory, checkpoint, bootstrap_servers, topic_name, transform, TRANSACTIONAL
    )
    fail_mid_micro_batch(
        query,
        markers,
        partly_written(stored_records, spark_cluster.bootstrap, topic_name, interrupted),
    )
    assert not committed(checkpoint, 2)

    restarted = start_query(
        spark, files.directory, checkpoint, bootstrap_servers, topic_name, transform, TRANSACTIONAL
    )
    try:
        wait_for(lambda: committed(checkpoint, 3), "every micro-batch", restarted)
    finally:
        stop(restarted)
    # As if the driver died between its EndTxn(commit) and Spark's commit log: the rerun
    # of micro-batch 3, under a new driver epoch, is told it committed and writes nothing.
    (checkpoint / "commits" / "3").unlink()
    rerun = start_query(
        spark, files.directory, checkpoint, bootstrap_servers, topic_name, transform, TRANSACTIONAL
    )
    try:
        wait_for(lambda: committed(checkpoint, 3), "micro-batch 3 again", rerun)
    finally:
        stop(rerun)
    check_what_was_read(
        spark, reader_thread, files, stored_records(spark_cluster.bootstrap, topic_name)
    )


def test_a_killed_driver_leaves_its_micro_batch_unread_and_the_restart_writes_it_once(
    spark: SparkSession,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Any,
    tmp_path: Path,
    small_arrow_batches: None,  # noqa: F811
    reader_thread: list[tuple[CommittedReader, threading.Thread]],
) -> None:
    """The query's process, its driver with it, is SIGKILLed while micro-batch 1 is
    partly in the log: its transaction stays open, so read_committed readers see none of
    it; the restart's new driver epoch aborts it and writes the micro-batch again.
    Without transactions the reader would see the killed run's records, then the
    rewritten ones."""
    topics.create(topic_name, PARTITIONS, 3)
    checkpoint = tmp_path / "checkpoint"
    files = InputFiles(tmp_path / "input")
    batches = [files.add(300), files.add(INTERRUPTED_ROWS, INTERRUPTED_PAD), files.add(300)]
    start_reader(spark_cluster.bootstrap, topic_name, batches, reader_thread)

    written = partly_written(stored_records, spark_cluster.bootstrap, topic_name, batches[1])
    kill_query_mid_micro_batch(
        files, checkpoint, bootstrap_servers, topic_name, batches[1], written, TRANSACTIONAL
    )
    assert committed(checkpoint, 0)
    assert not committed(checkpoint, 1)

    restarted = start_query(
        spark, files.directory, checkpoint, bootstrap_servers, topic_name, options=TRANSACTIONAL
    )
    try:
        wait_for(lambda: committed(checkpoint, 2), "every micro-batch", restarted)
    finally:
        stop(restarted)
    check_what_was_read(
        spark, reader_thread, files, stored_records(spark_cluster.bootstrap, topic_name)
    )
