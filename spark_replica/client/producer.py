"""Producing records: batching per partition, routing to leaders, acks, retries, idempotence.

`await send(...)` adds one record to its partition's open batch (accumulator.py) and
returns as soon as the record is taken: it creates no future and no object per record,
so a loop of sends costs a few microseconds a record. Its outcome arrives through
`on_delivery(metadata, error)` if given, or through the future `send_future` returns;
a caller that needs neither learns of failures only from its own bookkeeping (as with
Kafka's fire-and-forget sends). `flush` sends everything open and waits.

Memory is bounded (Kafka's buffer.memory, buffer_pool.py): each record reserves its
size until its batch is answered, and a send that finds no room waits for it (it
awaits; the loop keeps delivering), up to `max_block_ms`, then raises
BufferExhaustedError. Waiting for a topic's metadata is the other thing a send may
await. A record it refuses (bad partition, unknown topic, closed producer) raises at
once; nothing half-taken is left behind.

Batches already built (`send_batch`, `send_arrow`) queue behind the open batch of their
partition, so a partition's records go out in the order they were given. They are the
caller's memory and do not count against buffer.memory.

Each partition has a sender (partition_sender.py) with up to
`max_in_flight_per_partition` batches in flight. A retriable error is retried until the
delivery timeout; a non-retriable one fails the batch's records. An idempotent producer
(the default: acks=all, idempotence on) numbers each partition's batches, and the leader
answers a retry of a batch it already has with the original offsets, so it never
appends a batch twice, and its retries keep the order (in_flight.py). Without
idempotence (acks=0 or 1, or turned off) a retry after a lost answer can append a batch
twice, and with more than one batch in flight a retried batch can land after a later
one, as in Kafka. Neither ever loses a record without reporting it to its callback.

Keyless records without a partition go to a sticky partition (see _Route); keyed
records go by murmur2 of the key, as Kafka's.

Ownership: a Producer lives on one event loop, and everything in it runs there. Delivery
callbacks run on that loop and must not block it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import time_ns
from types import TracebackType
from typing import Any, TypeVar

import pyarrow as pa

from spark_replica.errors import ClientClosedError, ConfigError
from spark_replica.records import BatchHeader
from spark_replica.topics import TopicPartition
from spark_replica.transport import Buffer
from spark_replica.wire.native.init_producer_id import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    InitProducerIdRequest,
)
from spark_replica.wire.native.metadata import TopicMetadata

from .accumulator import RECORD_OVERHEAD_BYTES, Callback, Headers, estimate_record_bytes
from .buffer_pool import BufferPool, exhausted_error
from .cluster import Cluster
from .partition_sender import IdentitySource, PartitionSender, ProducerBatch
from .partitioner import partition_for_key
from .producer_config import ProducerConfig

T = TypeVar("T")

logger = logging.getLogger("spark_replica.client.producer")

DeliveryCallback = Callback  # (RecordMetadata | None, BaseException | None) -> None


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 with acks=0, or for a duplicate of a batch appended long ago


class _Identities:
    """Where partition senders get the producer id and epoch they stamp on batches."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._shared: tuple[int, int] | None = None
        self._lock = asyncio.Lock()

    async def shared(self) -> tuple[int, int]:
        async with self._lock:
            if self._shared is None:
                self._shared = await self._init_producer_id()
            return self._shared

    async def replacement(self, current: tuple[int, int]) -> tuple[int, int]:
        return await self._init_producer_id(*current)

    async def _init_producer_id(
        self, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH
    ) -> tuple[int, int]:
        request = InitProducerIdRequest(producer_id=producer_id, producer_epoch=epoch)
        response = await self._cluster.send_to_any(request)
        return response.producer_id, response.producer_epoch


class _Route:
    """A topic's partition senders as of one metadata answer, and its sticky partition.

    Keyless records go to the sticky partition until `batch_size` bytes have gone there
    (Kafka's uniform sticky partitioner, KIP-794): full batches, partitions used evenly.
    """

    __slots__ = ("metadata", "senders", "sticky", "sticky_bytes")

    def __init__(self, metadata: TopicMetadata, senders: list[PartitionSender]) -> None:
        self.metadata = metadata
        self.senders = senders
        self.sticky = 0
        self.sticky_bytes = 0

    def sticky_sender(self, size_bytes: int, batch_size: int) -> PartitionSender:
        sender = self.senders[self.sticky]
        self.sticky_bytes += size_bytes
        if self.sticky_bytes >= batch_size:
            self.sticky = (self.sticky + 1) % len(self.senders)
            self.sticky_bytes = 0
        return sender


