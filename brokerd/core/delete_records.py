"""DeleteRecords for both dialects: move one led partition's log start, answer the new one.

The rules are Kafka's and live on the partition (Partition.delete_records_before): the
offset is at most the high watermark, -1 names the high watermark, and the start only
moves forward. The leader answers once its own log start moved; followers move theirs
on their next fetch (the answer carries the leader's start), so the reply does not wait
for them as Kafka's purgatory does. A partition this broker does not host is
NOT_LEADER_OR_FOLLOWER when the cluster has it elsewhere (the client's metadata is
stale) and UNKNOWN_TOPIC_OR_PARTITION when the cluster has no such partition.
"""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from spark_replica.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from spark_replica.topics import TopicPartition

# The low watermark answered with an error: Kafka's "unknown".
UNKNOWN_LOW_WATERMARK = -1


def delete_records_before(ctx: BrokerContext, tp: TopicPartition, offset: int) -> int:
    """Delete the records of `tp` below `offset` on this leader; the new log start."""
    partition = ctx.replicas.partitions.get(tp)
    if partition is None:
        if tp in ctx.metadata.partitions:
            raise NotLeaderOrFollowerError(
                f"broker {ctx.replicas.config.broker_id} does not lead {tp}"
            )
        raise UnknownTopicOrPartitionError(f"{tp} does not exist")
    return partition.delete_records_before(offset)
