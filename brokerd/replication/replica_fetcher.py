"""Followers pull from leaders: one fetcher task per source broker, many partitions each.

A fetcher first truncates each newly followed partition by leader epoch (KIP-101/279):
it asks the leader where the follower's latest epoch ended and cuts its log where the
rule in replication_rules.py says (asking again after an intermediate cut), never to its
high watermark, which could throw away records the new leader has, or keep ones it
lacks. Then it long-polls Fetch requests (replica id = this broker, fetching from its
log end offset with the leader epoch it knows), appends the batches untouched, and takes
the high watermark from the answer.

OFFSET_OUT_OF_RANGE means the follower's log end is outside the leader's log: below the
leader's log start it restarts its log there; otherwise it is ahead of the leader, and
truncates by leader epoch again. Errors that mean "the leader moved" (NOT_LEADER, fenced
or unknown epoch) pause that partition until the controller's next LeaderAndIsr says
where to fetch from.

Each answer also carries the leader's log end offset: kept per followed partition, it
gives the follower's lag (Kafka's FetcherLagMetrics ConsumerLag), the leader's end as
of the last answer minus the follower's end now, which the metrics read at scrape time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from brokerd.log.epoch_cache import UNDEFINED_EPOCH
from brokerd.replication.partition import Partition
from brokerd.replication.rules import Truncation, truncation_point
from spark_replica.client.connection import BrokerConnection
from spark_replica.errors import OffsetOutOfRangeError, ReplogError, error_for_code
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.wire.native.offsets_for_leader_epoch import (
    EpochQuery,
    EpochQueryTopic,
    OffsetsForLeaderEpochRequest,
)

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig

logger = logging.getLogger("brokerd.fetcher")

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 64 * 1024 * 1024
PARTITION_MAX_BYTES = 16 * 1024 * 1024
ERROR_BACKOFF_S = 0.2


@dataclass
class FollowedPartition:
    partition: Partition
    needs_truncation: bool = True
    leader_log_end_offset: int | None = None  # from the last answer; None before one

    @property
    def lag(self) -> int | None:
        """Offsets the follower is behind the leader's last answer (None before it)."""
        if self.leader_log_end_offset is None:
            return None
        return max(0, self.leader_log_end_offset - self.partition.log.log_end_offset)


