"""`__consumer_offsets` as the group coordinator writes it (brokerd.coordination.internal_topic
does the I/O for every internal topic).

Kafka's names and defaults shape it: offsets.topic.num.partitions partitions and
offsets.topic.replication.factor copies, commits waiting for every in-sync copy at most
offsets.commit.timeout.ms, loads reading offsets.load.buffer.size bytes at a time. A
commit too large to store is INVALID_COMMIT_OFFSET_SIZE, as Kafka's group coordinator
answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.config.broker import BrokerConfig
from brokerd.coordination import internal_topic
from brokerd.coordination.internal_topic import InternalTopic, Record
from brokerd.core.context import BrokerContext
from brokerd.replication.partition import Partition
from spark_replica.errors import InvalidCommitOffsetSizeError
from spark_replica.topics import OFFSETS_TOPIC, TopicPartition


def offsets_topic(config: BrokerConfig) -> InternalTopic:
    return InternalTopic(
        name=OFFSETS_TOPIC,
        num_partitions=config.offsets_topic_num_partitions,
        replication_factor=config.offsets_topic_replication_factor,
        segment_bytes=config.offsets_topic_segment_bytes,
        append_timeout_ms=config.offsets_commit_timeout_ms,
        load_buffer_size=config.offsets_load_buffer_size,
        too_large=InvalidCommitOffsetSizeError,
    )


async def ensure_topic(ctx: BrokerContext) -> None:
    await internal_topic.ensure_topic(ctx, offsets_topic(ctx.config))


def partition_count(ctx: BrokerContext) -> int:
    """The offsets topic's partitions by the controller's metadata (0: not there yet)."""
    return len(ctx.metadata.partitions_of(OFFSETS_TOPIC))


def offsets_partition(index: int) -> TopicPartition:
    return TopicPartition(OFFSETS_TOPIC, index)


async def append(ctx: BrokerContext, partition: Partition, records: Sequence[Record]) -> None:
    await internal_topic.append(offsets_topic(ctx.config), partition, records)
