"""Serving ListOffsets: earliest, latest (the HW) and the first offset at or after a time.

Under read_committed (ListOffsets v1) latest is the last stable offset, and a time is
looked up below it (brokerd/core/isolation.py, as the Kafka listener's).
"""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from brokerd.core.isolation import readable_end
from brokerd.core.partitions import answer_each_partition
from brokerd.log import Log
from spark_replica.errors import InvalidRequestError
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.isolation import IsolationLevel
from spark_replica.wire.native.list_offsets import (
    DEBUG_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResult,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResult,
)


async def handle_list_offsets(
    ctx: BrokerContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    read_committed = request.isolation_level == IsolationLevel.READ_COMMITTED

    def serve(
        tp: TopicPartition, entry: ListOffsetsPartition, result: ListOffsetsPartitionResult
    ) -> None:
        partition = ctx.replicas.get_partition(tp)
        if request.replica_id == DEBUG_REPLICA_ID:
            _serve_debug(partition.log, entry, result)
            return
        partition.require_leader()
        partition.check_leader_epoch(entry.current_leader_epoch)
        end = readable_end(partition, read_committed)
        if entry.timestamp == EARLIEST_TIMESTAMP:
            result.offset = partition.log.log_start_offset
        elif entry.timestamp == LATEST_TIMESTAMP:
            result.offset = end
        elif entry.timestamp < 0:
            raise InvalidRequestError(
                f"timestamp {entry.timestamp}: use -2 (earliest), -1 (latest) "
                "or a time in ms since the epoch"
            )
        else:
            found = partition.log.offset_for_timestamp(entry.timestamp)
            if found is not None and found[0] < end:
                result.offset, result.timestamp = found

    return ListOffsetsResponse(
        answer_each_partition(
            request.topics, ListOffsetsTopicResult, ListOffsetsPartitionResult, serve
        )
    )


def _serve_debug(log: Log, entry: ListOffsetsPartition, result: ListOffsetsPartitionResult) -> None:
    """Any replica's own log start or end offset, for describing replicas."""
    if entry.timestamp == EARLIEST_TIMESTAMP:
        result.offset = log.log_start_offset
    elif entry.timestamp == LATEST_TIMESTAMP:
        result.offset = log.log_end_offset
    else:
        raise InvalidRequestError("a debug ListOffsets asks for -2 (earliest) or -1 (latest)")