def truncation_for(partition: Partition, leader_epoch: int, leader_end_offset: int) -> Truncation:
    """Where this follower cuts its log, given the leader's (epoch, end offset) answer."""
    log = partition.log
    local_epoch, local_end = log.end_offset_for_epoch(leader_epoch)
    local = None if local_epoch == UNDEFINED_EPOCH else (local_epoch, local_end)
    known = log.epoch_cache.entries
    return truncation_point(
        leader_epoch,
        leader_end_offset,
        local,
        log.log_end_offset,
        partition.high_watermark,
        tracked_from=known[0].start_offset if known else log.log_end_offset,
    )


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        address: tuple[str, int],
        security: SecurityConfig | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.security = security
        self.leader_id = leader_id
        self.address = address
        self.partitions: dict[TopicPartition, FollowedPartition] = {}
        self._conn: BrokerConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._stopped = False

    def add(self, partition: Partition, needs_truncation: bool) -> None:
        followed = self.partitions.get(partition.tp)
        if followed is None or needs_truncation:
            self.partitions[partition.tp] = FollowedPartition(partition, needs_truncation)
        self._wakeup.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def stop(self) -> None:
        # The flag as well as the cancel: Python 3.11's wait_for can swallow a cancellation
        # that races with an answer, and the loop must still end.
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=FETCH_MAX_WAIT_MS / 1000 + 5)
        if self._conn is not None:
            await self._conn.close()

    async def _connection(self) -> BrokerConnection:
        if self._conn is None or not self._conn.is_usable:
            self._conn = BrokerConnection(
                *self.address, client_id=f"fetcher-{self.broker_id}", security=self.security
            )
            await self._conn.connect()
        return self._conn

    async def _run(self) -> None:
        while not self._stopped:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                await self._truncate_new_partitions()
                await self._fetch_once()
            except ReplogError as exc:
                logger.info("fetching from broker %d: %s", self.leader_id, exc)
                await asyncio.sleep(ERROR_BACKOFF_S)

    async def _truncate_new_partitions(self) -> None:
        pending = [f for f in self.partitions.values() if f.needs_truncation]
        if not pending:
            return
        grouped: dict[str, list[EpochQuery]] = defaultdict(list)
        for waiting in pending:
            p = waiting.partition
            grouped[p.tp.topic].append(
                EpochQuery(p.tp.partition, p.log.epoch_cache.latest_epoch, p.leader_epoch)
            )
        conn = await self._connection()
        request = OffsetsForLeaderEpochRequest(
            [EpochQueryTopic(t, qs) for t, qs in grouped.items()], self.broker_id
        )
        response = await conn.send(request)
        for topic in response.topics:
            for answer in topic.partitions:
                followed = self.partitions.get(TopicPartition(topic.topic, answer.partition))
                if followed is None or not followed.needs_truncation:
                    continue
                if answer.error_code:
                    logger.info(
                        "%s: epoch query failed: %s", followed.partition.tp, answer.error_message
                    )
                    continue
                p = followed.partition
                cut = truncation_for(p, answer.leader_epoch, answer.end_offset)
                end = p.log.log_end_offset
                if cut.offset < end:
                    logger.info(
                        "%s: truncating from %d to %d by leader epoch%s",
                        p.tp,
                        end,
                        cut.offset,
                        "" if cut.complete else ", then asking again",
                    )
                    p.truncate_to(cut.offset)
                # An intermediate cut that removed nothing would only ask the same again.
                followed.needs_truncation = not cut.complete and cut.offset < end

    async def _fetch_once(self) -> None:
        ready = [f.partition for f in self.partitions.values() if not f.needs_truncation]
        if not ready:
            await asyncio.sleep(ERROR_BACKOFF_S)
            return
        grouped: dict[str, list[FetchPartition]] = defaultdict(list)
        for p in ready:
            grouped[p.tp.topic].append(
                FetchPartition(
                    p.tp.partition, p.log.log_end_offset, PARTITION_MAX_BYTES, p.leader_epoch
                )
            )
        request = FetchRequest(
            FETCH_MAX_WAIT_MS,
            1,
            FETCH_MAX_BYTES,
            [FetchTopic(t, ps) for t, ps in grouped.items()],
            self.broker_id,
        )
        conn = await self._connection()
        response = await conn.send(request, timeout_s=FETCH_MAX_WAIT_MS / 1000 + 30)
        paused = False
        for topic in response.topics:
            for result in topic.partitions:
                followed = self.partitions.get(TopicPartition(topic.topic, result.partition))
                if followed is None:
                    continue
                p = followed.partition
                if result.error_code:
                    error = error_for_code(result.error_code, result.error_message or "")
                    if not isinstance(error, OffsetOutOfRangeError):
                        paused = True
                    elif result.log_start_offset > p.log.log_end_offset:
                        p.truncate_fully_and_start_at(result.log_start_offset)
                    else:
                        logger.info(
                            "%s: log end %d is past the leader's (%d); truncating by epoch",
                            p.tp,
                            p.log.log_end_offset,
                            result.log_end_offset,
                        )
                        followed.needs_truncation = True
                    continue
                p.append_as_follower(result.records, result.high_watermark, now_ms())
                p.follow_leader_log_start(result.log_start_offset)
                followed.leader_log_end_offset = result.log_end_offset
        if paused:
            await asyncio.sleep(ERROR_BACKOFF_S)


class ReplicaFetcherManager:
    """Which fetcher follows which partition; one fetcher per leader broker."""

    def __init__(self, broker_id: int, security: SecurityConfig | None = None) -> None:
        self.broker_id = broker_id
        self.security = security
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._retiring: set[asyncio.Task[None]] = set()

    def follow(
        self, partition: Partition, leader_id: int, address: tuple[str, int], needs_truncation: bool
    ) -> None:
        for other_id, other in self.fetchers.items():
            if other_id != leader_id:
                other.remove(partition.tp)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is not None and fetcher.address != address:
            fetcher.remove(partition.tp)
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(self.broker_id, leader_id, address, self.security)
            old = self.fetchers.get(leader_id)
            self.fetchers[leader_id] = fetcher
            if old is not None:
                for followed in old.partitions.values():
                    fetcher.add(followed.partition, followed.needs_truncation)
                retiring = asyncio.create_task(old.stop())
                self._retiring.add(retiring)
                retiring.add_done_callback(self._retiring.discard)
        fetcher.add(partition, needs_truncation)

    def lags(self) -> dict[TopicPartition, int]:
        """Each followed partition's lag behind its leader, once the leader has answered."""
        lags = {}
        for fetcher in self.fetchers.values():
            for tp, followed in fetcher.partitions.items():
                lag = followed.lag
                if lag is not None:
                    lags[tp] = lag
        return lags

    def unfollow(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    async def stop(self) -> None:
        fetchers, self.fetchers = self.fetchers, {}
        for fetcher in fetchers.values():
            with contextlib.suppress(Exception):
                await fetcher.stop()
