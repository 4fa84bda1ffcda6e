"""Serving the replog listener's DeleteRecords: each partition answered on its own.

Authorization (Delete on every named topic) is decided before the handler runs
(authorization.py); the rules are brokerd/core/delete_records.py's, shared with the
Kafka listener.
"""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from brokerd.core.delete_records import delete_records_before
from brokerd.core.partitions import answer_each_partition
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)


async def handle_delete_records(
    ctx: BrokerContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    def serve(
        tp: TopicPartition, entry: DeleteRecordsPartition, result: DeleteRecordsPartitionResult
    ) -> None:
        result.low_watermark = delete_records_before(ctx, tp, entry.offset)

    return DeleteRecordsResponse(
        answer_each_partition(
            request.topics, DeleteRecordsTopicResult, DeleteRecordsPartitionResult, serve
        )
    )
