"""The produce core both listeners append through: accept, prepare and append, complete.

Each dialect decodes its request, `accept`s each entry (this broker leads the partition,
the entry is its only one), then `prepare_and_append` turns the entries into stored
batches with the dialect's own `prepare` (replog's validates the stored batches it is
sent, brokerd/native/produce.py; Kafka's converts its record batches,
brokerd/kafka/produce.py) and appends them, and `answer_after_appends` answers, after the
HW has passed the appends when acks=all: that wait is a Deferred (brokerd/core/deferred.py),
so that the connection reads on meanwhile. Only the decoding, the preparing and the shape
of the answer differ. Preparing that may take milliseconds (decompressing, bounded by the
topic's max.message.bytes) runs on the produce workers, off the event loop.

An acks=all batch is answered success once the HW has passed it over an ISR of at least
min.insync.replicas members; if the ISR shrank below that after the append, it is
answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records stay, and an idempotent retry is
answered as a duplicate). The wait is the request's timeout_ms, capped.

A batch an idempotent producer appended long ago (older than the batches the partition
remembers with their offsets) is answered DUPLICATE_SEQUENCE_NUMBER, and the producer
counts it as delivered; with acks=all only once the HW has passed everything up to the
remembered batches, so that such an answer never stands for records a failover can lose.

A request naming one partition more than once is refused for that partition (every
entry of it INVALID_RECORD, as Kafka does) before any of its records are read.

An acks=0 produce has no answer to carry an error, so one that fails for any partition
raises UnansweredProduceFailed and the listener closes the connection, as Kafka does: the
client sees the connection drop, refreshes its metadata and sends to the new leader,
instead of writing on to a broker that no longer leads and drops every record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from brokerd.core.batch_validation import require_keys
from brokerd.core.context import BrokerContext
from brokerd.core.deferred import Deferred
from brokerd.log import AppendInfo
from brokerd.replication.partition import Partition
from spark_replica.errors import (
    BrokerResponseError,
    DuplicateSequenceNumberError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    ProtocolError,
    code_of,
    wire_message,
)
from spark_replica.topics import TopicPartition, is_internal

# What a produce asks to be answered after, the same numbers in both protocols: never
# (no answer is read), the leader's append, every in-sync replica's.
ACKS_NONE = 0
ACKS_LEADER = 1
ACKS_ALL = -1
VALID_ACKS = (ACKS_NONE, ACKS_LEADER, ACKS_ALL)
# An acks=all produce holds its request's memory while it waits: never longer than this,
# whatever timeout_ms says.
MAX_PRODUCE_TIMEOUT_MS = 300_000

Records = bytes | bytearray | memoryview
R = TypeVar("R")
# Checks and conversions of produced records that may take milliseconds (decompressing,
# up to the topic's max.message.bytes) run on these threads, never on the event loop;
# their own pool, so that ZooKeeper reads and file work on the loop's default executor
# never queue behind them. Each holds at most one partition's decompressed records.
PRODUCE_WORKERS = 2
_produce_workers = ThreadPoolExecutor(PRODUCE_WORKERS, thread_name_prefix="produce-worker")


class UnansweredProduceFailed(Exception):
    """An acks=0 produce failed for some partition: the listener closes the connection,
    the only way to tell a client that reads no answer."""


def close_if_unanswered_failed(acks: int, results: Iterable[Any]) -> None:
    """With acks=0, raise UnansweredProduceFailed if any partition result has an error."""
    if acks != ACKS_NONE:
        return
    failed = [result for result in results if result.error_code]
    if failed:
        raise UnansweredProduceFailed(
            f"an acks=0 produce failed for {len(failed)} partition(s), the first with "
            f"error code {failed[0].error_code}: {failed[0].error_message}"
        )


def produce_wait_s(timeout_ms: int) -> float:
    """How long an acks=all produce waits for the HW: its timeout, within [0, the cap]."""
    return min(max(timeout_ms, 0), MAX_PRODUCE_TIMEOUT_MS) / 1000


@dataclass(slots=True)
class Appended:
    """One partition's append, waiting to be answered. `result` is the protocol's
    partition answer: anything with error_code and error_message attributes."""

    result: Any
    tp: TopicPartition
    partition: Partition
    info: AppendInfo


@dataclass(slots=True)
class Accepted:
    """One partition entry of a request that passed the checks made before its records
    are read: this broker leads the partition, and the entry is its only one."""

    tp: TopicPartition
    records: Records
    max_records_bytes: int  # the topic's max.message.bytes, which bounds decompression
    result: Any


def accept(
    ctx: BrokerContext,
    tp: TopicPartition,
    records: Records | None,
    acks: int,
    repeated: set[tuple[str, int]],
    result: Any,
) -> Accepted:
    """The entry, accepted; else the typed error refusing it (see repeated_partitions)."""
    if repeated and (tp.topic, tp.partition) in repeated:
        raise InvalidRecordError(f"the request names {tp} more than once; none of it was appended")
    partition, present = _led_partition(ctx, tp, records, acks)
    return Accepted(tp, present, partition.log.config.max_batch_bytes, result)


async def prepare_and_append(
    ctx: BrokerContext,
    accepted: list[Accepted],
    acks: int,
    now: int,
    prepare: Callable[[Accepted], Awaitable[Records]],
) -> list[Appended]:
    """Turn each accepted entry into stored batches with `prepare` (checking or
    converting them, maybe on a worker) and append them, one entry after another in
    request order, so that a request holds one partition's prepared records at a time.
    A typed error becomes that partition's answer and touches nothing else."""
    appended: list[Appended] = []
    for entry in accepted:
        result = entry.result
        try:
            stored = await prepare(entry)
            partition, info = _append_stored(ctx, entry.tp, stored, len(entry.records), acks, now)
        except (BrokerResponseError, ProtocolError) as exc:
            result.error_code = code_of(exc)
            result.error_message = wire_message(exc)
            continue
        result.base_offset = info.first_offset
        result.log_start_offset = partition.log.log_start_offset
        appended.append(Appended(result, entry.tp, partition, info))
    return appended


