"""Kafka's Produce: record batches v2 converted to stored batches, then replog's append.

The conversion (spark_replica/wire/kafka/records/convert.py) keeps each batch's producer id,
epoch and base sequence, so a Kafka idempotent producer is checked by the partition's
producer state exactly as replog's own is: a retry is answered with the offsets first
given, a batch from before the remembered ones with DUPLICATE_SEQUENCE_NUMBER, a gap
with OUT_OF_ORDER_SEQUENCE_NUMBER. Appending, acks, min.insync.replicas and the wait
for the HW are the produce core's (brokerd/core/produce.py), shared with the replog listener.

Transactional batches (bit 4) are appended like any idempotent producer's, and the
partition's producer state opens the producer's transaction at the first of them; only
the coordinator's markers (WriteTxnMarkers) end it. As Kafka decides it: a request
holding any transactional batch needs a transactional id and Write on it (besides Write
on each topic), or every partition of it is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a request with a transactional id and no
transactional batch is served as if it had none; control batches and transactional
batches without a producer id are refused (INVALID_RECORD) by the conversion. Like Kafka
before KIP-890, the leader does not ask the coordinator whether the partition was added
to the transaction: a producer that writes without AddPartitionsToTxn opens a
transaction no marker will end (docs/kafka.md, "hanging transactions").

What a conversion may cost is bounded before it starts. A partition named twice in one
request is refused (INVALID_RECORD) without its records being read. The records of one
partition, decompressed, count against the topic's max.message.bytes (RECORD_TOO_LARGE
past it; decompression stops there). Small uncompressed records are converted on the
event loop, where a worker's hand-over would cost more than the work; anything larger,
and anything compressed (a few kilobytes can decompress to the whole limit), is
converted on a produce worker thread (brokerd/core/produce.py), so that one client's bomb
never stalls the others. Partitions are converted one after another, so one request
holds at most one partition's decompressed records at a time; appends stay on the loop,
in request order.
"""

from __future__ import annotations

from brokerd.core.authorization import (
    authorize_topic,
    authorize_transactional_id,
    topic_denied,
    transactional_id_denied,
)
from brokerd.core.context import BrokerContext
from brokerd.core.deferred import Deferred
from brokerd.core.partitions import serve_partition
from brokerd.core.produce import (
    ACKS_NONE,
    Accepted,
    Records,
    accept,
    answer_after_appends,
    close_if_unanswered_failed,
    on_produce_worker,
    prepare_and_append,
    repeated_partitions,
)
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import BrokerResponseError, TransactionalIdAuthorizationFailedError
from spark_replica.records import now_ms
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.records.batch import all_uncompressed, has_transactional_batch
from spark_replica.wire.kafka.records.convert import kafka_to_replog
from spark_replica.wire.schema import Data

# Uncompressed records up to this size are converted on the event loop (tens of
# microseconds); larger or compressed ones on a produce worker.
INLINE_CONVERT_BYTES = 64 * 1024


async def stored_batches(records: Records, max_records_bytes: int) -> bytes:
    """The stored batches of one partition's produced records, converted where it is
    cheapest (see the module's docstring); the conversion's typed errors as raised."""
    if len(records) <= INLINE_CONVERT_BYTES and all_uncompressed(records):
        return kafka_to_replog(records, max_records_bytes=max_records_bytes)
    return await on_produce_worker(kafka_to_replog, records, "none", max_records_bytes)


async def _converted(entry: Accepted) -> Records:
    return await stored_batches(entry.records, entry.max_records_bytes)


def transactional_denied(ctx: BrokerContext, request: KafkaRequest) -> BrokerResponseError | None:
    """Why the whole request is refused for its transactional batches, if it is: they
    need the request's transactional id and Write on it (Kafka's rule, checked before
    any topic's)."""
    body = request.body
    if not any(
        entry.records and has_transactional_batch(entry.records)
        for topic in body.topic_data
        for entry in topic.partition_data
    ):
        return None
    transactional_id = body.transactional_id
    if transactional_id is None:
        return TransactionalIdAuthorizationFailedError(
            "the request holds transactional batches but no transactional id; a "
            "transactional producer sends its transactional.id with them"
        )
    if not authorize_transactional_id(ctx, request, Operation.WRITE, transactional_id):
        return transactional_id_denied(request, Operation.WRITE, transactional_id)
    return None


async def handle_produce(ctx: BrokerContext, request: KafkaRequest) -> Data | Deferred | None:
    body = request.body
    now = now_ms()
    repeated = repeated_partitions(
        (topic.name, entry.index) for topic in body.topic_data for entry in topic.partition_data
    )
    accepted: list[Accepted] = []
    responses = []
    transactional_refusal = transactional_denied(ctx, request)
    for topic in body.topic_data:
        name = topic.name
        denied = transactional_refusal
        if denied is None and not authorize_topic(ctx, request, Operation.WRITE, name):
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

            def check(tp: TopicPartition, entry: Data = entry, result: Data = result) -> None:
                accepted.append(accept(ctx, tp, entry.records, body.acks, repeated, result))

            serve_partition(name, entry.index, result, denied, check)
            results.append(result)
        responses.append(Data(name=name, partition_responses=results))
    appended = await prepare_and_append(ctx, accepted, body.acks, now, _converted)
    if body.acks == ACKS_NONE:
        close_if_unanswered_failed(
            body.acks,
            (result for topic in responses for result in topic.partition_responses),
        )
        return None
    return answer_after_appends(
        appended, body.acks, body.timeout_ms, lambda: Data(responses=responses, throttle_time_ms=0)
    )
