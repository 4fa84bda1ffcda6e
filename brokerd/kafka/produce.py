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

What a conversion may cost is bounded before it starts. A partition named twice in one
request is refused (INVALID_RECORD) without its records being read. The records of one
partition, decompressed, count against the topic's max.message.bytes (RECORD_TOO_LARGE
past it; decompression stops there). Small uncompressed records are converted on the
event loop, where a worker's hand-over would cost more than the work; anything larger,
and anything compressed (a few kilobytes can decompress to the whole limit), is
converted on one of CONVERT_WORKERS threads, so that one client's bomb never stalls the
others. Partitions are converted one after another, so one request holds at most one
partition's decompressed records at a time; appends stay on the loop, in request order.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from brokerd.api.context import BrokerContext
from brokerd.api.produce import (
    Appended,
    Records,
    append_stored,
    close_if_unanswered_failed,
    complete_appends,
    led_partition,
    repeated_error,
    repeated_partitions,
)
from brokerd.kafka.authorization import authorize_topic, topic_denied
from brokerd.kafka.partitions import SERVING_ERRORS, serve_partition, set_error
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import BrokerResponseError, TransactionalIdAuthorizationFailedError
from spark_replica.kafka_wire.convert import kafka_to_replog
from spark_replica.kafka_wire.record_batch import all_uncompressed
from spark_replica.kafka_wire.schema import Data
from spark_replica.protocol.produce import ACKS_NONE
from spark_replica.records import now_ms
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition

# Uncompressed records up to this size are converted on the event loop (tens of
# microseconds); larger or compressed ones on a worker.
INLINE_CONVERT_BYTES = 64 * 1024
# Conversions running at once, broker-wide: each holds up to max.message.bytes of
# decompressed records. Their own pool, so that they never queue ZooKeeper reads and
# file work behind them on the loop's default executor.
CONVERT_WORKERS = 2
_converters = ThreadPoolExecutor(CONVERT_WORKERS, thread_name_prefix="kafka-produce-convert")


async def stored_batches(records: Records, max_records_bytes: int) -> bytes:
    """The stored batches of one partition's produced records, converted where it is
    cheapest (see the module's docstring); the conversion's typed errors as raised."""
    if len(records) <= INLINE_CONVERT_BYTES and all_uncompressed(records):
        return kafka_to_replog(records, max_records_bytes=max_records_bytes)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        _converters, kafka_to_replog, records, "none", max_records_bytes
    )


@dataclass(slots=True)
class _Entry:
    """One partition entry of the request that passed the checks made before converting."""

    tp: TopicPartition
    records: Records
    max_records_bytes: int
    result: Data


async def handle_produce(ctx: BrokerContext, request: KafkaRequest) -> Data | None:
    body = request.body
    now = now_ms()
    repeated = repeated_partitions(
        (topic.name, entry.index) for topic in body.topic_data for entry in topic.partition_data
    )
    accepted: list[_Entry] = []
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

            def check(tp: TopicPartition, entry: Data = entry, result: Data = result) -> None:
                if repeated and (tp.topic, tp.partition) in repeated:
                    raise repeated_error(tp)
                partition, records = led_partition(ctx, tp, entry.records, body.acks)
                accepted.append(_Entry(tp, records, partition.log.config.max_batch_bytes, result))

            serve_partition(name, entry.index, result, denied, check)
            results.append(result)
        responses.append(Data(name=name, partition_responses=results))
    appended = await _convert_and_append(ctx, accepted, body.acks, now)
    await complete_appends(appended, body.acks, body.timeout_ms)
    close_if_unanswered_failed(
        body.acks,
        (result for topic in responses for result in topic.partition_responses),
    )
    if body.acks == ACKS_NONE:
        return None
    return Data(responses=responses, throttle_time_ms=0)


async def _convert_and_append(
    ctx: BrokerContext, accepted: list[_Entry], acks: int, now: int
) -> list[Appended]:
    """Convert and append each accepted entry in request order; a typed error becomes
    that partition's answer and touches nothing else."""
    appended: list[Appended] = []
    for entry in accepted:
        result = entry.result
        try:
            stored = await stored_batches(entry.records, entry.max_records_bytes)
            partition, info = append_stored(ctx, entry.tp, stored, len(entry.records), acks, now)
        except SERVING_ERRORS as exc:
            set_error(result, exc)
            continue
        result.base_offset = info.first_offset
        result.log_start_offset = partition.log.log_start_offset
        appended.append(Appended(result, entry.tp, partition, info))
    return appended
