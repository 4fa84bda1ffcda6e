"""Serving the replog listener's DeleteRecords: each partition answered on its own.

Authorization (Delete on every named topic) is decided before the handler runs
(authorization.py); the rules and the wait for the replicas are
brokerd/core/delete_records.py's, shared with the Kafka listener.
"""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from brokerd.core.deferred import Deferred
from brokerd.core.delete_records import (
    Deletion,
    answer_when_replicated,
    delete_records_before,
)
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
) -> DeleteRecordsResponse | Deferred:
    deletions: list[Deletion] = []

    def serve(
        tp: TopicPartition, entry: DeleteRecordsPartition, result: DeleteRecordsPartitionResult
    ) -> None:
        deletions.append(delete_records_before(ctx, tp, entry.offset, result))

    response = DeleteRecordsResponse(
        answer_each_partition(
            request.topics, DeleteRecordsTopicResult, DeleteRecordsPartitionResult, serve
        )
    )
    return answer_when_replicated(ctx, deletions, request.timeout_ms, lambda: response)