class Producer:
    """Batches records per partition and sends them to partition leaders.

    Use `await send(...)` per record (with `on_delivery`, or `send_future` for a
    future), then `flush` or `close`; or send many at once with `send_records`,
    `send_arrow` or `send_batch`. `async with Producer(...)` closes it (flushing first)
    on the way out. The Cluster is the caller's to close.
    """

    def __init__(self, cluster: Cluster, config: ProducerConfig | None = None) -> None:
        self.cluster = cluster
        self.config = config or ProducerConfig()
        self.pool = BufferPool(self.config.buffer_memory)
        self._batch_size = self.config.batch_size
        self._identities: IdentitySource = _Identities(cluster)
        self._routes: dict[str, _Route] = {}
        self._senders: dict[TopicPartition, PartitionSender] = {}
        self._connect_lock = asyncio.Lock()
        self._unfinished: set[asyncio.Future[int]] = set()
        self._closed = False
        # A transactional producer's: awaited before a record joins its partition, so
        # that the partition is in the transaction before its first batch is sent.
        self._partition_gate: Callable[[TopicPartition], Awaitable[None]] | None = None

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ per record

    async def send(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Add one record to its partition's batch; `on_delivery(metadata, error)` follows.

        Returns once the record is taken, which is at once unless buffer.memory is full
        (then it waits up to max_block_ms) or the topic's metadata is not known yet.
        The partition is `partition`, else murmur2 of the key (as Kafka), else the
        sticky one. Raises, with the record not taken: ConfigError for a partition the
        topic does not have or a value or key that is not bytes or str,
        BufferExhaustedError, the topic's error, ClientClosedError once closed.
        """
        if self._closed:
            self._check_open()
        data = value if isinstance(value, bytes) else as_bytes(value, "value")
        key_data = key if key is None or isinstance(key, bytes) else as_bytes(key, "key")
        if key_data is None and headers is None:
            size = RECORD_OVERHEAD_BYTES + len(data or b"")
        else:
            size = estimate_record_bytes(data, key_data, headers)
        if not self.pool.try_reserve(size):
            await self._wait_for_room(size)
        route = self._routes.get(topic)
        if (
            route is None
            or route.metadata is not self.cluster.topics.get(topic)
            or partition is not None
            or key_data is not None
        ):
            try:
                sender = await self._sender_for(topic, key_data, partition, size)
            except BaseException:
                self.pool.release(size)
                raise
        else:
            sender = route.sticky_sender(size, self._batch_size)
        if self._partition_gate is not None:
            try:
                await self._partition_gate(sender.tp)
            except BaseException:
                self.pool.release(size)
                raise
        timestamp = time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
        sender.append(data, key_data, timestamp, headers, size, on_delivery)

    async def _sender_for(
        self, topic: str, key: bytes | None, partition: int | None, size: int
    ) -> PartitionSender:
        """The sender of a record's partition: by number, by key, or the sticky one."""
        route = self._routes.get(topic)
        if route is None or route.metadata is not self.cluster.topics.get(topic):
            route = await self._route(topic)
        count = len(route.senders)
        if partition is not None:
            if not 0 <= partition < count:
                raise ConfigError(f"topic {topic!r} has partitions 0..{count - 1}, not {partition}")
            return route.senders[partition]
        if key is not None:
            return route.senders[partition_for_key(key, count)]
        return route.sticky_sender(size, self._batch_size)

    async def send_future(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """`send`, returning a future for the record's metadata (one object per record)."""
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        await self.send(
            topic, value, key, partition, timestamp_ms, headers, on_delivery=_resolving(future)
        )
        return future

    async def _wait_for_room(self, size: int) -> None:
        """Wait for `size` bytes of buffer.memory to be released, up to max_block_ms."""
        self.pool.check_fits(size)
        deadline = asyncio.get_running_loop().time() + self.config.max_block_ms / 1000
        if not await self.pool.reserve(size, deadline):
            raise exhausted_error(size, self.pool.limit_bytes, self.config.max_block_ms)

    async def _route(self, topic: str) -> _Route:
        """The topic's route for its current metadata, waiting for the metadata if need be."""
        metadata = self.cluster.topics.get(topic)
        if metadata is None or metadata.error_code:
            metadata = await asyncio.wait_for(
                self.cluster.ensure_topic(topic), self.config.max_block_ms / 1000
            )
        senders = [self._sender(TopicPartition(topic, p)) for p in range(len(metadata.partitions))]
        route = self._routes.get(topic)
        if route is None or len(route.senders) != len(senders):
            route = self._routes[topic] = _Route(metadata, senders)
        route.metadata = metadata
        return route

    def _sender(self, tp: TopicPartition) -> PartitionSender:
        sender = self._senders.get(tp)
        if sender is None:
            sender = self._senders[tp] = PartitionSender(
                tp, self.cluster, self.config, self._identities, self._connect_lock, self._track
            )
        return sender

    def _track(self, batch: ProducerBatch) -> None:
        """Follow a sealed batch until answered: flush waits for it, then deliver."""
        self._unfinished.add(batch.result)
        batch.result.add_done_callback(lambda result: self._finished(batch, result))

    def _finished(self, batch: ProducerBatch, result: asyncio.Future[int]) -> None:
        self._unfinished.discard(result)
        if batch.memory_bytes:
            self.pool.release(batch.memory_bytes)
        if not batch.callbacks:
            return
        error = asyncio.CancelledError() if result.cancelled() else result.exception()
        base = -1 if error is not None else result.result()
        topic, partition = batch.tp
        for index, callback in batch.callbacks:
            try:
                if error is not None:
                    callback(None, error)
                else:
                    offset = -1 if base < 0 else base + index
                    callback(RecordMetadata(topic, partition, offset), None)
            except Exception:
                logger.exception("%s: a delivery callback failed", batch.tp)

    async def flush(self) -> None:
        """Send every record given so far, open batches included, and wait for all answers.

        Failures are reported through the records' callbacks and futures, not here.
        """
        for sender in self._senders.values():
            sender.seal_open()
        if self._unfinished:
            await asyncio.wait(set(self._unfinished))

    async def close(self) -> None:
        """Flush, then refuse further sends. Safe to call twice."""
        if self._closed:
            return
        await self.flush()
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the producer is closed; create a new one to send more")

    # ------------------------------------------------------------------ batches at once

    async def send_batch(self, topic: str, partition: int, batch: Buffer) -> int:
        """Append one encoded batch; return its base offset (-1 with acks=0).

        Records sent to the partition before are sealed into a batch first, so they
        stay ahead of this one. Bytes and read-only views (what `encode_batch` returns)
        are kept as they are; a mutable buffer is copied, since the caller could change it
        before it is sent.
        """
        self._check_open()
        tp = TopicPartition(topic, partition)
        result = self._enqueue_encoded(tp, batch)
        return await result

    def _enqueue_encoded(self, tp: TopicPartition, batch: Buffer) -> asyncio.Future[int]:
        header = BatchHeader.decode(batch)
        sender = self._sender(tp)
        sender.seal_open()
        result: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        pending = ProducerBatch(tp, header.record_count, asyncio.get_running_loop().time(), result)
        pending.encoded = _unchangeable(batch)
        self._track(pending)
        sender.enqueue(pending)
        return result

    async def send_arrow(
        self, topic: str, partition: int, records: pa.RecordBatch | pa.Table
    ) -> int:
        """Append Arrow records (a `value` column, optional key/timestamp/headers) in order.

        Chunks of `batch_records` rows are sent as batches, several in flight at once;
        returns the first record's offset (-1 with acks=0 or if none were given). Each
        chunk is encoded once, when first sent, already carrying the producer's identity
        and sequence: an encoded batch given to `send_batch` is copied to be stamped.
        """
        self._check_open()
        table = records if isinstance(records, pa.Table) else pa.Table.from_batches([records])
        tp = TopicPartition(topic, partition)
        results = [
            self._enqueue_arrow(tp, chunk)
            for chunk in table.to_batches(max_chunksize=self.config.batch_records)
            if chunk.num_rows
        ]
        offsets = await _all_or_first_error(results)
        return offsets[0] if offsets else -1

    def _enqueue_arrow(self, tp: TopicPartition, records: pa.RecordBatch) -> asyncio.Future[int]:
        sender = self._sender(tp)
        sender.seal_open()
        loop = asyncio.get_running_loop()
        result: asyncio.Future[int] = loop.create_future()
        pending = ProducerBatch(tp, records.num_rows, loop.time(), result, records=records)
        self._track(pending)
        sender.enqueue(pending)
        return result

    async def send_records(
        self,
        topic: str,
        values: Sequence[bytes | str | None],
        keys: Sequence[bytes | str | None] | None = None,
        timestamps: Sequence[int | None] | None = None,
        headers: Sequence[Headers | None] | None = None,
        partition: int | None = None,
    ) -> list[RecordMetadata]:
        """Send records in order per partition, now; return each one's metadata, input order.

        The records go through the same batches as `send`, sealed at once rather than
        left to linger; the first error of any record is raised once all are answered.
        """
        self._check_open()
        await self._route(topic)
        futures = [
            await self.send_future(
                topic,
                values[i],
                None if keys is None else keys[i],
                partition,
                None if timestamps is None else timestamps[i],
                None if headers is None else headers[i],
            )
            for i in range(len(values))
        ]
        for sender in self._routes[topic].senders:
            sender.seal_open()
        return await _all_or_first_error(futures)


def _unchangeable(batch: Buffer) -> bytes | memoryview:
    if isinstance(batch, bytes) or (isinstance(batch, memoryview) and batch.readonly):
        return batch
    return bytes(batch)


async def _all_or_first_error(futures: Sequence[asyncio.Future[T]]) -> list[T]:
    """Wait for every future; raise the first one's error (by position) if any failed."""
    results = await asyncio.gather(*futures, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


def _resolving(future: asyncio.Future[Any]) -> DeliveryCallback:
    """A delivery callback that settles `future` (unless its owner cancelled it)."""

    def delivered(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(metadata)

    return delivered


def as_bytes(item: object, name: str) -> bytes | None:
    """A record's value or key as bytes (str as UTF-8); ConfigError naming it otherwise."""
    if item is None or isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, bytearray | memoryview):
        return bytes(item)
    raise ConfigError(f"a record's {name} must be bytes, str or None, not {type(item).__name__}")
