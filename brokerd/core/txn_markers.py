"""WriteTxnMarkers for both listeners: end transactions on the partitions this broker leads.

A transaction coordinator ends a transaction by asking the leader of each of its
partitions to append a COMMIT or ABORT marker for the producer; `kafka-transactions
abort` sends the same request by hand. The Kafka listener's API 27
(brokerd/kafka/write_txn_markers.py) and replog's inter-broker API of that number
(brokerd/native/write_txn_markers.py) both call `write_txn_markers` here, so the rules
are decided once.

Per partition of each marker, as Kafka's leader decides:

- not hosted here: NOT_LEADER_OR_FOLLOWER when the cluster has it elsewhere (the
  coordinator's metadata is stale), UNKNOWN_TOPIC_OR_PARTITION when it has no such
  partition; hosted but not led: NOT_LEADER_OR_FOLLOWER;
- an ISR smaller than min.insync.replicas: NOT_ENOUGH_REPLICAS, nothing appended (a
  marker is an acks=all write);
- a producer epoch older than the partition's: INVALID_PRODUCER_EPOCH; a coordinator
  epoch older than the last marker's: TRANSACTION_COORDINATOR_FENCED (Partition's
  producer state decides both);
- else appended, and answered once the HW has passed the marker: NOT_ENOUGH_REPLICAS_
  AFTER_APPEND if the ISR shrank below min.insync.replicas meanwhile, NOT_LEADER_OR_
  FOLLOWER if leadership moved, REQUEST_TIMED_OUT after MARKERS_TIMEOUT_MS. The marker
  may then be lost with the leader's uncommitted tail, and the coordinator writes it
  again; a second marker for a transaction already ended is harmless (it ends an empty
  one, as in Kafka).

Every marker is appended before any wait, and the waits run together. The markers of
one partition (several when a Spark sink's transaction ends for each of its producers)
go in one append, ordered by the partition (`Partition.append_markers`: the transaction
that began first ends last, so that no prefix of the run makes part of the transactions
readable); one producer's markers keep the order they were sent in.
Each marker once committed is told to the listeners (the group coordinator turns a
marker on an offsets partition into committed or dropped offsets), as Kafka tells its
group coordinator after the append completes: a marker lost in a failover is told when
the coordinator's retry commits, and a new leader of the partition replays its log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from brokerd.core.context import BrokerContext
from brokerd.replication.partition import Partition, TxnMarker
from spark_replica.errors import (
    BrokerResponseError,
    NotLeaderOrFollowerError,
    ReplogError,
    UnknownTopicOrPartitionError,
)
from spark_replica.records import ControlType
from spark_replica.topics import TopicPartition

# Kafka's leaders wait request.timeout.ms (30 s by default) for a marker to replicate;
# its request carries no timeout. replog's inter-broker one does, capped here.
MARKERS_TIMEOUT_MS = 30_000
MAX_MARKERS_TIMEOUT_MS = 300_000


@dataclass(frozen=True, slots=True)
class MarkerEntry:
    """One transaction to end, on the partitions named: what one entry of a
    WriteTxnMarkers request holds."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]

    @property
    def marker(self) -> TxnMarker:
        kind = ControlType.COMMIT if self.committed else ControlType.ABORT
        return TxnMarker(self.producer_id, self.producer_epoch, self.coordinator_epoch, kind)


# Per entry of a request, in its order: each partition's error, None where its marker is
# committed (a lost connection, for markers sent to another broker, is an error too).
MarkerErrors = list[dict[TopicPartition, ReplogError | None]]


@dataclass(frozen=True, slots=True)
class AppendedMarker:
    """A marker now in a partition's log at `offset`, still to replicate."""

    entry: int
    partition: Partition
    marker: TxnMarker
    offset: int


def append_txn_markers(
    entries: Iterable[MarkerEntry],
    hosted: Mapping[TopicPartition, Partition],
    exists: Callable[[TopicPartition], bool],
    now_ms: int,
) -> tuple[MarkerErrors, list[AppendedMarker]]:
    """Append the entries' markers to each of their partitions this broker leads: a
    partition's markers (one per entry naming it) in one append, ordered there.

    `hosted`: the partitions this broker has a replica of; `exists`: whether the
    cluster has a partition at all. Returns every partition's error so far (None for an
    appended marker, whose wait is still to come) and the appended markers."""
    listed = list(entries)
    errors: MarkerErrors = [dict.fromkeys(entry.partitions) for entry in listed]
    naming: dict[TopicPartition, list[int]] = {}
    for index, partitions in enumerate(errors):
        for tp in partitions:
            naming.setdefault(tp, []).append(index)
    appended: list[AppendedMarker] = []
    for tp, indexes in naming.items():
        try:
            partition = _led(tp, hosted, exists)
        except BrokerResponseError as exc:
            for index in indexes:
                errors[index][tp] = exc
            continue
        markers = [listed[index].marker for index in indexes]
        outcomes = partition.append_markers(markers, now_ms)
        for index, marker, outcome in zip(indexes, markers, outcomes, strict=True):
            if isinstance(outcome, BrokerResponseError):
                errors[index][tp] = outcome
            else:
                appended.append(AppendedMarker(index, partition, marker, outcome.first_offset))
    return errors, appended


async def await_txn_markers(
    errors: MarkerErrors, appended: list[AppendedMarker], timeout_ms: int
) -> None:
    """Wait until the HW has passed each appended marker; put what fails into `errors`."""
    timeout_s = min(max(timeout_ms, 0), MAX_MARKERS_TIMEOUT_MS) / 1000
    outcomes = await asyncio.gather(
        *(a.partition.wait_for_high_watermark(a.offset, timeout_s) for a in appended),
        return_exceptions=True,
    )
    for append, outcome in zip(appended, outcomes, strict=True):
        if isinstance(outcome, BrokerResponseError):
            errors[append.entry][append.partition.tp] = outcome
        elif isinstance(outcome, BaseException):
            raise outcome


async def write_txn_markers(
    ctx: BrokerContext,
    entries: Iterable[MarkerEntry],
    now_ms: int,
    timeout_ms: int = MARKERS_TIMEOUT_MS,
) -> MarkerErrors:
    """Append every entry's markers as leader, wait for them to replicate, and tell the
    context's marker listeners of each one committed: each partition's error per entry,
    None where its marker is committed."""
    errors, appended = append_txn_markers(
        entries, ctx.replicas.partitions, lambda tp: tp in ctx.metadata.partitions, now_ms
    )
    await await_txn_markers(errors, appended, timeout_ms)
    for append in appended:
        if errors[append.entry][append.partition.tp] is None:
            for listener in ctx.marker_listeners:
                listener(append.partition.tp, append.marker, append.offset)
    return errors


def _led(
    tp: TopicPartition,
    hosted: Mapping[TopicPartition, Partition],
    exists: Callable[[TopicPartition], bool],
) -> Partition:
    """The partition, if this broker leads it with enough replicas in sync for an
    acks=all marker; else the typed error refusing the marker."""
    partition = hosted.get(tp)
    if partition is None:
        if exists(tp):
            raise NotLeaderOrFollowerError(f"this broker has no replica of {tp}")
        raise UnknownTopicOrPartitionError(f"{tp} does not exist")
    partition.require_leader()
    partition.require_enough_in_sync()
    return partition
