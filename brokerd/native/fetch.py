"""Serving Fetch: whole batches below the HW, long-polling until min_bytes or max_wait.

The long poll is the read core's (brokerd/core/fetch.py), shared with the Kafka
listener's Fetch, which reads the same partitions and converts what it reads.

A consumer's answer leaves each partition's larger ranges in the log files
(Partition.read_stored): the connection sends them as stored, by sendfile(2) where it
can (spark_replica/transport.py), instead of reading them into memory first. Replicas
read bytes: what they fetch above the HW may be truncated before it is sent.

A read_committed consumer (Fetch v1) reads up to the last stable offset and is told the
aborted transactions of the batches it gets (brokerd/core/isolation.py, as the Kafka
listener's): those are read into memory, since a log range as stored stops at the HW.
Every consumer's answer carries the partition's LSO; replicas fetch read_uncommitted,
up to the LEO, and are not told one.

The bytes of records sent to consumers are counted per topic once the answer is final
(a long poll may read more than once); replicas' fetches are not (Kafka counts those
as replication, not BytesOut).
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.core.context import BrokerContext
from brokerd.core.fetch import FETCH_MAX_BYTES, long_poll, partition_to_read
from brokerd.core.isolation import aborted_in
from brokerd.core.partitions import answer_each_partition
from brokerd.replication.partition import Partition
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import (
    CONSUMER_REPLICA_ID,
    AbortedTransaction,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    FetchTopicResult,
)
from spark_replica.wire.native.isolation import IsolationLevel
from spark_replica.wire.primitives import Chunk

# A consumer's range at least this large is sent from the file; smaller ones are read,
# since a region costs a descriptor and the transport a pause to send it.
REGION_BYTES = 64 * 1024


async def handle_fetch(ctx: BrokerContext, request: FetchRequest) -> FetchResponse:
    reads = 0

    def read_all() -> tuple[FetchResponse, int, list[Partition]]:
        nonlocal reads
        reads += 1
        return _read_all(ctx, request, first_read=reads == 1)

    for_consumer = request.replica_id == CONSUMER_REPLICA_ID
    response = await long_poll(
        read_all, request.max_wait_ms, request.min_bytes, high_watermark=for_consumer
    )
    if for_consumer:
        for topic in response.topics:
            sent = sum(_size(p.records) for p in topic.partitions)
            if sent:
                ctx.replicas.metrics.fetched(topic.topic, sent)
    return response


def _read_all(
    ctx: BrokerContext, request: FetchRequest, first_read: bool
) -> tuple[FetchResponse, int, list[Partition]]:
    """Read every requested partition once; also return the bytes read and what to watch.

    A follower's fetch shows its log starts as it arrives, so only in the request's
    `first_read`: a long poll reads again, and only the first read follows the answer
    the follower applied before it sent this fetch (replication rules, rule 9).
    """
    for_replica = request.replica_id != CONSUMER_REPLICA_ID
    read_committed = request.isolation_level == IsolationLevel.READ_COMMITTED and not for_replica
    now = now_ms()
    remaining = min(request.max_bytes, FETCH_MAX_BYTES)
    total = 0
    watched: list[Partition] = []

    def serve(tp: TopicPartition, entry: FetchPartition, result: FetchPartitionResult) -> None:
        nonlocal remaining, total
        partition = partition_to_read(
            ctx, tp, request.max_bytes, entry.max_bytes, entry.current_leader_epoch
        )
        # Set before the offset is checked: a follower told OFFSET_OUT_OF_RANGE needs
        # them to choose between restarting at the log start and truncating.
        result.log_start_offset = partition.log.log_start_offset
        result.log_end_offset = partition.log.log_end_offset
        if for_replica:
            if first_read:
                partition.record_follower_log_start(request.replica_id, entry.fetch_offset)
            partition.record_follower_fetch(request.replica_id, entry.fetch_offset, now)
            if partition.proposed_isr is not None and ctx.isr_writer is not None:
                ctx.isr_writer.schedule(partition)
        if remaining > 0:
            max_bytes = min(entry.max_bytes, remaining)
            if for_replica:
                result.records = partition.read(
                    entry.fetch_offset,
                    max_bytes,
                    current_leader_epoch=entry.current_leader_epoch,
                    for_replica=True,
                )
            elif read_committed:
                stored = partition.read(
                    entry.fetch_offset,
                    max_bytes,
                    current_leader_epoch=entry.current_leader_epoch,
                    for_replica=False,
                    read_committed=True,
                )
                result.records = stored
                result.aborted_transactions = [
                    AbortedTransaction(aborted.producer_id, aborted.first_offset)
                    for aborted in aborted_in(partition, entry.fetch_offset, stored)
                ]
            else:
                result.records = partition.read_stored(
                    entry.fetch_offset,
                    max_bytes,
                    current_leader_epoch=entry.current_leader_epoch,
                    region_bytes=REGION_BYTES,
                )
            size = _size(result.records)
            remaining -= size
            total += size
        result.high_watermark = partition.high_watermark
        if not for_replica:
            result.last_stable_offset = partition.last_stable_offset
        if for_replica:
            partition.note_log_start_answered(request.replica_id)
        watched.append(partition)

    topics = answer_each_partition(request.topics, FetchTopicResult, FetchPartitionResult, serve)
    return FetchResponse(topics), total, watched


def _size(records: bytes | memoryview | Sequence[Chunk]) -> int:
    if isinstance(records, bytes | memoryview):
        return len(records)
    return sum(len(part) for part in records)
