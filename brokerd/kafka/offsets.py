"""Kafka's ListOffsets and OffsetForLeaderEpoch, on the partitions replog keeps.

ListOffsets: -2 is the log start, -1 the HW (the end of what a consumer may read; for
IsolationLevel 1, read_committed, the last stable offset), and a time the first offset
whose record is at least that recent, below that end; nothing that recent answers
offset -1. Every answer carries the leader epoch, so a consumer can tell a truncation
after an unclean leader change.

OffsetForLeaderEpoch: the end offset of the asked epoch on this leader's log, which a
consumer uses to detect that its position fell in a part of the log since truncated.
"""

from __future__ import annotations

from brokerd.core.authorization import authorize_topic, topic_denied
from brokerd.core.context import BrokerContext
from brokerd.core.partitions import serve_partition
from brokerd.kafka.request import KafkaRequest
from brokerd.replication.partition import Partition
from spark_replica.errors import BrokerResponseError, InvalidRequestError
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition
from spark_replica.wire.schema import Data

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
UNKNOWN = -1
READ_COMMITTED = 1  # Kafka's IsolationLevel: 0 read_uncommitted, 1 read_committed


def _denied(ctx: BrokerContext, request: KafkaRequest, topic: str) -> BrokerResponseError | None:
    if authorize_topic(ctx, request, Operation.DESCRIBE, topic):
        return None
    return topic_denied(request, Operation.DESCRIBE, topic)


def _led(ctx: BrokerContext, tp: TopicPartition, current_leader_epoch: int) -> Partition:
    partition = ctx.replicas.get_partition(tp)
    partition.require_leader()
    partition.check_leader_epoch(current_leader_epoch)
    return partition


def offset_at(
    partition: Partition, timestamp: int, *, read_committed: bool = False
) -> tuple[int, int]:
    """(offset, timestamp) answering a ListOffsets for `timestamp` on a leader."""
    if timestamp == EARLIEST_TIMESTAMP:
        return partition.log.log_start_offset, UNKNOWN
    readable_end = partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        return readable_end, UNKNOWN
    if timestamp < 0:
        raise InvalidRequestError(
            f"timestamp {timestamp}: use -2 (earliest), -1 (latest) or a time in ms since the epoch"
        )
    found = partition.log.offset_for_timestamp(timestamp)
    if found is not None and found[0] < readable_end:
        return found
    return UNKNOWN, UNKNOWN


async def handle_list_offsets(ctx: BrokerContext, request: KafkaRequest) -> Data:
    topics = []
    read_committed = request.body.isolation_level == READ_COMMITTED
    for topic in request.body.topics:
        denied = _denied(ctx, request, topic.name)
        results = []
        for entry in topic.partitions:
            result = Data(
                partition_index=entry.partition_index,
                error_code=0,
                timestamp=UNKNOWN,
                offset=UNKNOWN,
                leader_epoch=-1,
            )

            def serve(tp: TopicPartition, entry: Data = entry, result: Data = result) -> None:
                partition = _led(ctx, tp, entry.current_leader_epoch)
                result.offset, result.timestamp = offset_at(
                    partition, entry.timestamp, read_committed=read_committed
                )
                result.leader_epoch = partition.leader_epoch

            serve_partition(topic.name, entry.partition_index, result, denied, serve)
            results.append(result)
        topics.append(Data(name=topic.name, partitions=results))
    return Data(throttle_time_ms=0, topics=topics)


async def handle_offset_for_leader_epoch(ctx: BrokerContext, request: KafkaRequest) -> Data:
    topics = []
    for topic in request.body.topics:
        denied = _denied(ctx, request, topic.topic)
        results = []
        for entry in topic.partitions:
            result = Data(
                error_code=0, partition=entry.partition, leader_epoch=UNKNOWN, end_offset=UNKNOWN
            )

            def serve(tp: TopicPartition, entry: Data = entry, result: Data = result) -> None:
                partition = _led(ctx, tp, entry.current_leader_epoch)
                result.leader_epoch, result.end_offset = partition.log.end_offset_for_epoch(
                    entry.leader_epoch
                )

            serve_partition(topic.topic, entry.partition, result, denied, serve)
            results.append(result)
        topics.append(Data(topic=topic.topic, partitions=results))
    return Data(throttle_time_ms=0, topics=topics)
