"""Consuming: fetch from partition leaders and hand back Arrow record batches.

The consumer keeps one position per assigned partition (the next offset to return).
Brokers answer with whole batches, so the first batch of a fetch may start before the
position; the records below it are sliced off here (zero-copy). Every batch's CRC32C
is checked before its payload is trusted, as Kafka's `check.crcs` does by default.

`isolation_level` is Kafka's isolation.level: read_uncommitted (the default) reads up to
the high watermark; read_committed up to the last stable offset, dropping the records
of aborted transactions (transaction_filter.py), and its end offsets (LATEST,
seek_to_end) are the LSO. Transaction markers are never records, under either level;
the offsets they and dropped records hold are gaps in what a reader gets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from spark_replica.errors import ConfigError, OffsetOutOfRangeError, ReplogError, error_for_code
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import (
    AbortedTransaction,
    FetchPartition,
    FetchRequest,
    FetchTopic,
)
from spark_replica.wire.native.isolation import IsolationLevel

from .cluster import Cluster
from .consumer_records import ConsumerRecord, iterate_records
from .fetched import FetchedRecords, take_records
from .list_offsets import EARLIEST, LATEST, OffsetAndTimestamp, list_offsets
from .range_reader import OnLost, RangeReader, raise_lost
from .retry import Attempts, RetryPolicy

__all__ = ["Consumer", "ConsumerConfig", "FetchedRecords"]


@dataclass(frozen=True)
class ConsumerConfig:
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 64 * 1024 * 1024
    partition_max_bytes: int = 16 * 1024 * 1024
    check_crcs: bool = True
    api_timeout_ms: int = 60_000  # Kafka's default.api.timeout.ms
    retry_backoff_ms: int = 100  # Kafka's retry.backoff.ms
    retry_backoff_max_ms: int = 1000  # Kafka's retry.backoff.max.ms
    isolation_level: str = "read_uncommitted"  # Kafka's isolation.level

    def __post_init__(self) -> None:
        IsolationLevel.parse(self.isolation_level)
        for name in ("max_bytes", "partition_max_bytes", "min_bytes", "api_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        for name in ("max_wait_ms", "retry_backoff_ms", "retry_backoff_max_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 or more, not {getattr(self, name)}")
        # A maximum below the backoff is refused now rather than at the first retry.
        RetryPolicy.from_ms(self.retry_backoff_ms, self.retry_backoff_max_ms)

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy.from_ms(self.retry_backoff_ms, self.retry_backoff_max_ms)

    @property
    def isolation(self) -> IsolationLevel:
        return IsolationLevel.parse(self.isolation_level)


class Consumer:
    def __init__(self, cluster: Cluster, config: ConsumerConfig | None = None) -> None:
        self.cluster = cluster
        self.config = config or ConsumerConfig()
        self.retry_policy = self.config.retry_policy
        self.isolation = self.config.isolation
        self.positions: dict[TopicPartition, int] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}
        # Polls in a row that ended in a retriable error: the next one backs off.
        self._failed_polls = Attempts(self.retry_policy, deadline=float("inf"))

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

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return iterate_records(self)

    def records(
        self, *, max_wait_ms: int | None = None, idle_timeout_s: float | None = None
    ) -> AsyncIterator[ConsumerRecord]:
        """The assigned partitions' records one at a time (consumer_records.py); with
        `idle_timeout_s`, ending once none has arrived for that long."""
        return iterate_records(self, max_wait_ms=max_wait_ms, idle_timeout_s=idle_timeout_s)

    async def assign_topic(self, topic: str) -> list[TopicPartition]:
        """Assign every partition of `topic`."""
        metadata = await self.cluster.ensure_topic(topic)
        partitions = [TopicPartition(topic, p.partition) for p in metadata.partitions]
        self.assign([*self.positions, *partitions])
        return partitions

    async def seek_to_beginning(self, partitions: list[TopicPartition] | None = None) -> None:
        offsets = await self.list_offsets(partitions or list(self.positions), EARLIEST)
        for tp, (offset, _) in offsets.items():
            self.positions[tp] = offset

    async def seek_to_end(self, partitions: list[TopicPartition] | None = None) -> None:
        offsets = await self.list_offsets(partitions or list(self.positions), LATEST)
        for tp, (offset, _) in offsets.items():
            self.positions[tp] = offset

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int, *, log_end: bool = False
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """(offset, timestamp) per partition: EARLIEST, LATEST (the HW; the LSO under
        read_committed), else by time.

        Asked again while a leader is gone or moving, until `api_timeout_ms`, as Kafka's
        consumer does for its offset lookups (see list_offsets.list_offsets).
        """
        return await list_offsets(
            self.cluster,
            partitions,
            timestamp,
            wait_s=self.config.api_timeout_ms / 1000,
            log_end=log_end,
            policy=self.retry_policy,
            isolation_level=self.isolation,
        )

    def read_range(
        self,
        tp: TopicPartition,
        start: int,
        end: int,
        *,
        on_lost: OnLost = raise_lost,
        progress_timeout_ms: int | None = None,
    ) -> RangeReader:
        """Exactly the records [start, end) of `tp`, as an async iterator of FetchedRecords.

        For ranges planned below the high watermark: the reader follows leader changes
        and waits while a new leader's HW lags. Records that are gone are reported to
        `on_lost` (by default raising RecordsLostError). A read that makes no progress
        for `progress_timeout_ms` (default `api_timeout_ms`) raises TimeoutExpiredError.
        It does not use or move this consumer's positions.
        """
        timeout_ms = (
            self.config.api_timeout_ms if progress_timeout_ms is None else progress_timeout_ms
        )
        return RangeReader(
            self.cluster,
            tp,
            start,
            end,
            progress_timeout_s=timeout_ms / 1000,
            on_lost=on_lost,
            check_crcs=self.config.check_crcs,
            max_bytes=self.config.partition_max_bytes,
            policy=self.retry_policy,
            isolation_level=self.isolation,
        )

    async def poll(self, max_wait_ms: int | None = None) -> list[FetchedRecords]:
        """One fetch round from every leader.

        A retriable error refreshes the metadata if it says to, and the round returns
        what the other leaders gave; the next poll first waits as the retry policy says
        for the number of failed polls in a row (not at all right after a stale leader).
        """
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
            await self._back_off(exc)
            return []
        wait = self.config.max_wait_ms if max_wait_ms is None else max_wait_ms
        rounds = await asyncio.gather(
            *(self._fetch_from(leader, tps, wait) for leader, tps in by_leader.items()),
            return_exceptions=True,
        )
        fetched: list[FetchedRecords] = []
        failure: ReplogError | None = None
        for outcome in rounds:
            if isinstance(outcome, ReplogError) and outcome.retriable:
                failure = outcome if failure is None or outcome.invalid_metadata else failure
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                fetched.extend(outcome)
        if failure is not None:
            await self._back_off(failure)
        else:
            self._failed_polls.succeeded()
        return fetched

    async def _back_off(self, error: ReplogError) -> None:
        """Refresh stale metadata, then wait as the policy says before the next poll."""
        if error.invalid_metadata:
            with contextlib.suppress(ReplogError):
                await self.cluster.refresh(sorted({tp.topic for tp in self.positions}))
        loop = asyncio.get_running_loop()
        delay = self._failed_polls.next_delay(error, loop.time())
        if delay:
            await asyncio.sleep(delay)

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
            isolation_level=self.isolation,
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
                fetched.extend(
                    self._take_records(tp, p.records, p.log_start_offset, p.aborted_transactions)
                )
        if retriable is not None and not fetched:
            raise retriable
        return fetched

    def _take_records(
        self,
        tp: TopicPartition,
        data: bytes | memoryview,
        log_start_offset: int,
        aborted: list[AbortedTransaction],
    ) -> list[FetchedRecords]:
        read_committed = self.isolation is IsolationLevel.READ_COMMITTED
        taken = take_records(
            tp,
            data,
            self.positions[tp],
            log_start_offset=log_start_offset,
            check_crcs=self.config.check_crcs,
            aborted=aborted if read_committed else None,
        )
        self.positions[tp] = taken.position
        return [piece for piece in taken.pieces if isinstance(piece, FetchedRecords)]
