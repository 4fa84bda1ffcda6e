"""Serving ListOffsets: earliest, latest (the HW) and the first offset at or after a time."""

from __future__ import annotations

from brokerd.api.context import BrokerContext
from spark_replica.errors import BrokerResponseError, InvalidRequestError, code_of
from spark_replica.protocol.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartitionResult,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResult,
)
from spark_replica.topics import TopicPartition, validate_topic_name


async def handle_list_offsets(
    ctx: BrokerContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    topics = []
    for topic in request.topics:
        topic_result = ListOffsetsTopicResult(topic.topic)
        for entry in topic.partitions:
            result = ListOffsetsPartitionResult(entry.partition)
            try:
                validate_topic_name(topic.topic)
                partition = ctx.replicas.get_partition(TopicPartition(topic.topic, entry.partition))
                partition.require_leader()
                partition.check_leader_epoch(entry.current_leader_epoch)
                if entry.timestamp == EARLIEST_TIMESTAMP:
                    result.offset = partition.log.log_start_offset
                elif entry.timestamp == LATEST_TIMESTAMP:
                    result.offset = partition.high_watermark
                elif entry.timestamp < 0:
                    raise InvalidRequestError(
                        f"timestamp {entry.timestamp}: use -2 (earliest), -1 (latest) "
                        "or a time in ms since the epoch"
                    )
                else:
                    found = partition.log.offset_for_timestamp(entry.timestamp)
                    if found is not None and found[0] < partition.high_watermark:
                        result.offset, result.timestamp = found
            except BrokerResponseError as exc:
                result.error_code = code_of(exc)
                result.error_message = str(exc)
            topic_result.partitions.append(result)
        topics.append(topic_result)
    return ListOffsetsResponse(topics)
