"""A coordinator's I/O on its internal topic: creating it, appending to it, reading it.

`__consumer_offsets` (groups) and `__transaction_state` (transactions) are written the
same way, so each is described once (`InternalTopic`) and served by this one module.

The topic is created on first use, as Kafka's brokers do, with its configured
partitions and copies capped by the brokers live then (a one-broker development cluster
gets one copy rather than no coordinator), and its min.insync.replicas capped likewise.
It is compacted: the last record per key is the state.

Appends are the leader's own, with acks=all: a change is answered only once every
in-sync copy has it (and at least min.insync.replicas of them), so a coordinator
failover never loses an acknowledged change. The produce path's errors are turned into
the ones Kafka's coordinators answer, which clients know how to retry: a leadership lost
under the append is NOT_COORDINATOR (find the coordinator again), too few replicas or a
timeout is COORDINATOR_NOT_AVAILABLE (retry), a batch over the topic's
max.message.bytes is the topic's own error.

Loading reads a partition from its log start to its log end (the leader's log is what
will be committed) in `load_buffer_size` reads, yielding to the event loop between them,
so that a large partition does not stall every other connection.

Transactions: a group coordinator writes a transactional producer's offsets as that
producer's transactional records (`append(..., producer=...)`), numbered on from its
batches in the partition, so a stale producer epoch is refused as on any partition
(INVALID_PRODUCER_EPOCH). A load replays such records only at their transaction's
COMMIT marker, drops them at its ABORT, and hands those of transactions still open at
the log end to `open_at_end`; control batches are never replayed as records. A plain
record appended after an open transaction's record of the same key supersedes it: the
later record of a key wins, as in Kafka (brokerd/groups/txn_offsets.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass

from brokerd.core.context import BrokerContext
from brokerd.core.produce import ACKS_ALL
from brokerd.replication.partition import Partition
from spark_replica.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
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
from spark_replica.records import (
    NO_PRODUCER_ID,
    TRANSACTIONAL_FLAG,
    ControlType,
    build_batch,
    decode_control_marker,
    decode_payload,
    iter_batches,
    now_ms,
)
from spark_replica.topic_config import COMPACT
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store

logger = logging.getLogger("brokerd.coordination")

Record = tuple[bytes, bytes | None]  # (key, value); a None value is a tombstone
# Told, at the end of a load, of each transaction still open: producer id, its records.
OpenAtEnd = Callable[[int, list[Record]], None]


@dataclass(frozen=True)
class TxnProducer:
    """The transactional producer whose records an append writes: id and epoch."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class InternalTopic:
    """One internal topic as its coordinator creates, writes and reads it."""

    name: str
    num_partitions: int
    replication_factor: int
    segment_bytes: int
    append_timeout_ms: int
    load_buffer_size: int
    # What a change too large to store answers (Kafka's choice differs per coordinator).
    too_large: type[BrokerResponseError]
    min_insync_replicas: int | None = None  # None: the broker's default

    def partition(self, index: int) -> TopicPartition:
        return TopicPartition(self.name, index)

    def partition_count(self, ctx: BrokerContext) -> int:
        """The topic's partitions by the controller's metadata (0: not there yet)."""
        return len(ctx.metadata.partitions_of(self.name))

    def configs(self, replication_factor: int) -> dict[str, str]:
        """The topic configs it is created with, for `replication_factor` copies."""
        configs = {"cleanup.policy": COMPACT, "segment.bytes": str(self.segment_bytes)}
        if self.min_insync_replicas is not None:
            configs["min.insync.replicas"] = str(min(self.min_insync_replicas, replication_factor))
        return configs


