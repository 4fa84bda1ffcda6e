"""Serving replog's Produce: decode, the produce core (brokerd/core/produce.py), encode.

What is replog's own is the preparing: the stored batches a client sends are validated
(brokerd/core/batch_validation.py) before they are appended, on the loop when cheap and
on a produce worker when a payload declares more than INLINE_DECOMPRESSED_BYTES.
Transactional batches come in a version 1 request naming their transactional id, whose
Write the dialect has checked (brokerd/native/authorization.py); the partition's producer
state opens the transaction at the first of them, as for the Kafka listener's.
"""

from __future__ import annotations

from functools import partial

from brokerd.core.batch_validation import decompressed_payload_bytes, validate_produced
from brokerd.core.context import BrokerContext
from brokerd.core.deferred import Deferred
from brokerd.core.partitions import answer_each_partition
from brokerd.core.produce import (
    Accepted,
    Records,
    accept,
    answer_after_appends,
    close_if_unanswered_failed,
    on_produce_worker,
    prepare_and_append,
    repeated_partitions,
)
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import (
    ACKS_NONE,
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResult,
)

# Compressed replog payloads declaring at most this many bytes decompressed are
# validated on the loop, where a worker's hand-over would cost more than the work.
INLINE_DECOMPRESSED_BYTES = 1024 * 1024


async def _validated(transactional_id: str | None, entry: Accepted) -> Records:
    """Validation runs on the loop where it is cheap: uncompressed payloads are read in
    place, small compressed ones decompress in well under a millisecond. Payloads
    declaring more (up to max.message.bytes) decompress on a produce worker."""
    records, limit = entry.records, entry.max_records_bytes
    if decompressed_payload_bytes(records, limit) <= INLINE_DECOMPRESSED_BYTES:
        validate_produced(records, transactional_id)
        return records
    await on_produce_worker(validate_produced, records, transactional_id)
    return records


async def handle_produce(
    ctx: BrokerContext, request: ProduceRequest
) -> ProduceResponse | Deferred | None:
    """Answer per partition; with acks=0 answer nothing (the client does not wait); with
    acks=all, answer once the HW has passed the appends (a Deferred)."""
    now = now_ms()
    accepted: list[Accepted] = []
    repeated = repeated_partitions(
        (topic.topic, entry.partition) for topic in request.topics for entry in topic.partitions
    )

    def check(tp: TopicPartition, entry: ProducePartition, result: ProducePartitionResult) -> None:
        accepted.append(accept(ctx, tp, entry.records, request.acks, repeated, result))

    topics = answer_each_partition(
        request.topics, ProduceTopicResult, ProducePartitionResult, check
    )
    validated = partial(_validated, request.transactional_id)
    appended = await prepare_and_append(ctx, accepted, request.acks, now, validated)
    if request.acks == ACKS_NONE:
        close_if_unanswered_failed(
            request.acks, (result for topic in topics for result in topic.partitions)
        )
        return None
    return answer_after_appends(
        appended, request.acks, request.timeout_ms, lambda: ProduceResponse(topics)
    )
