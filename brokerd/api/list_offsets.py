"""Serving ListOffsets: earliest, latest (the HW) and the first offset at or after a time."""

from __future__ import annotations

from brokerd.api.context import BrokerContext, answer_each_partition
from spark_replica.errors import InvalidRequestError
from spark_replica.protocol.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResult,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResult,
)
from spark_replica.topics import TopicPartition


async def handle_list_offsets(
    ctx: BrokerContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    def serve(
        tp: TopicPartition, entry: ListOffsetsPartition, result: ListOffsetsPartitionResult
    ) -> None:
        partition = ctx.replicas.get_partition(tp)
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

    return ListOffsetsResponse(
        answer_each_partition(
            request.topics, ListOffsetsTopicResult, ListOffsetsPartitionResult, serve
        )
    )
