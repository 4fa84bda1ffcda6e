"""Kafka's Produce: record batches v2 converted to stored batches, then replog's append.

The conversion (spark_replica/kafka_wire/convert.py) keeps each batch's producer id,
epoch and base sequence, so a Kafka idempotent producer is checked by the partition's
producer state exactly as replog's own is: a retry is answered with the offsets first
given, a batch from before the remembered ones with DUPLICATE_SEQUENCE_NUMBER, a gap
with OUT_OF_ORDER_SEQUENCE_NUMBER. Appending, acks, min.insync.replicas and the wait
for the HW are brokerd/api/produce.py's, shared with the replog listener.

Transactions are not served: a request carrying a transactional id is refused per
partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (InitProducerId already refused
the id, naming transactions).
"""

from __future__ import annotations

from brokerd.api.context import BrokerContext
from brokerd.api.produce import (
    Appended,
    append_records,
    close_if_unanswered_failed,
    complete_appends,
)
from brokerd.kafka.authorization import authorize_topic, topic_denied
from brokerd.kafka.partitions import serve_partition
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import BrokerResponseError, TransactionalIdAuthorizationFailedError
from spark_replica.kafka_wire.convert import kafka_to_replog
from spark_replica.kafka_wire.schema import Data
from spark_replica.protocol.produce import ACKS_NONE
from spark_replica.records import now_ms
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition


async def handle_produce(ctx: BrokerContext, request: KafkaRequest) -> Data | None:
    body = request.body
    now = now_ms()
    appended: list[Appended] = []
    responses = []
    for topic in body.topic_data:
        name = topic.name
        denied: BrokerResponseError | None = None
        if body.transactional_id is not None:
            denied = TransactionalIdAuthorizationFailedError(
                "transactions are not supported by replog; produce without transactional.id"
            )
        elif not authorize_topic(ctx, request, Operation.WRITE, name):
            denied = topic_denied(request, Operation.WRITE, name)
        results = []
        for entry in topic.partition_data:
            result = Data(
                index=entry.index,
                error_code=0,
                error_message=None,
                base_offset=-1,
                log_append_time_ms=-1,
                log_start_offset=-1,
                record_errors=[],
            )

            def serve(tp: TopicPartition, entry: Data = entry, result: Data = result) -> None:
                partition, info = append_records(
                    ctx, tp, entry.records, body.acks, now, kafka_to_replog
                )
                result.base_offset = info.first_offset
                result.log_start_offset = partition.log.log_start_offset
                appended.append(Appended(result, tp, partition, info))

            serve_partition(name, entry.index, result, denied, serve)
            results.append(result)
        responses.append(Data(name=name, partition_responses=results))
    await complete_appends(appended, body.acks, body.timeout_ms)
    close_if_unanswered_failed(
        body.acks,
        (result for topic in responses for result in topic.partition_responses),
    )
    if body.acks == ACKS_NONE:
        return None
    return Data(responses=responses, throttle_time_ms=0)
