"""Serving Fetch: whole batches below the HW, long-polling until min_bytes or max_wait.

The long poll (`long_poll`) is shared with the Kafka listener's Fetch
(brokerd/kafka/fetch.py), which reads the same partitions and converts what it reads.

The bytes of records sent to consumers are counted per topic once the answer is final
(a long poll may read more than once); replicas' fetches are not (Kafka counts those
as replication, not BytesOut).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import TypeVar

from brokerd.core.context import BrokerContext, answer_each_partition
from brokerd.replication.partition import Partition, wait_for_change
from spark_replica.errors import InvalidFetchSizeError
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    FetchTopicResult,
)

# A fetch never parks longer than this, whatever max_wait_ms says.
MAX_WAIT_CAP_MS = 30_000
# Nor answers more than this, whatever max_bytes says (Kafka's fetch.max.bytes default).
FETCH_MAX_BYTES = 57_671_680

T = TypeVar("T")


async def long_poll(
    read_all: Callable[[], tuple[T, int, list[Partition]]], max_wait_ms: int, min_bytes: int
) -> T:
    """Answer at once if there is data (or an error); else wait for a change, up to max_wait.

    `read_all` reads every requested partition once and returns the answer, the bytes
    it holds and the partitions whose change would be worth another read. Both
    listeners' fetches wait through here.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(max(max_wait_ms, 0), MAX_WAIT_CAP_MS) / 1000
    while True:
        response, total_bytes, watched = read_all()
        remaining = deadline - loop.time()
        if total_bytes >= min_bytes or remaining <= 0 or not watched:
            return response
        if not await wait_for_change(watched, remaining):
            response, _, _ = read_all()
            return response


async def handle_fetch(ctx: BrokerContext, request: FetchRequest) -> FetchResponse:
    response = await long_poll(
        functools.partial(_read_all, ctx, request), request.max_wait_ms, request.min_bytes
    )
    if request.replica_id == CONSUMER_REPLICA_ID:
        for topic in response.topics:
            sent = sum(len(p.records) for p in topic.partitions)
            if sent:
                ctx.replicas.metrics.fetched(topic.topic, sent)
    return response


def _read_all(
    ctx: BrokerContext, request: FetchRequest
) -> tuple[FetchResponse, int, list[Partition]]:
    """Read every requested partition once; also return the bytes read and what to watch."""
    for_replica = request.replica_id != CONSUMER_REPLICA_ID
    now = now_ms()
    remaining = min(request.max_bytes, FETCH_MAX_BYTES)
    total = 0
    watched: list[Partition] = []

    def serve(tp: TopicPartition, entry: FetchPartition, result: FetchPartitionResult) -> None:
        nonlocal remaining, total
        if request.max_bytes <= 0 or entry.max_bytes <= 0:
            raise InvalidFetchSizeError(
                f"max_bytes must be positive (request {request.max_bytes}, "
                f"partition {entry.max_bytes})"
            )
        partition = ctx.replicas.get_partition(tp)
        partition.require_leader()
        partition.check_leader_epoch(entry.current_leader_epoch)
        # Set before the offset is checked: a follower told OFFSET_OUT_OF_RANGE needs
        # them to choose between restarting at the log start and truncating.
        result.log_start_offset = partition.log.log_start_offset
        result.log_end_offset = partition.log.log_end_offset
        if for_replica:
            partition.record_follower_fetch(request.replica_id, entry.fetch_offset, now)
            if partition.proposed_isr is not None and ctx.isr_writer is not None:
                ctx.isr_writer.schedule(partition)
        if remaining > 0:
            result.records = partition.read(
                entry.fetch_offset,
                min(entry.max_bytes, remaining),
                current_leader_epoch=entry.current_leader_epoch,
                for_replica=for_replica,
            )
            remaining -= len(result.records)
            total += len(result.records)
        result.high_watermark = partition.high_watermark
        watched.append(partition)

    topics = answer_each_partition(request.topics, FetchTopicResult, FetchPartitionResult, serve)
    return FetchResponse(topics), total, watched
