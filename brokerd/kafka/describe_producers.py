"""Kafka's DescribeProducers (api key 61, v0): the active producers of partitions, each
answered by its leader from its producer state (brokerd/core/describe_producers.py
decides the answer; this module decodes and encodes).

Each partition is answered on its own: its producers, or an error with none
(TOPIC_AUTHORIZATION_FAILED without Read on the topic, as in Kafka;
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER) and its message.
"""

from __future__ import annotations

from brokerd.core.authorization import authorize_topic, topic_denied
from brokerd.core.context import BrokerContext
from brokerd.core.describe_producers import active_producers
from brokerd.core.partitions import serve_partition
from brokerd.kafka.request import KafkaRequest
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition
from spark_replica.wire.schema import Data


async def handle_describe_producers(ctx: BrokerContext, request: KafkaRequest) -> Data:
    topics = []
    for topic in request.body.topics:
        denied = None
        if not authorize_topic(ctx, request, Operation.READ, topic.name):
            denied = topic_denied(request, Operation.READ, topic.name)
        results = []
        for index in topic.partition_indexes:
            result = Data(
                partition_index=index, error_code=0, error_message=None, active_producers=[]
            )

            def serve(tp: TopicPartition, result: Data = result) -> None:
                result.active_producers = [
                    Data(
                        producer_id=producer.producer_id,
                        producer_epoch=producer.producer_epoch,
                        last_sequence=producer.last_sequence,
                        last_timestamp=producer.last_timestamp,
                        coordinator_epoch=producer.coordinator_epoch,
                        current_txn_start_offset=producer.current_txn_start_offset,
                    )
                    for producer in active_producers(ctx, tp)
                ]

            serve_partition(topic.name, index, result, denied, serve)
            results.append(result)
        topics.append(Data(name=topic.name, partitions=results))
    return Data(throttle_time_ms=0, topics=topics)
