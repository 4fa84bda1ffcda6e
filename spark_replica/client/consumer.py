"""Consuming: fetch from partition leaders and hand back Arrow record batches.

The consumer keeps one position per assigned partition (the next offset to return).
Brokers answer with whole batches, so the first batch of a fetch may start before the
position; the records below it are sliced off here (zero-copy). Every batch's CRC32C
is checked before its payload is trusted, as Kafka's `check.crcs` does by default.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from dataclasses import dataclass

import pyarrow as pa

from spark_replica.errors import (
    ConfigError,
    OffsetOutOfRangeError,
    ReplogError,
    error_for_code,
    raise_for_code,
)
from spark_replica.protocol.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.protocol.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from spark_replica.records import decode_payload, iter_batches, verify_batch
from spark_replica.topics import TopicPartition

from .cluster import Cluster


@dataclass(frozen=True, slots=True)
class FetchedRecords:
    """Records of one partition, consecutive from `first_offset`."""

    tp: TopicPartition
    first_offset: int
    records: pa.RecordBatch

    @property
    def next_offset(self) -> int:
        return self.first_offset + self.records.num_rows


# Between offset lookups that failed with a retriable error (after a metadata refresh).
OFFSETS_RETRY_BACKOFF_S = 0.2


@dataclass(frozen=True)
class ConsumerConfig:
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 64 * 1024 * 1024
    partition_max_bytes: int = 16 * 1024 * 1024
    check_crcs: bool = True
    api_timeout_ms: int = 60_000  # Kafka's default.api.timeout.ms

    def __post_init__(self) -> None:
        for name in ("max_bytes", "partition_max_bytes", "min_bytes", "api_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if self.max_wait_ms < 0:
            raise ConfigError(f"max_wait_ms must be 0 or more, not {self.max_wait_ms}")


async def list_offsets_at(
    cluster: Cluster,
    broker_id: int,
    partitions: list[TopicPartition],
    timestamp: int,
    replica_id: int = -1,
) -> dict[TopicPartition, tuple[int, int]]:
    """One ListOffsets to one broker; raises the first partition error."""
    conn = await cluster.connection(broker_id)
    grouped: dict[str, list[ListOffsetsPartition]] = defaultdict(list)
    for tp in partitions:
        grouped[tp.topic].append(ListOffsetsPartition(tp.partition, timestamp))
    request = ListOffsetsRequest([ListOffsetsTopic(t, ps) for t, ps in grouped.items()], replica_id)
    response = await conn.send(request)
    found: dict[TopicPartition, tuple[int, int]] = {}
    for topic in response.topics:
        for p in topic.partitions:
            raise_for_code(p.error_code, p.error_message or "")
            found[TopicPartition(topic.topic, p.partition)] = (p.offset, p.timestamp)
    return found


class Consumer:
    def __init__(self, cluster: Cluster, config: ConsumerConfig | None = None) -> None:
        self.cluster = cluster
        self.config = config or ConsumerConfig()
        self.positions: dict[TopicPartition, int] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.positions = {tp: self.positions.get(tp, -1) for tp in partitions}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self.positions:
            raise ConfigError(f"{tp} is not assigned to this consumer")
        if offset < 0:
            raise ConfigError(f"cannot seek {tp} to negative offset {offset}")
        self.positions[tp] = offset

    def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    async def assign_topic(self, topic: str) -> list[TopicPartition]:
        """Assign every partition of `topic`."""
        metadata = await self.cluster.ensure_topic(topic)
        partitions = [TopicPartition(topic, p.partition) for p in metadata.partitions]
        self.assign([*self.positions, *partitions])
        return partitions

    async def seek_to_beginning(self, partitions: list[TopicPartition] | None = None) -> None:
        offsets = await self.list_offsets(partitions or list(self.positions), EARLIEST_TIMESTAMP)
        for tp, (offset, _) in offsets.items():
            self.positions[tp] = offset

    async def seek_to_end(self, partitions: list[TopicPartition] | None = None) -> None:
        offsets = await self.list_offsets(partitions or list(self.positions), LATEST_TIMESTAMP)
        for tp, (offset, _) in offsets.items():
            self.positions[tp] = offset

    async def list_offsets(
        self, partitions: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition: -2 earliest, -1 latest (HW), else by time.

        Retriable errors (a leader gone or moving) refresh the metadata and ask again
        until `api_timeout_ms`, as Kafka's consumer does for its offset lookups: a
        consumer that starts while a leader dies must ride through it as its fetches do.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.api_timeout_ms / 1000
        while True:
            try:
                return await self._list_offsets_once(partitions, timestamp)
            except ReplogError as exc:
                if not exc.retriable or loop.time() > deadline:
                    raise
                await self._refresh_after(exc)
                await asyncio.sleep(OFFSETS_RETRY_BACKOFF_S)

    async def _list_offsets_once(
        self, partitions: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, tuple[int, int]]:
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            await self.cluster.ensure_topic(tp.topic)
            by_leader[self.cluster.leader_for(tp)].append(tp)
        found: dict[TopicPartition, tuple[int, int]] = {}
        for leader, tps in by_leader.items():
            found.update(await list_offsets_at(self.cluster, leader, tps, timestamp))
        return found

    async def poll(self, max_wait_ms: int | None = None) -> list[FetchedRecords]:
        """One fetch round from every leader; retriable errors refresh metadata and return."""
        unset = [tp for tp, pos in self.positions.items() if pos < 0]
        if unset:
            await self.seek_to_beginning(unset)
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        try:
            for tp in self.positions:
                await self.cluster.ensure_topic(tp.topic)
                by_leader[self.cluster.leader_for(tp)].append(tp)
        except ReplogError as exc:
            if not exc.retriable:
                raise
            await self._refresh_after(exc)
            return []
        wait = self.config.max_wait_ms if max_wait_ms is None else max_wait_ms
        rounds = await asyncio.gather(
            *(self._fetch_from(leader, tps, wait) for leader, tps in by_leader.items()),
            return_exceptions=True,
        )
        fetched: list[FetchedRecords] = []
        for outcome in rounds:
            if isinstance(outcome, ReplogError) and outcome.retriable:
                await self._refresh_after(outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                fetched.extend(outcome)
        return fetched

    async def _refresh_after(self, error: ReplogError) -> None:
        await asyncio.sleep(0.05)
        if error.invalid_metadata:
            with contextlib.suppress(ReplogError):
                await self.cluster.refresh(sorted({tp.topic for tp in self.positions}))

    async def _fetch_from(
        self, leader: int, partitions: list[TopicPartition], max_wait_ms: int
    ) -> list[FetchedRecords]:
        conn = await self.cluster.connection(leader, "fetch")
        grouped: dict[str, list[FetchPartition]] = defaultdict(list)
        for tp in partitions:
            # The leader epoch we know: a broker with another one fences us (we refresh).
            epoch = self.cluster.partition(tp).leader_epoch
            grouped[tp.topic].append(
                FetchPartition(
                    tp.partition, self.positions[tp], self.config.partition_max_bytes, epoch
                )
            )
        request = FetchRequest(
            max_wait_ms,
            self.config.min_bytes,
            self.config.max_bytes,
            [FetchTopic(topic, ps) for topic, ps in grouped.items()],
        )
        response = await conn.send(request, timeout_s=max_wait_ms / 1000 + 30)
        fetched: list[FetchedRecords] = []
        retriable: ReplogError | None = None
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                if p.error_code:
                    error = error_for_code(p.error_code, p.error_message or "")
                    if isinstance(error, OffsetOutOfRangeError) or not error.retriable:
                        raise error
                    retriable = error
                    continue
                self.high_watermarks[tp] = p.high_watermark
                fetched.extend(self._take_records(tp, p.records))
        if retriable is not None and not fetched:
            raise retriable
        return fetched

    def _take_records(self, tp: TopicPartition, data: bytes | memoryview) -> list[FetchedRecords]:
        position = self.positions[tp]
        taken = []
        for header, batch in iter_batches(data, allow_partial_tail=True):
            if header.next_offset <= position:
                continue
            if self.config.check_crcs:
                verify_batch(batch, header)
            records = decode_payload(batch)
            skip = position - header.base_offset
            if skip > 0:
                records = records.slice(skip)
            first = max(position, header.base_offset)
            taken.append(FetchedRecords(tp, first, records))
            position = header.next_offset
        self.positions[tp] = position
        return taken
