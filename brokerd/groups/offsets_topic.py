"""The coordinator's I/O on `__consumer_offsets`: creating it, appending to it, reading it.

The topic is created on first use (the first FindCoordinator or group request), as
Kafka's brokers do, with offsets.topic.num.partitions partitions and
offsets.topic.replication.factor copies capped by the brokers live then (a one-broker
development cluster gets one copy rather than no groups). It is compacted: the last
record per key is the state.

Appends are the leader's own, with acks=all: a commit is answered only once every
in-sync copy has it (and at least min.insync.replicas of them), so a coordinator
failover never loses an acknowledged commit. The produce path's errors are turned into
the ones Kafka's coordinator answers, which clients know how to retry: a leadership lost
under the append is NOT_COORDINATOR (find the coordinator again), too few replicas or a
timeout is COORDINATOR_NOT_AVAILABLE (retry), a batch over the topic's
max.message.bytes is INVALID_COMMIT_OFFSET_SIZE.

Loading reads the partition from its log start to its log end (the leader's log is
what will be committed) in offsets.load.buffer.size reads, yielding to the event loop
between them, so that a large partition does not stall every other connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence

from brokerd.core.context import BrokerContext
from brokerd.core.produce import ACKS_ALL
from brokerd.replication.partition import Partition
from spark_replica.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    InvalidCommitOffsetSizeError,
    MessageTooLargeError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordListTooLargeError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    ZooKeeperError,
)
from spark_replica.records import build_batch, decode_payload, iter_batches, now_ms
from spark_replica.topic_config import COMPACT
from spark_replica.topics import OFFSETS_TOPIC, TopicPartition
from spark_replica.zk import topic_store

logger = logging.getLogger("brokerd.groups")

Record = tuple[bytes, bytes | None]  # (key, value); a None value is a tombstone


async def ensure_topic(ctx: BrokerContext) -> None:
    """Create the offsets topic if the metadata has not got it; a creation another broker
    made first is as good. The caller answers COORDINATOR_NOT_AVAILABLE meanwhile: the
    topic's leaders are elected after this returns."""
    if ctx.metadata.partitions_of(OFFSETS_TOPIC) or ctx.zk is None or not ctx.metadata.brokers:
        return  # there, or this broker has not heard how many brokers are live yet
    config = ctx.config
    live = len(ctx.metadata.brokers)
    replication_factor = min(config.offsets_topic_replication_factor, live)
    configs = {
        "cleanup.policy": COMPACT,
        "segment.bytes": str(config.offsets_topic_segment_bytes),
    }
    try:
        await asyncio.to_thread(
            topic_store.create_topic,
            ctx.zk,
            OFFSETS_TOPIC,
            config.offsets_topic_num_partitions,
            replication_factor,
            configs,
        )
    except TopicAlreadyExistsError:
        return
    except (BrokerResponseError, ZooKeeperError) as exc:
        logger.warning("creating %s failed; the next group request retries: %s", OFFSETS_TOPIC, exc)
        return
    logger.info(
        "created %s with %d partitions of %d copies",
        OFFSETS_TOPIC,
        config.offsets_topic_num_partitions,
        replication_factor,
    )


def partition_count(ctx: BrokerContext) -> int:
    """The offsets topic's partitions by the controller's metadata (0: not there yet)."""
    return len(ctx.metadata.partitions_of(OFFSETS_TOPIC))


def offsets_partition(index: int) -> TopicPartition:
    return TopicPartition(OFFSETS_TOPIC, index)


async def append_to(ctx: BrokerContext, index: int, records: Sequence[Record]) -> None:
    """`append` to offsets partition `index`, if this broker still hosts it."""
    try:
        partition = ctx.replicas.get_partition(offsets_partition(index))
    except UnknownTopicOrPartitionError as exc:
        raise NotCoordinatorError(f"{OFFSETS_TOPIC}-{index} is gone: {exc}") from exc
    await append(ctx, partition, records)


async def append(ctx: BrokerContext, partition: Partition, records: Sequence[Record]) -> None:
    """Append `records` as one batch and return once committed; raises the coordinator
    error the outcome stands for (see the top)."""
    if not records:
        return
    batch = build_batch(
        [value for _, value in records],
        keys=[key for key, _ in records],
        timestamps=[now_ms()] * len(records),
    )
    timeout_s = ctx.config.offsets_commit_timeout_ms / 1000
    try:
        info = partition.append_as_leader(batch, ACKS_ALL, now_ms())
        await partition.wait_for_high_watermark(info.last_offset, timeout_s)
    except (NotLeaderOrFollowerError, UnknownTopicOrPartitionError) as exc:
        raise NotCoordinatorError(f"{partition.tp} moved while storing: {exc}") from exc
    except (
        NotEnoughReplicasError,
        NotEnoughReplicasAfterAppendError,
        RequestTimedOutError,
    ) as exc:
        raise CoordinatorNotAvailableError(f"storing in {partition.tp} failed: {exc}") from exc
    except (MessageTooLargeError, RecordListTooLargeError) as exc:
        raise InvalidCommitOffsetSizeError(f"the commit is too large to store: {exc}") from exc


async def read_records(ctx: BrokerContext, partition: Partition) -> AsyncIterator[list[Record]]:
    """The records of the partition's log, oldest first (tombstones included), a read of
    offsets.load.buffer.size at a time: the caller replays each before the next is read,
    so a load holds one read's records, not the partition's."""
    log = partition.log
    position = log.log_start_offset
    end = log.log_end_offset
    chunk = ctx.config.offsets_load_buffer_size
    while position < end:
        data = log.read(position, chunk, max_offset=end)
        if not data:
            break
        records: list[Record] = []
        for header, batch in iter_batches(data):
            payload = decode_payload(batch)
            skip = max(0, position - header.base_offset)
            keys = payload.column("key").to_pylist()[skip:]
            values = payload.column("value").to_pylist()[skip:]
            records.extend(zip(keys, values, strict=True))
            position = max(position, header.next_offset)
        yield records
        await asyncio.sleep(0)
