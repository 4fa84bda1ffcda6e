"""Producing records: batching per partition, routing to leaders, acks, retries, idempotence.

`send` adds one record to its partition's open batch (accumulator.py) and returns a
future for its offset; a batch goes when full (`batch_size` bytes, `batch_records`
records) or after `linger_ms`, and `flush` sends everything open and waits. Batches
already built (`send_batch`, `send_arrow`) queue behind the open batch of their
partition, so a partition's records go out in the order they were given.

Each partition has a sender (partition_sender.py) with up to
`max_in_flight_per_partition` batches in flight. A retriable error is retried after a
backoff until the delivery timeout; a non-retriable one fails the batch's records.
An idempotent producer (the default: acks=all, idempotence on) numbers each partition's
batches, and the leader answers a retry of a batch it already has with the original
offsets, so it never appends a batch twice, and its retries keep the order
(in_flight.py). Without idempotence (acks=0 or 1, or turned off) a retry after a lost
answer can append a batch twice, and with more than one batch in flight a retried batch
can land after a later one, as in Kafka. Neither ever loses a record without failing
its future.

The identity of an idempotent producer comes from InitProducerId, or is given
(`identity=(producer_id, epoch)`): the Spark sink derives one per query and replays a
failed task's batches with it, numbered from 0 again, and the leader skips every batch
it already has (DUPLICATE_SEQUENCE_NUMBER for old ones, reported at offset -1).

Ownership: a Producer lives on one event loop, and everything in it runs there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

import pyarrow as pa

from spark_replica.errors import ConfigError, ReplogError
from spark_replica.protocol.init_producer_id import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    InitProducerIdRequest,
)
from spark_replica.protocol.produce import ACKS_ALL, ACKS_LEADER, ACKS_NONE
from spark_replica.records import BatchHeader, encode_batch, now_ms, parse_compression
from spark_replica.topics import TopicPartition
from spark_replica.transport import Buffer

from .accumulator import RecordAccumulator, estimate_record_bytes
from .cluster import Cluster
from .in_flight import MAX_IDEMPOTENT_IN_FLIGHT
from .partition_sender import PartitionSender, PendingRecord, ProducerBatch
from .partitioner import RoundRobin, partition_for_key

T = TypeVar("T")

MAX_PRODUCER_ID = 2**63 - 1
MAX_PRODUCER_EPOCH = 2**15 - 1

ACKS_BY_NAME = {"0": ACKS_NONE, "1": ACKS_LEADER, "all": ACKS_ALL, "-1": ACKS_ALL}

Headers = list[tuple[str, bytes | None]]
DeliveryCallback = Callable[["RecordMetadata | None", "BaseException | None"], None]


def parse_acks(value: str | int) -> int:
    acks = ACKS_BY_NAME.get(str(value).strip().lower())
    if acks is None:
        raise ConfigError(f"acks={value!r}: use 0, 1 or all")
    return acks


@dataclass(frozen=True)
class ProducerConfig:
    """How a Producer sends; the defaults neither lose, duplicate nor reorder records.

    As Kafka's producers since 3.0: acks=all and idempotence, with up to 5 batches in
    flight per partition whose retries keep their order. A caller who wants acks=1 or
    acks=0 says so, and then gets no idempotence unless it asks for it (it cannot:
    idempotence needs acks=all).
    """

    acks: int = ACKS_ALL
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    retry_backoff_ms: int = 100
    batch_records: int = 10_000
    # Estimated uncompressed payload bytes per batch; well below the broker's 16 MiB limit.
    batch_size: int = 1_000_000
    linger_ms: int = 5
    compression: str = "none"
    # Kafka's max.in.flight.requests.per.connection, per partition here.
    max_in_flight_per_partition: int = 5
    # None: idempotent exactly when acks=all (so by default), as Kafka's producers.
    enable_idempotence: bool | None = None

    @property
    def idempotent(self) -> bool:
        if self.enable_idempotence is None:
            return self.acks == ACKS_ALL
        return self.enable_idempotence

    def __post_init__(self) -> None:
        if self.enable_idempotence and self.acks != ACKS_ALL:
            raise ConfigError("enable_idempotence needs acks=all")
        if self.acks not in (ACKS_NONE, ACKS_LEADER, ACKS_ALL):
            raise ConfigError(f"acks={self.acks}: use 0, 1 or -1 (all)")
        positive = ("request_timeout_ms", "delivery_timeout_ms", "batch_records", "batch_size")
        for name in (*positive, "max_in_flight_per_partition"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        for name in ("retry_backoff_ms", "linger_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 or more, not {getattr(self, name)}")
        if self.idempotent and self.max_in_flight_per_partition > MAX_IDEMPOTENT_IN_FLIGHT:
            raise ConfigError(
                f"max_in_flight_per_partition={self.max_in_flight_per_partition}: an "
                f"idempotent producer allows at most {MAX_IDEMPOTENT_IN_FLIGHT}"
            )
        object.__setattr__(self, "compression", parse_compression(self.compression))


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 with acks=0, or for a duplicate of a batch appended long ago


class _Identities:
    """Where partition senders get the producer id and epoch they stamp on batches."""

    def __init__(self, cluster: Cluster, explicit: tuple[int, int] | None) -> None:
        self._cluster = cluster
        self._explicit = explicit
        self._shared = explicit
        self._lock = asyncio.Lock()

    async def shared(self) -> tuple[int, int]:
        async with self._lock:
            if self._shared is None:
                self._shared = await self._init_producer_id()
            return self._shared

    async def replacement(self, current: tuple[int, int]) -> tuple[int, int] | None:
        if self._explicit is not None:
            return None
        return await self._init_producer_id(*current)

    async def _init_producer_id(
        self, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH
    ) -> tuple[int, int]:
        request = InitProducerIdRequest(producer_id=producer_id, producer_epoch=epoch)
        response = await self._cluster.send_to_any(request)
        return response.producer_id, response.producer_epoch


def _check_identity(identity: tuple[int, int], config: ProducerConfig) -> tuple[int, int]:
    if not config.idempotent:
        raise ConfigError("identity needs an idempotent producer (acks=all, idempotence on)")
    producer_id, epoch = identity
    if not 0 <= producer_id <= MAX_PRODUCER_ID:
        raise ConfigError(f"identity producer id {producer_id} is not in 0..2**63-1")
    if not 0 <= epoch <= MAX_PRODUCER_EPOCH:
        raise ConfigError(f"identity epoch {epoch} is not in 0..{MAX_PRODUCER_EPOCH}")
    return producer_id, epoch


class Producer:
    """Batches records per partition and sends them to partition leaders.

    Use `send` per record (await its future, or pass `on_delivery`), then `flush` or
    `close`; or send many at once with `send_records`, `send_arrow` or `send_batch`.
    `async with Producer(...)` closes it (flushing first) on the way out. The Cluster
    is the caller's to close.
    """

    def __init__(
        self,
        cluster: Cluster,
        config: ProducerConfig | None = None,
        *,
        identity: tuple[int, int] | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config or ProducerConfig()
        explicit = None if identity is None else _check_identity(identity, self.config)
        self._identities = _Identities(cluster, explicit)
        self._accumulator: RecordAccumulator[PendingRecord] = RecordAccumulator(
            self.config.batch_size, self.config.batch_records, self.config.linger_ms / 1000
        )
        self._round_robin = RoundRobin()
        self._senders: dict[TopicPartition, PartitionSender] = {}
        self._connect_lock = asyncio.Lock()
        self._unfinished: set[asyncio.Future[int]] = set()
        self._awaiting_metadata: dict[str, list[tuple[PendingRecord, int | None]]] = {}
        self._metadata_tasks: set[asyncio.Task[None]] = set()
        self._linger_task: asyncio.Task[None] | None = None
        self._closed = False

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

    def send(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Add one record to its partition's batch; the future gets its offset.

        The partition is `partition`, else murmur2 of the key (as Kafka), else the next
        one round-robin. `on_delivery(metadata, error)` is called when the future is
        done, with one of the two set. Errors, a bad partition number included, are
        reported through the future; only a closed producer or a value or key that is
        not bytes or str raises here.
        """
        self._check_open()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RecordMetadata] = loop.create_future()
        if on_delivery is not None:
            future.add_done_callback(_calling(on_delivery))
        record = PendingRecord(
            _to_bytes(value, "value"),
            _to_bytes(key, "key"),
            now_ms() if timestamp_ms is None else timestamp_ms,
            headers,
            future,
            loop.time(),
        )
        waiting = self._awaiting_metadata.get(topic)
        metadata = self.cluster.topics.get(topic)
        if waiting is not None:
            waiting.append((record, partition))
        elif metadata is None or metadata.error_code:
            self._awaiting_metadata[topic] = [(record, partition)]
            task = asyncio.create_task(self._resolve_topic(topic))
            self._metadata_tasks.add(task)
            task.add_done_callback(self._metadata_tasks.discard)
        else:
            self._route(topic, len(metadata.partitions), record, partition)
        return future

    async def _resolve_topic(self, topic: str) -> None:
        """Wait for a topic's metadata, then route the records that waited for it, in order."""
        try:
            metadata = await self.cluster.ensure_topic(topic)
        except ReplogError as exc:
            for record, _ in self._awaiting_metadata.pop(topic, []):
                if not record.future.done():
                    record.future.set_exception(exc)
            return
        for record, partition in self._awaiting_metadata.pop(topic, []):
            self._route(topic, len(metadata.partitions), record, partition)

    def _route(self, topic: str, count: int, record: PendingRecord, partition: int | None) -> None:
        if partition is not None and not 0 <= partition < count:
            record.future.set_exception(
                ConfigError(f"topic {topic!r} has partitions 0..{count - 1}, not {partition}")
            )
            return
        if partition is None:
            if record.key is not None:
                partition = partition_for_key(record.key, count)
            else:
                partition = self._round_robin.next_partition(count)
        tp = TopicPartition(topic, partition)
        size = estimate_record_bytes(record.value, record.key, record.headers)
        now = asyncio.get_running_loop().time()
        for sealed in self._accumulator.append(tp, record, size, now):
            self._enqueue_records(tp, sealed)
        if self._linger_task is None and len(self._accumulator):
            self._linger_task = asyncio.create_task(self._linger())

    async def _linger(self) -> None:
        """Seal each open batch once it has waited linger_ms; end when none is open."""
        loop = asyncio.get_running_loop()
        try:
            while (expiry := self._accumulator.next_expiry()) is not None:
                delay = expiry - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                    continue
                for tp, records in self._accumulator.seal_expired(loop.time()):
                    self._enqueue_records(tp, records)
        finally:
            self._linger_task = None

    def _enqueue_records(self, tp: TopicPartition, records: list[PendingRecord]) -> None:
        batch = self._new_batch(tp, len(records), records[0].appended_at)
        batch.records = records

        def deliver(result: asyncio.Future[int]) -> None:
            error = None if result.cancelled() else result.exception()
            for n, record in enumerate(records):
                if record.future.done():
                    continue
                if error is not None:
                    record.future.set_exception(error)
                elif result.cancelled():
                    record.future.cancel()
                else:
                    base = result.result()
                    offset = -1 if base < 0 else base + n
                    record.future.set_result(RecordMetadata(tp.topic, tp.partition, offset))

        batch.result.add_done_callback(deliver)
        self._sender(tp).enqueue(batch)

    def _new_batch(self, tp: TopicPartition, record_count: int, created_at: float) -> ProducerBatch:
        result: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._unfinished.add(result)
        result.add_done_callback(self._unfinished.discard)
        return ProducerBatch(tp, record_count, created_at, result)

    def _sender(self, tp: TopicPartition) -> PartitionSender:
        sender = self._senders.get(tp)
        if sender is None:
            sender = self._senders[tp] = PartitionSender(
                tp, self.cluster, self.config, self._identities, self._connect_lock
            )
        return sender

    async def flush(self) -> None:
        """Send every record given so far, open batches included, and wait for all answers.

        Failures are reported through the records' futures and callbacks, not here.
        """
        if self._metadata_tasks:
            await asyncio.wait(set(self._metadata_tasks))
        for tp, records in self._accumulator.seal_all():
            self._enqueue_records(tp, records)
        if self._unfinished:
            await asyncio.wait(set(self._unfinished))

    async def close(self) -> None:
        """Flush, then refuse further sends. Safe to call twice."""
        if self._closed:
            return
        await self.flush()
        self._closed = True
        if self._linger_task is not None:
            self._linger_task.cancel()
            # wait(), not a suppressed await: a cancellation of *this* task must not be
            # swallowed along with the linger task's own.
            await asyncio.wait({self._linger_task})

    def _check_open(self) -> None:
        if self._closed:
            raise ReplogError("the producer is closed; create a new one to send more")

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
        open_records = self._accumulator.seal(tp)
        if open_records:
            self._enqueue_records(tp, open_records)
        pending = self._new_batch(tp, header.record_count, asyncio.get_running_loop().time())
        pending.encoded = _unchangeable(batch)
        self._sender(tp).enqueue(pending)
        return pending.result

    async def send_arrow(
        self, topic: str, partition: int, records: pa.RecordBatch | pa.Table
    ) -> int:
        """Append Arrow records (a `value` column, optional key/timestamp/headers) in order.

        Chunks of `batch_records` rows are sent as batches, several in flight at once;
        returns the first record's offset (-1 with acks=0 or if none were given).
        """
        self._check_open()
        table = records if isinstance(records, pa.Table) else pa.Table.from_batches([records])
        tp = TopicPartition(topic, partition)
        results = [
            self._enqueue_encoded(tp, encode_batch(chunk, compression=self.config.compression))
            for chunk in table.to_batches(max_chunksize=self.config.batch_records)
            if chunk.num_rows
        ]
        offsets = await _all_or_first_error(results)
        return offsets[0] if offsets else -1

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
        metadata = await self.cluster.ensure_topic(topic)
        count = len(metadata.partitions)
        if partition is not None and not 0 <= partition < count:
            raise ConfigError(f"topic {topic!r} has partitions 0..{count - 1}, not {partition}")
        futures = [
            self.send(
                topic,
                values[i],
                None if keys is None else keys[i],
                partition,
                None if timestamps is None else timestamps[i],
                None if headers is None else headers[i],
            )
            for i in range(len(values))
        ]
        self._seal_topic(topic)
        return await _all_or_first_error(futures)

    def _seal_topic(self, topic: str) -> None:
        for tp in self._accumulator.open_partitions():
            records = self._accumulator.seal(tp) if tp.topic == topic else None
            if records:
                self._enqueue_records(tp, records)


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


def _calling(callback: DeliveryCallback) -> Callable[[asyncio.Future[RecordMetadata]], None]:
    def done(future: asyncio.Future[RecordMetadata]) -> None:
        if future.cancelled():
            callback(None, asyncio.CancelledError())
        elif future.exception() is not None:
            callback(None, future.exception())
        else:
            callback(future.result(), None)

    return done


def _to_bytes(item: bytes | str | None, name: str) -> bytes | None:
    if item is None or isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, bytearray | memoryview):
        return bytes(item)
    raise ConfigError(f"a record's {name} must be bytes, str or None, not {type(item).__name__}")
