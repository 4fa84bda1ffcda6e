"""DeleteRecords for both dialects: move led partitions' log starts, answer once the
replicas have moved theirs.

The rules are Kafka's and live on the partition (Partition.delete_records_before): the
offset is at most the high watermark, -1 names the high watermark, and the start only
moves forward. The leader moves its own start at once; the followers move theirs on
their next fetch, whose answer carries the leader's start. As Kafka's DeleteRecords
purgatory does, the answer waits until the log start of every ISR member the controller
counts live has reached the offset and then carries the lowest of them (the low
watermark), or REQUEST_TIMED_OUT once the request's timeout_ms has passed (the leader's
start has moved all the same, and the followers still follow). The wait is a Deferred
(brokerd/core/deferred.py), so the connection handles its next requests meanwhile. How
the leader knows its followers' starts: brokerd/replication/rules.py, rule 9.

A partition this broker does not host is NOT_LEADER_OR_FOLLOWER when the cluster has it
elsewhere (the client's metadata is stale) and UNKNOWN_TOPIC_OR_PARTITION when the
cluster has no such partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, TypeVar

from brokerd.core.context import BrokerContext
from brokerd.core.deferred import Deferred
from brokerd.core.partitions import hosted_partition, set_error
from brokerd.replication.partition import Partition
from spark_replica.errors import BrokerResponseError
from spark_replica.topics import TopicPartition

R = TypeVar("R")

# The low watermark answered with an error: Kafka's "unknown".
UNKNOWN_LOW_WATERMARK = -1
# However long a request asks to wait, it holds its connection's answer no longer.
MAX_DELETE_RECORDS_WAIT_MS = 300_000


@dataclass(frozen=True, slots=True)
class Deletion:
    """One partition whose leader moved its start: what its replicas' starts must reach,
    and the result its low watermark (or error) goes into."""

    partition: Partition
    offset: int
    result: Any


def delete_records_before(
    ctx: BrokerContext, tp: TopicPartition, offset: int, result: Any
) -> Deletion:
    """Delete the records of `tp` below `offset` on this leader; the wait still to do
    before `result` gets its low watermark."""
    partition = hosted_partition(ctx, tp)
    return Deletion(partition, partition.delete_records_before(offset), result)


def answer_when_replicated(
    ctx: BrokerContext, deletions: list[Deletion], timeout_ms: int, respond: Callable[[], R]
) -> R | Deferred:
    """`respond()` once every deletion's result holds its low watermark or its error: a
    Deferred that waits up to `timeout_ms` (capped), or at once when nothing was deleted."""
    if not deletions:
        return respond()

    def live() -> Collection[int]:
        return ctx.metadata.brokers.keys()

    async def rest() -> R:
        wait_s = min(max(timeout_ms, 0), MAX_DELETE_RECORDS_WAIT_MS) / 1000
        outcomes = await asyncio.gather(
            *(d.partition.wait_for_low_watermark(d.offset, wait_s, live) for d in deletions),
            return_exceptions=True,
        )
        for deletion, outcome in zip(deletions, outcomes, strict=True):
            if isinstance(outcome, BrokerResponseError):
                set_error(deletion.result, outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                deletion.result.low_watermark = outcome
        return respond()

    return Deferred(rest())
