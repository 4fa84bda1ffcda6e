"""Serving Produce: append to led partitions, then wait for the HW when acks=all.

An acks=all batch is answered success once the HW has passed it over an ISR of at least
min.insync.replicas members; if the ISR shrank below that after the append, it is
answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records stay, and an idempotent retry is
answered as a duplicate). The wait is the request's timeout_ms, capped.

A batch an idempotent producer appended long ago (older than the batches the partition
remembers with their offsets) is answered DUPLICATE_SEQUENCE_NUMBER, and the producer
counts it as delivered; with acks=all only once the HW has passed everything up to the
remembered batches, so that such an answer never stands for records a failover can lose.
"""

from __future__ import annotations

import asyncio

from brokerd.api.context import BrokerContext, answer_each_partition
from brokerd.batch_validation import validate_produced
from brokerd.partition import Partition
from spark_replica.errors import (
    BrokerResponseError,
    DuplicateSequenceNumberError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    wire_message,
)
from spark_replica.protocol.produce import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResult,
)
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition

VALID_ACKS = (ACKS_NONE, ACKS_LEADER, ACKS_ALL)
# An acks=all produce holds its request's memory while it waits: never longer than this,
# whatever timeout_ms says.
MAX_PRODUCE_TIMEOUT_MS = 300_000


def produce_wait_s(timeout_ms: int) -> float:
    """How long an acks=all produce waits for the HW: its timeout, within [0, the cap]."""
    return min(max(timeout_ms, 0), MAX_PRODUCE_TIMEOUT_MS) / 1000


async def handle_produce(ctx: BrokerContext, request: ProduceRequest) -> ProduceResponse | None:
    """Answer per partition; with acks=0 answer nothing (the client does not wait)."""
    now = now_ms()
    waits: list[tuple[ProducePartitionResult, Partition, int]] = []
    old_duplicates: list[tuple[ProducePartitionResult, TopicPartition]] = []

    def serve(tp: TopicPartition, entry: ProducePartition, result: ProducePartitionResult) -> None:
        if request.acks not in VALID_ACKS:
            raise InvalidRequiredAcksError(f"acks={request.acks}; use 0, 1 or -1 (all)")
        if not entry.records:
            raise InvalidRecordError("the partition's record set is empty")
        partition = ctx.replicas.get_partition(tp)
        validate_produced(entry.records)
        info = partition.append_as_leader(entry.records, request.acks, now)
        result.base_offset = info.first_offset
        result.log_start_offset = partition.log.log_start_offset
        if info.first_offset < 0:
            old_duplicates.append((result, tp))
        if request.acks == ACKS_ALL:
            waits.append((result, partition, info.last_offset))

    topics = answer_each_partition(
        request.topics, ProduceTopicResult, ProducePartitionResult, serve
    )
    if waits:
        timeout_s = produce_wait_s(request.timeout_ms)
        outcomes = await asyncio.gather(
            *(p.wait_for_high_watermark(last, timeout_s) for _, p, last in waits),
            return_exceptions=True,
        )
        for (result, _, _), outcome in zip(waits, outcomes, strict=True):
            if isinstance(outcome, BrokerResponseError):
                result.error_code = outcome.code
                result.error_message = wire_message(outcome)
    for result, tp in old_duplicates:
        if not result.error_code:
            result.error_code = DuplicateSequenceNumberError.code
            result.error_message = (
                f"{tp}: the batch repeats sequence numbers appended before the producer's "
                "remembered batches; it was not appended again"
            )
    if request.acks == ACKS_NONE:
        return None
    return ProduceResponse(topics)