async def ensure_topic(ctx: BrokerContext, topic: InternalTopic) -> None:
    """Create the topic if the metadata has not got it; a creation another broker made
    first is as good. The caller answers COORDINATOR_NOT_AVAILABLE meanwhile: the
    topic's leaders are elected after this returns."""
    if ctx.metadata.partitions_of(topic.name) or ctx.zk is None or not ctx.metadata.brokers:
        return  # there, or this broker has not heard how many brokers are live yet
    replication_factor = min(topic.replication_factor, len(ctx.metadata.brokers))
    configs: Mapping[str, str] = topic.configs(replication_factor)
    try:
        await asyncio.to_thread(
            topic_store.create_topic,
            ctx.zk,
            topic.name,
            topic.num_partitions,
            replication_factor,
            configs,
        )
    except TopicAlreadyExistsError:
        return
    except (BrokerResponseError, ZooKeeperError) as exc:
        logger.warning("creating %s failed; the next request retries: %s", topic.name, exc)
        return
    logger.info(
        "created %s with %d partitions of %d copies",
        topic.name,
        topic.num_partitions,
        replication_factor,
    )


async def append_to(
    ctx: BrokerContext,
    topic: InternalTopic,
    index: int,
    records: Sequence[Record],
    producer: TxnProducer | None = None,
) -> None:
    """`append` to partition `index` of `topic`, if this broker still hosts it."""
    try:
        partition = ctx.replicas.get_partition(topic.partition(index))
    except UnknownTopicOrPartitionError as exc:
        raise NotCoordinatorError(f"{topic.name}-{index} is gone: {exc}") from exc
    await append(topic, partition, records, producer)


async def append(
    topic: InternalTopic,
    partition: Partition,
    records: Sequence[Record],
    producer: TxnProducer | None = None,
) -> None:
    """Append `records` as one batch (`producer`'s transactional batch, if given) and
    return once committed; raises the coordinator error the outcome stands for (see the
    top)."""
    if not records:
        return
    producer_id, producer_epoch, sequence, attributes = NO_PRODUCER_ID, -1, -1, 0
    if producer is not None:
        producer_id, producer_epoch = producer.producer_id, producer.producer_epoch
        sequence = partition.producer_state.next_sequence(producer_id, producer_epoch)
        attributes = TRANSACTIONAL_FLAG
    batch = build_batch(
        [value for _, value in records],
        keys=[key for key, _ in records],
        timestamps=[now_ms()] * len(records),
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=sequence,
    )
    timeout_s = topic.append_timeout_ms / 1000
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
        raise topic.too_large(f"the change is too large to store: {exc}") from exc


async def read_records(
    topic: InternalTopic, partition: Partition, open_at_end: OpenAtEnd | None = None
) -> AsyncIterator[list[Record]]:
    """The records of the partition's log, oldest first (tombstones included), a read of
    `load_buffer_size` at a time: the caller replays each before the next is read, so a
    load holds one read's records (and the open transactions'), not the partition's.
    Transactional records come at their COMMIT marker, or never (see the top)."""
    log = partition.log
    position = log.log_start_offset
    end = log.log_end_offset
    open_transactions: dict[int, dict[bytes, Record]] = {}
    while position < end:
        data = log.read(position, topic.load_buffer_size, max_offset=end)
        if not data:
            break
        records: list[Record] = []
        for header, batch in iter_batches(data):
            skip = max(0, position - header.base_offset)
            if header.next_offset <= position:
                continue  # read before, with the end of the previous read
            position = header.next_offset
            if header.is_control:
                ended = open_transactions.pop(header.producer_id, {})
                if decode_control_marker(batch).control_type is ControlType.COMMIT:
                    records.extend(ended.values())
                continue
            payload = decode_payload(batch)
            keys = payload.column("key").to_pylist()[skip:]
            values = payload.column("value").to_pylist()[skip:]
            pairs = list(zip(keys, values, strict=True))
            if header.is_transactional:
                pending = open_transactions.setdefault(header.producer_id, {})
                for key, value in pairs:
                    pending.pop(key, None)
                    pending[key] = (key, value)
                continue
            for transaction in open_transactions.values():
                for key, _ in pairs:
                    transaction.pop(key, None)
            records.extend(pairs)
        yield records
        await asyncio.sleep(0)
    if open_at_end is not None:
        for producer_id, pending in open_transactions.items():
            if pending:
                open_at_end(producer_id, list(pending.values()))
