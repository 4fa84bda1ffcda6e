"""Kafka's DeleteRecords (api key 21, v0-v2): move partitions' log starts on their leader.

Each partition is answered on its own: its new low watermark (log start), or an error
(TOPIC_AUTHORIZATION_FAILED without Delete on the topic, UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE past the high watermark) with low watermark
-1, or REQUEST_TIMED_OUT when its replicas did not all follow within the request's
timeout. The rules and the answer's timing are brokerd/core/delete_records.py's.
"""

from __future__ import annotations

from brokerd.core.authorization import authorize_topic, topic_denied
from brokerd.core.context import BrokerContext
from brokerd.core.deferred import Deferred
from brokerd.core.delete_records import (
    UNKNOWN_LOW_WATERMARK,
    Deletion,
    answer_when_replicated,
    delete_records_before,
)
from brokerd.core.partitions import serve_partition
from brokerd.kafka.request import KafkaRequest
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition
from spark_replica.wire.schema import Data


async def handle_delete_records(ctx: BrokerContext, request: KafkaRequest) -> Data | Deferred:
    topics = []
    deletions: list[Deletion] = []
    for topic in request.body.topics:
        denied = None
        if not authorize_topic(ctx, request, Operation.DELETE, topic.name):
            denied = topic_denied(request, Operation.DELETE, topic.name)
        results = []
        for entry in topic.partitions:
            result = Data(
                partition_index=entry.partition_index,
                low_watermark=UNKNOWN_LOW_WATERMARK,
                error_code=0,
            )

            def serve(tp: TopicPartition, entry: Data = entry, result: Data = result) -> None:
                deletions.append(delete_records_before(ctx, tp, entry.offset, result))

            serve_partition(topic.name, entry.partition_index, result, denied, serve)
            results.append(result)
        topics.append(Data(name=topic.name, partitions=results))
    response = Data(throttle_time_ms=0, topics=topics)
    return answer_when_replicated(ctx, deletions, request.body.timeout_ms, lambda: response)
