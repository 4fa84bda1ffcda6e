"""Reading exactly the offsets [start, end) of one partition, wherever its leader is now.

A range reader is for callers that planned the range beforehand (the Spark source: the
end was at most the high watermark when the driver planned the batch), so every record
in it is committed somewhere. It never goes past `end`, and when a new leader's high
watermark still lags it waits rather than stops short. Leader changes, a killed or
restarting broker show as retriable errors, handled by `leader_call` (metadata refresh,
the retry policy's backoff); the reader fetches again from the first offset it has not
handed out, so no record comes twice. Only a range that makes no progress for
`progress_timeout_s` fails, with TimeoutExpiredError.

Records that are gone (retention deleted them, the log was truncated below them, the
partition was deleted) are reported as RecordsLost to `on_lost`, which may raise to
stop the read (the default raises RecordsLostError) or return to skip them. Offsets a
compacted log holds no records for are not lost: the reader moves past them
(fetched.py), also where they run to the end of the range. A fetch of this one partition
that brings no batch at all while the leader's high watermark is past the position
means the same for [position, high watermark): the broker read that span, below the
high watermark it answered with, and found nothing in it.

A read_committed reader (`isolation_level`; Spark's kafka.isolation.level) plans its
ranges below the last stable offset: its fetches stop there, the records of aborted
transactions are dropped and markers are never records (transaction_filter.py), and an
empty answer means nothing up to the LSO the leader answered with, not up to its HW.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from spark_replica.errors import (
    OffsetOutOfRangeError,
    RecordsLostError,
    TimeoutExpiredError,
    UnknownTopicOrPartitionError,
    raise_for_code,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import (
    AbortedTransaction,
    FetchPartition,
    FetchRequest,
    FetchTopic,
)
from spark_replica.wire.native.isolation import IsolationLevel
from spark_replica.wire.native.metadata import MetadataResponse

from .cluster import Cluster
from .connection import BrokerConnection
from .fetched import FetchedRecords, RecordsLost, take_records
from .leader_call import call_leader
from .list_offsets import EARLIEST, LATEST, list_offsets
from .retry import RetryPolicy

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 16 * 1024 * 1024
# A fetch that gets no answer this long after its own wait is over is given up (the
# leader may be frozen) and tried again with fresh metadata.
FETCH_ANSWER_GRACE_S = 10.0
# One metadata answer saying a topic is unknown may come from a broker that has not yet
# heard of it from the controller: the partition counts as deleted only when this many
# answers in a row say so.
GONE_CONFIRMATIONS = 2

OnLost = Callable[[RecordsLost], None]


def raise_lost(lost: RecordsLost) -> None:
    raise RecordsLostError(str(lost), lost.tp.topic, lost.tp.partition, lost.start, lost.end)


@dataclass(frozen=True, slots=True)
class _Answer:
    """What one fetch of the partition answered: its batches, the log's bounds then (the
    readable end: the HW, or the LSO for read_committed), and the aborted transactions
    of the batches (None: read_uncommitted)."""

    records: bytes | memoryview
    log_start_offset: int
    readable_end: int
    aborted: list[AbortedTransaction] | None


class _PartitionGone(Exception):
    """Metadata answers agree the partition no longer exists."""


class RangeReader:
    """Reads [start, end) of one partition; an async iterator of FetchedRecords.

    `next_fetch()` gives the records of one fetch at a time, for callers that drive the
    event loop themselves one step per fetch.
    """

    def __init__(
        self,
        cluster: Cluster,
        tp: TopicPartition,
        start: int,
        end: int,
        *,
        progress_timeout_s: float,
        on_lost: OnLost = raise_lost,
        check_crcs: bool = True,
        max_bytes: int = FETCH_MAX_BYTES,
        policy: RetryPolicy | None = None,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    ) -> None:
        self.cluster = cluster
        self.tp = tp
        self.position = start
        self.end = end
        self.progress_timeout_s = progress_timeout_s
        self.on_lost = on_lost
        self.check_crcs = check_crcs
        self.max_bytes = max_bytes
        self.policy = policy or cluster.retry_policy
        self.isolation_level = isolation_level
        self._gone_seen = 0
        self._ready: list[FetchedRecords] = []

    def __aiter__(self) -> AsyncIterator[FetchedRecords]:
        return self

    async def __anext__(self) -> FetchedRecords:
        while not self._ready:
            fetched = await self.next_fetch()
            if fetched is None:
                raise StopAsyncIteration
            self._ready = fetched[::-1]
        return self._ready.pop()

    async def next_fetch(self) -> list[FetchedRecords] | None:
        """The records of the next fetch that brought any, or None once the range is read
        (or what is left of it was reported lost)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.progress_timeout_s
        while self.position < self.end:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutExpiredError(
                    f"{self.tp}: no records at offset {self.position} (range ends at "
                    f"{self.end}) for {self.progress_timeout_s:g} s"
                )
            try:
                answer = await call_leader(
                    self.cluster,
                    self.tp,
                    self._fetch,
                    timeout_s=remaining,
                    purpose="fetch",
                    policy=self.policy,
                    on_refresh=self._check_gone,
                )
            except OffsetOutOfRangeError:
                await self._out_of_range(remaining)
                continue
            except _PartitionGone:
                self._lose(
                    self.end, f"{self.tp} is gone: offsets {self.position}..{self.end - 1} unread"
                )
                return None
            except TimeoutExpiredError as exc:
                raise TimeoutExpiredError(
                    f"{self.tp}: no records at offset {self.position} (range ends at "
                    f"{self.end}) for {self.progress_timeout_s:g} s; last error: {exc.__cause__}"
                ) from exc.__cause__
            self._gone_seen = 0
            fetched = self._take(answer)
            if fetched:
                return fetched
        return None

    async def _fetch(self, conn: BrokerConnection) -> _Answer:
        # The leader epoch we know: a broker with another one fences us (we refresh).
        epoch = self.cluster.partition(self.tp).leader_epoch
        request = FetchRequest(
            FETCH_MAX_WAIT_MS,
            1,
            self.max_bytes,
            [
                FetchTopic(
                    self.tp.topic,
                    [FetchPartition(self.tp.partition, self.position, self.max_bytes, epoch)],
                )
            ],
            isolation_level=self.isolation_level,
        )
        response = await conn.send(
            request, timeout_s=FETCH_MAX_WAIT_MS / 1000 + FETCH_ANSWER_GRACE_S
        )
        result = response.topics[0].partitions[0]
        raise_for_code(result.error_code, result.error_message or "")
        if self.isolation_level is IsolationLevel.READ_COMMITTED:
            return _Answer(
                result.records,
                result.log_start_offset,
                result.last_stable_offset,
                result.aborted_transactions,
            )
        return _Answer(result.records, result.log_start_offset, result.high_watermark, None)

    def _take(self, answer: _Answer) -> list[FetchedRecords]:
        taken = take_records(
            self.tp,
            answer.records,
            self.position,
            self.end,
            log_start_offset=answer.log_start_offset,
            check_crcs=self.check_crcs,
            aborted=answer.aborted,
        )
        fetched = []
        for piece in taken.pieces:
            if isinstance(piece, RecordsLost):
                self.on_lost(piece)
            else:
                fetched.append(piece)
        self.position = taken.position
        if not answer.records and self.position < answer.readable_end:
            self.position = min(answer.readable_end, self.end)
        return fetched

    async def _out_of_range(self, wait_s: float) -> None:
        """The leader's log does not hold the position: retention or truncation took it."""
        earliest = await list_offsets(self.cluster, [self.tp], EARLIEST, wait_s=wait_s)
        ends = await list_offsets(self.cluster, [self.tp], LATEST, wait_s=wait_s, log_end=True)
        log_start, log_end = earliest[self.tp][0], ends[self.tp][0]
        if self.position < log_start:
            resume = min(log_start, self.end)
            self._lose(
                resume,
                f"offsets {self.position}..{resume - 1} were deleted "
                f"(the log starts at {log_start})",
            )
        elif self.position > log_end:
            self._lose(
                self.end,
                f"offsets {self.position}..{self.end - 1} are gone: the log was truncated to "
                f"{log_end}",
            )
        else:
            # The leader changed between the fetch and this look: fetch again shortly.
            await asyncio.sleep(self.policy.backoff_s)

    def _lose(self, resume: int, reason: str) -> None:
        self.on_lost(RecordsLost(self.tp, self.position, resume, reason))
        self.position = resume

    def _check_gone(self, response: MetadataResponse) -> None:
        topic = next((t for t in response.topics if t.topic == self.tp.topic), None)
        gone = topic is not None and (
            topic.error_code == UnknownTopicOrPartitionError.code
            or (
                not topic.error_code
                and all(p.partition != self.tp.partition for p in topic.partitions)
            )
        )
        self._gone_seen = self._gone_seen + 1 if gone else 0
        if self._gone_seen >= GONE_CONFIRMATIONS:
            raise _PartitionGone