async def on_produce_worker(work: Callable[..., R], *args: Any) -> R:
    """`work(*args)` on the produce workers, off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_produce_workers, work, *args)


def _led_partition(
    ctx: BrokerContext, tp: TopicPartition, records: Records | None, acks: int
) -> tuple[Partition, Records]:
    """The partition `records` are for and the records, if this broker leads it and the
    request is sound; else the typed error refusing them. Checked before any work is
    spent on the records."""
    if acks not in VALID_ACKS:
        raise InvalidRequiredAcksError(f"acks={acks}; use 0, 1 or -1 (all)")
    if not records:
        raise InvalidRecordError("the partition's record set is empty")
    if is_internal(tp.topic):
        raise InvalidTopicError(f"{tp.topic} is the brokers' own topic; clients cannot write to it")
    partition = ctx.replicas.get_partition(tp)
    partition.require_leader()
    return partition, records


def _append_stored(
    ctx: BrokerContext, tp: TopicPartition, stored: Records, received: int, acks: int, now: int
) -> tuple[Partition, AppendInfo]:
    """Append stored batches made from `received` bytes of a request, as leader.

    The partition is looked up again (the records may have been converted on a worker
    meanwhile, and the partition moved or gone). The records are counted in the topic's
    metrics as received (bytes on the wire) and as appended (a retried duplicate adds none).
    """
    partition = ctx.replicas.get_partition(tp)
    if partition.log.config.compacts:
        require_keys(stored, tp.topic)
    # Every dialect's prepare has checked (replog) or computed (Kafka) each stored
    # batch's CRC over these bytes: the log does not check it again.
    info = partition.append_as_leader(stored, acks, now, crc_checked=True)
    appended = info.record_count if info.bytes_appended else 0
    ctx.replicas.metrics.produced(tp.topic, received, appended)
    return partition, info


def repeated_partitions(entries: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
    """The (topic, partition) pairs a Produce names more than once.

    Every entry of such a partition is refused with INVALID_RECORD, as Kafka does, before
    its records are looked at: otherwise one request could make the broker check (or
    decompress) the same partition's records hundreds of times, and which of the entries
    should be appended, in which order, is anyone's guess.
    """
    seen: set[tuple[str, int]] = set()
    repeated: set[tuple[str, int]] = set()
    for entry in entries:
        (repeated if entry in seen else seen).add(entry)
    return repeated


def answer_after_appends(
    appended: list[Appended], acks: int, timeout_ms: int, respond: Callable[[], R]
) -> R | Deferred:
    """The produce's response, `respond()` once every partition's outcome is in its
    result: at once when nothing waits for the HW, else a Deferred, so that the
    connection handles its next requests while this one waits."""
    if acks == ACKS_ALL and appended:

        async def rest() -> R:
            await _wait_for_commits(appended, timeout_ms)
            return respond()

        return Deferred(rest())
    _mark_old_duplicates(appended)
    return respond()


async def _wait_for_commits(appended: list[Appended], timeout_ms: int) -> None:
    """Wait for acks=all appends to commit, and put each failure or old duplicate into
    its result."""
    timeout_s = produce_wait_s(timeout_ms)
    outcomes = await asyncio.gather(
        *(a.partition.wait_for_high_watermark(a.info.last_offset, timeout_s) for a in appended),
        return_exceptions=True,
    )
    for append, outcome in zip(appended, outcomes, strict=True):
        if isinstance(outcome, BrokerResponseError):
            append.result.error_code = outcome.code
            append.result.error_message = wire_message(outcome)
    _mark_old_duplicates(appended)


def _mark_old_duplicates(appended: list[Appended]) -> None:
    """Answer DUPLICATE_SEQUENCE_NUMBER for batches older than the remembered ones."""
    for append in appended:
        if append.info.first_offset < 0 and not append.result.error_code:
            append.result.error_code = DuplicateSequenceNumberError.code
            append.result.error_message = (
                f"{append.tp}: the batch repeats sequence numbers appended before the "
                "producer's remembered batches; it was not appended again"
            )
