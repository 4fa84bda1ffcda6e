"""Producing record batches: routing to the leader, acks, and retries of retriable errors.

A request that fails with a retriable error is sent again after a backoff, with fresh
metadata when the error says ours is stale, until the delivery timeout; a non-retriable
error is raised at once. An idempotent producer (the default with acks=all) never
appends a batch twice however often it retries; without idempotence a retry after a lost
answer can append a batch twice. Neither ever loses one silently.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from spark_replica.errors import ConfigError, ReplogError, raise_for_code
from spark_replica.protocol.init_producer_id import InitProducerIdRequest
from spark_replica.protocol.produce import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    ProducePartition,
    ProduceRequest,
    ProduceTopic,
)
from spark_replica.records import BatchHeader, build_batch, encode_batch, stamp_producer
from spark_replica.topics import TopicPartition

from .cluster import Cluster
from .partitioner import RoundRobin, partition_for_key

# Sequence numbers wrap here, as Kafka's do (the broker compares them the same way).
SEQUENCE_WRAP = 2**31

ACKS_BY_NAME = {"0": ACKS_NONE, "1": ACKS_LEADER, "all": ACKS_ALL, "-1": ACKS_ALL}


def parse_acks(value: str | int) -> int:
    acks = ACKS_BY_NAME.get(str(value).strip().lower())
    if acks is None:
        raise ConfigError(f"acks={value!r}: use 0, 1 or all")
    return acks


@dataclass(frozen=True)
class ProducerConfig:
    acks: int = ACKS_LEADER
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    retry_backoff_ms: int = 100
    batch_records: int = 10_000
    # None: idempotent exactly when acks=all, as Kafka's producers default since 3.0.
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
        for name in ("request_timeout_ms", "delivery_timeout_ms", "batch_records"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if self.retry_backoff_ms < 0:
            raise ConfigError(f"retry_backoff_ms must be 0 or more, not {self.retry_backoff_ms}")


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 with acks=0: the broker does not answer


class Producer:
    """Sends batches to partition leaders, retrying retriable errors.

    When idempotent, the producer gets an id and epoch from a broker (InitProducerId)
    and numbers each partition's batches; one batch per partition is in flight at a time,
    so a retry is always of the latest batch, and the leader answers a retry of a batch
    it already has with the original offset instead of appending it twice.
    """

    def __init__(self, cluster: Cluster, config: ProducerConfig | None = None) -> None:
        self.cluster = cluster
        self.config = config or ProducerConfig()
        self._round_robin = RoundRobin()
        self._identity: tuple[int, int] | None = None  # (producer id, epoch)
        self._identity_lock = asyncio.Lock()
        self._next_sequence: dict[TopicPartition, int] = defaultdict(int)
        self._partition_locks: dict[TopicPartition, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def _producer_identity(self) -> tuple[int, int]:
        async with self._identity_lock:
            if self._identity is None:
                conn = await self.cluster.any_connection()
                response = await conn.send(InitProducerIdRequest())
                self._identity = (response.producer_id, response.producer_epoch)
            return self._identity

    async def send_batch(self, topic: str, partition: int, batch: bytes) -> int:
        """Append one encoded batch; return its base offset (-1 with acks=0)."""
        tp = TopicPartition(topic, partition)
        if not self.config.idempotent:
            return await self._send_with_retries(tp, batch)
        producer_id, epoch = await self._producer_identity()
        async with self._partition_locks[tp]:
            sequence = self._next_sequence[tp]
            stamped = stamp_producer(batch, producer_id, epoch, sequence)
            offset = await self._send_with_retries(tp, stamped)
            count = BatchHeader.decode(stamped).record_count
            self._next_sequence[tp] = (sequence + count) % SEQUENCE_WRAP
            return offset

    async def _send_with_retries(self, tp: TopicPartition, batch: bytes | bytearray) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.delivery_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        topic = tp.topic
        while True:
            try:
                return await self._send_once(tp, batch)
            except ReplogError as exc:
                if not exc.retriable or loop.time() + backoff > deadline:
                    raise
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                if exc.invalid_metadata:
                    await self._refresh_quietly(topic)

    async def _refresh_quietly(self, topic: str) -> None:
        with contextlib.suppress(ReplogError):
            await self.cluster.refresh([topic])

    async def _send_once(self, tp: TopicPartition, batch: bytes | bytearray) -> int:
        await self.cluster.ensure_topic(tp.topic)
        leader = self.cluster.leader_for(tp)
        conn = await self.cluster.connection(leader, "produce")
        request = ProduceRequest(
            self.config.acks,
            self.config.request_timeout_ms,
            [ProduceTopic(tp.topic, [ProducePartition(tp.partition, batch)])],
        )
        if self.config.acks == ACKS_NONE:
            await conn.send(request, expect_response=False)
            return -1
        response = await conn.send(request, timeout_s=self.config.request_timeout_ms / 1000 + 5)
        result = response.topics[0].partitions[0]
        raise_for_code(result.error_code, result.error_message or "")
        return result.base_offset

    async def send_arrow(
        self, topic: str, partition: int, records: pa.RecordBatch | pa.Table
    ) -> int:
        """Append Arrow records (a `value` column, optional key/timestamp/headers) in order."""
        table = records if isinstance(records, pa.Table) else pa.Table.from_batches([records])
        first = -1
        for chunk in table.to_batches(max_chunksize=self.config.batch_records):
            if chunk.num_rows == 0:
                continue
            offset = await self.send_batch(topic, partition, encode_batch(chunk))
            first = offset if first == -1 else first
        return first

    async def send_records(
        self,
        topic: str,
        values: Sequence[bytes | str | None],
        keys: Sequence[bytes | str | None] | None = None,
        timestamps: Sequence[int | None] | None = None,
        headers: Sequence[list[tuple[str, bytes | None]] | None] | None = None,
        partition: int | None = None,
    ) -> list[RecordMetadata]:
        """Send records in order per partition; return each record's offset, input order."""
        metadata = await self.cluster.ensure_topic(topic)
        count = len(metadata.partitions)
        if partition is not None and not 0 <= partition < count:
            raise ConfigError(f"topic {topic!r} has partitions 0..{count - 1}, not {partition}")
        by_partition: dict[int, list[int]] = defaultdict(list)
        for i in range(len(values)):
            key = keys[i] if keys is not None else None
            if partition is not None:
                chosen = partition
            elif key is not None:
                chosen = partition_for_key(key.encode() if isinstance(key, str) else key, count)
            else:
                chosen = self._round_robin.next_partition(count)
            by_partition[chosen].append(i)
        results: list[RecordMetadata | None] = [None] * len(values)

        async def send_partition(p: int, indexes: list[int]) -> None:
            size = self.config.batch_records
            for start in range(0, len(indexes), size):
                chunk = indexes[start : start + size]
                batch = build_batch(
                    [values[i] for i in chunk],
                    keys=None if keys is None else [keys[i] for i in chunk],
                    timestamps=None if timestamps is None else [timestamps[i] for i in chunk],
                    headers=None if headers is None else [headers[i] for i in chunk],
                )
                base = await self.send_batch(topic, p, batch)
                for n, i in enumerate(chunk):
                    results[i] = RecordMetadata(topic, p, -1 if base < 0 else base + n)

        await asyncio.gather(*(send_partition(p, ix) for p, ix in by_partition.items()))
        return [r for r in results if r is not None]
