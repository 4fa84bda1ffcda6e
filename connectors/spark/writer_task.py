"""One write task: Spark's Arrow input in, replog batches out.

The task reads its input chunk by chunk (in a helper thread, since Spark's iterator
blocks on a socket), routes each chunk with Arrow compute, cuts each topic-partition's
records into batches at record-determined boundaries, and sends them in input order
on an asyncio loop, with at most `buffer.memory` bytes given but not yet acknowledged,
so a slow partition slows the input rather than filling memory (they wait in the
client's BufferPool, as the client's producer does):

- a batch write (and a stream write with acks other than all) goes through the
  client's producer, which gets its identity from a broker and keeps several batches
  per partition in flight;
- an exactly-once stream write goes through one PartitionSender per partition, on
  the client's SequencedProducer with the task's derived identity (sink_identity,
  sink_sender); in transactional mode its batches are transactional, and each
  partition's first one waits for the task's registration there (sink_transaction). A
  micro-batch the coordinator says was committed before is not written at all.

The task returns only when every batch is acknowledged; any failure (a non-retriable
error, or retries exhausted at the delivery timeout) fails the task with the error.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Iterator

import pyarrow as pa

from connectors.spark.sink_batching import BatchCutter
from connectors.spark.sink_identity import ProducerIdentity
from connectors.spark.sink_options import ProducerSettings, SinkOptions
from connectors.spark.sink_routing import Router, sink_payload
from connectors.spark.sink_sender import PartitionSender
from connectors.spark.sink_transaction import SinkTransaction, TaskRegistration
from spark_replica.client import (
    ACKS_ALL,
    BufferPool,
    Cluster,
    Producer,
    RetryPolicy,
    SequencedProducer,
    parse_bootstrap,
)
from spark_replica.errors import UnknownTopicOrPartitionError
from spark_replica.topics import TopicPartition

log = logging.getLogger(__name__)


class BatchSender:
    """Hands batches to the producer in order and bounds the bytes not yet acknowledged.

    The producer keeps each partition's batches in the order they are given (several in
    flight, retried in order), so this only has to give them in order and wait when
    `buffer_bytes` are outstanding. A failed batch fails the task: the next `submit`
    raises, and so does `close`, with the error of the earliest batch that failed.
    """

    def __init__(self, producer: Producer, buffer_bytes: int) -> None:
        self._producer = producer
        self._pool = BufferPool(buffer_bytes)
        self._outstanding: deque[asyncio.Task[int]] = deque()
        self._failed = False

    def _raise_if_failed(self) -> None:
        while self._outstanding and self._outstanding[0].done():
            self._outstanding.popleft().result()  # raises the batch's error, if any
        if self._failed:
            for task in self._outstanding:
                if task.done():
                    task.result()

    async def submit(self, tp: TopicPartition, records: pa.RecordBatch) -> None:
        """Give one batch to the producer; wait while too much is unacknowledged.

        The producer encodes it when it first sends it, stamped with its identity and
        sequence as it is written: encoding it here would mean copying it to stamp it.
        """
        size = unacknowledged_share(self._pool, records.nbytes)
        await self._pool.reserve(size, check=self._raise_if_failed)
        # A task's first step runs in creation order, and send_arrow queues the batch
        # in its first step: batches reach each partition's queue in submission order.
        task = asyncio.ensure_future(self._producer.send_arrow(tp.topic, tp.partition, records))
        task.add_done_callback(lambda done: self._answer(done, size))
        self._outstanding.append(task)

    def _answer(self, task: asyncio.Task[int], size: int) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._failed = True
        self._pool.release(size)

    async def close(self) -> None:
        """Wait until every batch is answered; raise the earliest failure."""
        await asyncio.gather(*self._outstanding, return_exceptions=True)
        self._raise_if_failed()
        await self._producer.close()

    async def abort(self) -> None:
        for task in self._outstanding:
            task.cancel()
        await asyncio.gather(*self._outstanding, return_exceptions=True)


class PartitionSenders:
    """Streaming: one exactly-once sender per partition, fed in order through a queue.

    Same contract as BatchSender: `submit` waits while `buffer_bytes` are queued or in
    flight, and raises once any partition has failed; `close` waits for everything.
    With a `registration` (transactional mode) each partition's sender registers before
    its first batch; once the coordinator answers that the micro-batch was committed
    before, `already_committed` is set and no sender writes anything more.
    """

    def __init__(
        self,
        cluster: Cluster,
        identity: ProducerIdentity,
        settings: ProducerSettings,
        registration: TaskRegistration | None = None,
    ) -> None:
        self._producer = SequencedProducer(
            cluster,
            identity.producer_id,
            identity.epoch,
            acks=ACKS_ALL,
            request_timeout_ms=settings.request_timeout_ms,
            delivery_timeout_ms=settings.delivery_timeout_ms,
            compression=settings.compression_type,
            policy=RetryPolicy.from_ms(settings.retry_backoff_ms),
            transactional_id=(
                registration.transaction.transactional_id if registration is not None else None
            ),
        )
        self._registration = registration
        self.already_committed = False
        self._identity = identity
        self._settings = settings
        self._queues: dict[TopicPartition, asyncio.Queue[pa.RecordBatch | None]] = {}
        self._senders: list[asyncio.Task[None]] = []
        self._pool = BufferPool(settings.buffer_memory)
        self._error: BaseException | None = None

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    async def submit(self, tp: TopicPartition, records: pa.RecordBatch) -> None:
        await self._pool.reserve(
            unacknowledged_share(self._pool, records.nbytes), check=self._raise_if_failed
        )
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = asyncio.Queue()
            sender = PartitionSender(self._producer, tp, self._identity)
            self._senders.append(asyncio.create_task(self._send_all(sender, queue)))
        queue.put_nowait(records)

    async def _send_all(
        self, sender: PartitionSender, queue: asyncio.Queue[pa.RecordBatch | None]
    ) -> None:
        registered = self._registration is None
        while (records := await queue.get()) is not None:
            try:
                if not registered and not self.already_committed:
                    assert self._registration is not None
                    self.already_committed = await self._registration.register(sender.tp)
                    registered = True
                if not self.already_committed:
                    await sender.send(records)
            except Exception as exc:
                self._error = self._error or exc
                self._pool.interrupt()
                return
            self._pool.release(unacknowledged_share(self._pool, records.nbytes))

    async def close(self) -> None:
        for queue in self._queues.values():
            queue.put_nowait(None)
        await asyncio.gather(*self._senders)
        self._raise_if_failed()

    async def abort(self) -> None:
        for sender in self._senders:
            sender.cancel()
        await asyncio.gather(*self._senders, return_exceptions=True)


def unacknowledged_share(pool: BufferPool, size: int) -> int:
    """What a batch of `size` bytes reserves in the task's buffer.memory: its size, or
    the whole buffer for a batch larger than that (let through only alone)."""
    return min(size, pool.limit_bytes)


class WriteTask:
    """The state of one task's write: its producer, router, cutters and counts."""

    def __init__(
        self,
        options: SinkOptions,
        identity: ProducerIdentity | None,
        task_partition: int,
        transaction: SinkTransaction | None = None,
    ) -> None:
        self.options = options
        settings = options.producer
        config = settings.producer_config()
        self.cluster = Cluster(
            parse_bootstrap(options.servers),
            client_id="replog-spark-sink",
            security=options.security,
        )
        self.exactly_once = identity is not None and config.idempotent
        self.senders: BatchSender | PartitionSenders
        if identity is not None and self.exactly_once:
            registration = None
            if transaction is not None:
                registration = TaskRegistration(self.cluster, options, transaction, identity)
            self.senders = PartitionSenders(self.cluster, identity, settings, registration)
        else:
            self.senders = BatchSender(Producer(self.cluster, config), settings.buffer_memory)
        # Keyless runs start at the task's partition, moved on by one per micro-batch,
        # so that small micro-batches do not all put their keyless records in the same
        # partitions; a replay has the same batch id, so it places them the same way.
        keyless_start = task_partition + (identity.micro_batch if identity is not None else 0)
        self.router = Router(options.topic, keyless_start, options.producer.batch_size)
        self.cutters: dict[TopicPartition, BatchCutter] = {}
        self.partition_counts: dict[str, int] = {}
        self.records: Counter[tuple[str, int]] = Counter()

    async def _partition_count(self, topic: str) -> int:
        """The topic's partition count, looked up once per task so routing stays fixed."""
        if topic not in self.partition_counts:
            try:
                metadata = await self.cluster.ensure_topic(topic)
            except UnknownTopicOrPartitionError as exc:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} does not exist and the sink does not create topics: "
                    f"create it first (replog topics create {topic} --partitions N "
                    "--replication-factor 3)"
                ) from exc
            self.partition_counts[topic] = len(metadata.partitions)
        return self.partition_counts[topic]

    async def add(self, chunk: pa.RecordBatch) -> None:
        if chunk.num_rows == 0:
            return
        columns = self.options.columns
        if self.options.avro is not None:
            index = chunk.schema.get_field_index("value")
            chunk = chunk.set_column(index, "value", self.options.avro.encode(chunk.column(index)))
        payload = sink_payload(chunk, columns.key, columns.headers)
        topics = self.router.topics(chunk)
        counts = {name: await self._partition_count(name) for name in topics.names}
        for routed in self.router.route(chunk, payload, topics, counts):
            tp = TopicPartition(routed.topic, routed.partition)
            cutter = self.cutters.get(tp)
            if cutter is None:
                settings = self.options.producer
                cutter = BatchCutter(
                    settings.batch_size, settings.batch_max_records, self.exactly_once
                )
                self.cutters[tp] = cutter
            for batch in cutter.add(routed.records, routed.sizes):
                await self._send(tp, batch)

    async def _send(self, tp: TopicPartition, records: pa.RecordBatch) -> None:
        self.records[(tp.topic, tp.partition)] += records.num_rows
        await self.senders.submit(tp, records)

    async def finish(self) -> None:
        for tp, cutter in self.cutters.items():
            for batch in cutter.finish():
                await self._send(tp, batch)
        await self.senders.close()

    def written(self) -> dict[tuple[str, int], int]:
        """The records written per partition: none if the micro-batch was committed
        before (transactional mode), whose records are all there already."""
        if isinstance(self.senders, PartitionSenders) and self.senders.already_committed:
            return {}
        return dict(self.records)


def write_task(
    chunks: Iterator[pa.RecordBatch],
    options: SinkOptions,
    identity: ProducerIdentity | None,
    task_partition: int,
    transaction: SinkTransaction | None = None,
) -> dict[tuple[str, int], int]:
    """Write one task's input; return the records written per (topic, partition)."""

    async def run() -> dict[tuple[str, int], int]:
        task = WriteTask(options, identity, task_partition, transaction)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                await task.add(chunk)
            await task.finish()
        except BaseException:
            await task.senders.abort()
            raise
        finally:
            await task.cluster.close()
        return task.written()

    written = asyncio.run(run())
    log.info(
        "task %d wrote %d records to %d partitions",
        task_partition,
        sum(written.values()),
        len(written),
    )
    return written
