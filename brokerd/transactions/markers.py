"""Writing a transaction's markers: one COMMIT or ABORT control batch in each of its
partitions, by their leaders, as Kafka's WriteTxnMarkers does.

A partition leader's append of one partition's markers is given as a callable
(`WriteMarkers`: the partition and its markers), which returns once they are replicated
(acks=all) or raises what went wrong; a partition's markers always go together, so that
its leader appends them in one append, in its order (brokerd/core/txn_markers.py). The
markers of one round go out grouped by the leader broker each partition has in the
metadata now, one task per partition; those that fail for a reason that passes (the
leader moved or is not elected yet, too few replicas, a timeout, a lost connection) are
tried again after a backoff, grouped by their leaders then, for as long as this broker
still coordinates the id. A partition whose topic was deleted needs no marker (nothing
will read it). A leader that answers that the producer's epoch or the coordinator's
epoch is stale says this coordinator was replaced: the markers stop and the transaction
is left for the new coordinator to complete. Anything else is a bug and is raised.

A Spark sink's transaction (many producers) ends with one marker per participant, each
for its own producer id and epoch, in place of the driver's marker on their partitions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from brokerd.transactions.states import TransactionMetadata, TxnState
from spark_replica.errors import (
    InvalidProducerEpochError,
    ReplogError,
    TransactionCoordinatorFencedError,
)
from spark_replica.topics import TopicPartition

# The leader broker of a partition now: -1 while it has none, None once its topic is gone.
LeaderOf = Callable[[TopicPartition], int | None]
NO_LEADER = -1
MARKER_RETRY_BACKOFF_S = 0.1


@dataclass(frozen=True, slots=True, order=True)
class Marker:
    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool


# (a partition, its markers): returns once the leader has them all replicated.
WriteMarkers = Callable[[TopicPartition, Sequence[Marker]], Awaitable[None]]


def markers_of(metadata: TransactionMetadata, coordinator_epoch: int) -> list[Marker]:
    """The markers that end a prepared transaction, in partition order: each
    participant's, and the transactional producer's on the partitions none wrote to."""
    if metadata.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        raise ValueError(f"{metadata.transactional_id} is {metadata.state.kafka_name}")
    committed = metadata.state is TxnState.PREPARE_COMMIT
    participants = metadata.participants
    covered = {participant.tp for participant in participants}
    markers = [
        Marker(p.tp, p.producer_id, p.producer_epoch, coordinator_epoch, committed)
        for p in participants
    ]
    markers += [
        Marker(tp, metadata.producer_id, metadata.producer_epoch, coordinator_epoch, committed)
        for tp in metadata.partitions - covered
    ]
    return sorted(markers)


def by_leader(markers: Iterable[Marker], leader_of: LeaderOf) -> dict[int, list[Marker]]:
    """The markers grouped by leader broker (NO_LEADER: none now); those of deleted
    topics are left out."""
    groups: dict[int, list[Marker]] = {}
    for marker in markers:
        leader = leader_of(marker.tp)
        if leader is not None:
            groups.setdefault(leader, []).append(marker)
    return groups


async def write_markers(
    markers: Iterable[Marker],
    write: WriteMarkers,
    leader_of: LeaderOf,
    still_coordinator: Callable[[], bool],
    backoff_s: float = MARKER_RETRY_BACKOFF_S,
) -> bool:
    """Write every marker; True once all are written, False if this broker stopped
    coordinating or was found replaced (the markers are then the next coordinator's)."""
    remaining = list(markers)
    while remaining:
        if not still_coordinator():
            return False
        groups = by_leader(remaining, leader_of)
        waiting = groups.pop(NO_LEADER, [])
        rounds = await asyncio.gather(*(_write_all(group, write) for group in groups.values()))
        if any(outcome is None for outcome in rounds):
            return False
        remaining = waiting + [marker for failed in rounds if failed for marker in failed]
        if remaining:
            await asyncio.sleep(backoff_s)
    return True


async def _write_all(markers: list[Marker], write: WriteMarkers) -> list[Marker] | None:
    """One leader's markers, each partition's together: those to try again, or None if a
    stale epoch was answered."""
    by_partition: dict[TopicPartition, list[Marker]] = {}
    for marker in markers:
        by_partition.setdefault(marker.tp, []).append(marker)
    outcomes = await asyncio.gather(
        *(write(tp, group) for tp, group in by_partition.items()), return_exceptions=True
    )
    again = []
    for group, outcome in zip(by_partition.values(), outcomes, strict=True):
        if outcome is None:
            continue
        if isinstance(outcome, InvalidProducerEpochError | TransactionCoordinatorFencedError):
            return None
        if isinstance(outcome, ReplogError) and outcome.retriable:
            again += group
            continue
        raise outcome
    return again
