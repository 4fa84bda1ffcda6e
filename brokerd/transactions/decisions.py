"""What the transaction coordinator decides for each request, as Kafka's does: pure.

Each decision is a function of (the id's entry, the request, now) and returns either a
`Reply`, answered at once with nothing stored, or a `Store`: the metadata to append to
the id's `__transaction_state` partition (acks=all) and the reply to give once it is
stored. The coordinator holds the entry as `in_flight(store)` while the append runs,
so that requests meanwhile answer CONCURRENT_TRANSACTIONS, then as `stored(store)` or,
if the append failed, `store_failed(store)` (and answers the append's error). A Store
whose target is PrepareCommit or PrepareAbort is followed by the markers
(markers.py) and then by `complete`; one whose target is Dead removes the id.

Kafka's rules carried over (its TransactionCoordinator and TransactionMetadata):

1. InitProducerId bumps the epoch of an idle id (a new id gets a producer id and epoch
   0); a producer that says which id and epoch it had (KIP-360) is answered again when
   it retries a bump it did not hear, and fenced when another producer took over; an
   epoch that would reach the int16 limit gets a new producer id instead.
2. InitProducerId on an open transaction fences its producer: the transaction is aborted
   with the epoch bumped (PrepareAbort), and the new producer is told
   CONCURRENT_TRANSACTIONS, so that it retries once the abort completed and gets the
   epoch bumped once more. A timed-out transaction is aborted the same way.
3. A producer id that is not the id's is INVALID_PRODUCER_ID_MAPPING; an epoch that is
   not the id's is PRODUCER_FENCED; a transaction still completing is
   CONCURRENT_TRANSACTIONS; a request that does not fit the state is INVALID_TXN_STATE.
4. An EndTxn repeated after its transaction completed is answered as a success (the
   client did not hear the first answer); one repeated while it completes is
   CONCURRENT_TRANSACTIONS.
5. The failed append of a fence still fences in memory, and the next fence does not
   bump again (no epoch handed out is ever skipped back over).

replog's own, for a Spark sink's transactions (one per micro-batch, under the driver's
transactional id, producer id and epoch; many producers, each task's derived identity):

6. A task registers its participants (producer id and epoch, partition) before writing
   to a partition, naming the micro-batch; the driver's producer is checked by rule 3,
   so a stale driver epoch is PRODUCER_FENCED. Participants must be derived identities
   (ids from DERIVED_PRODUCER_ID_BASE up): a partition leader refuses their late
   batches once their transaction ended there, which an allocated id's Kafka producer,
   reusing its epoch across transactions, must never be.
7. A micro-batch at or below the last one committed is answered `already_committed`:
   the task writes nothing (a query re-running a micro-batch whose EndTxn committed
   before the driver could record it).
8. The first registration of a micro-batch opens its transaction (Empty to Ongoing);
   later ones of the same micro-batch add their participants. Each micro-batch needs a
   driver epoch of its own (InitProducerId: Complete* to Empty): a task's producer takes
   the driver's epoch, so a second transaction under one epoch would meet the leaders'
   refusal of a producer's batches after its marker (rule 6) and be lost as "already
   written"; it is INVALID_TXN_STATE instead.
9. A micro-batch other than the open one, at or below the last one ended (aborted), or
   registering into a transaction a Kafka producer opened, is INVALID_TXN_STATE: a zombie
   task of a finished micro-batch, or a driver that skipped an EndTxn.

A committing EndTxn records the micro-batch as the last committed; InitProducerId
forgets the micro-batch of the transaction last ended (the new driver epoch fences that
driver's tasks by rule 6) but never the last committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from brokerd.transactions.states import (
    EXPIRABLE,
    MAX_PRODUCER_EPOCH,
    NO_MICRO_BATCH,
    NO_PRODUCER_EPOCH,
    NO_TIMESTAMP,
    Participant,
    TransactionEntry,
    TransactionMetadata,
    TxnState,
    check_transition,
    is_epoch_exhausted,
)
from spark_replica.errors import (
    BrokerResponseError,
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from spark_replica.records import DERIVED_PRODUCER_ID_BASE
from spark_replica.topics import TopicPartition

_PREPARE = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
# By the outcome asked (commit?): the state while it completes, the state once completed.
_ENDING = {
    True: (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT),
    False: (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT),
}


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer: an error, or none with (for InitProducerId) the producer id and epoch,
    or (for a sink's registration) whether its micro-batch was committed before."""

    error: type[BrokerResponseError] | None = None
    producer_id: int = -1
    producer_epoch: int = NO_PRODUCER_EPOCH
    already_committed: bool = False


OK = Reply()
ALREADY_COMMITTED = Reply(already_committed=True)
# What InitProducerId leaves of a sink's transaction: the last micro-batch committed.
_NO_SINK_TRANSACTION: dict[str, Any] = {
    "participants": frozenset(),
    "micro_batch": NO_MICRO_BATCH,
}


@dataclass(frozen=True, slots=True)
class Store:
    """Append `target` for the id, then hold it and answer `reply`."""

    origin: TransactionEntry  # the entry the change starts from
    target: TransactionMetadata
    reply: Reply
    fence: bool = False  # the change fences the id's producer (its epoch is bumped)

    @property
    def writes_markers(self) -> bool:
        return self.target.state in _PREPARE

    @property
    def removes(self) -> bool:
        return self.target.state is TxnState.DEAD


Decision = Reply | Store


@dataclass(frozen=True, slots=True)
class ExpectedProducer:
    """The producer id and epoch an InitProducerId (v3+) says the client has."""

    producer_id: int
    producer_epoch: int


def init_producer_id(
    entry: TransactionEntry | None,
    transactional_id: str,
    timeout_ms: int,
    expected: ExpectedProducer | None,
    now_ms: int,
    *,
    max_timeout_ms: int,
    allocate_producer_id: Callable[[], int],
) -> Decision:
    if not transactional_id:
        return Reply(InvalidRequestError)
    if not 0 < timeout_ms <= max_timeout_ms:
        return Reply(InvalidTransactionTimeoutError)
    if entry is None:
        created = TransactionMetadata(
            transactional_id,
            allocate_producer_id(),
            NO_PRODUCER_EPOCH,
            timeout_ms,
            TxnState.EMPTY,
            last_update_timestamp_ms=now_ms,
        )
        entry = TransactionEntry(created)
    metadata = entry.metadata
    if entry.pending is not None:
        return Reply(ConcurrentTransactionsError)
    if expected is not None and not _may_continue(metadata, expected):
        return Reply(ProducerFencedError)
    state = metadata.state
    if state in _PREPARE:
        return Reply(ConcurrentTransactionsError)
    if state is TxnState.ONGOING:
        return _fence(entry, now_ms, Reply(ConcurrentTransactionsError))
    if state not in EXPIRABLE:
        raise InvalidTxnStateError(f"{transactional_id} is {state.kafka_name}")
    if is_epoch_exhausted(metadata.producer_epoch) and (
        expected is None or expected.producer_epoch == metadata.producer_epoch
    ):
        target = _transit(
            metadata,
            TxnState.EMPTY,
            now_ms,
            producer_id=allocate_producer_id(),
            producer_epoch=0,
            last_producer_epoch=(
                metadata.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            ),
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_timestamp_ms=NO_TIMESTAMP,
            **_NO_SINK_TRANSACTION,
        )
    else:
        epochs = _bumped_epochs(metadata, expected)
        if epochs is None:
            return Reply(ProducerFencedError)
        target = _transit(
            metadata,
            TxnState.EMPTY,
            now_ms,
            producer_epoch=epochs[0],
            last_producer_epoch=epochs[1],
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_timestamp_ms=NO_TIMESTAMP,
            **_NO_SINK_TRANSACTION,
        )
    return Store(entry, target, Reply(None, target.producer_id, target.producer_epoch))


def add_partitions(
    entry: TransactionEntry | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    now_ms: int,
) -> Decision:
    """AddPartitionsToTxn, and AddOffsetsToTxn with the group's offsets partition."""
    refused = _refuse_producer(entry, producer_id, producer_epoch)
    if refused is not None or entry is None:
        return refused or Reply(InvalidProducerIdMappingError)
    metadata = entry.metadata
    if metadata.state in _PREPARE:
        return Reply(ConcurrentTransactionsError)
    added = frozenset(partitions)
    if metadata.state is TxnState.ONGOING and added <= metadata.partitions:
        return OK
    begins = metadata.state is not TxnState.ONGOING
    target = _transit(
        metadata,
        TxnState.ONGOING,
        now_ms,
        partitions=metadata.partitions | added,
        start_timestamp_ms=now_ms if begins else metadata.start_timestamp_ms,
        micro_batch=NO_MICRO_BATCH if begins else metadata.micro_batch,
    )
    return Store(entry, target, OK)


def register_participants(
    entry: TransactionEntry | None,
    producer_id: int,
    producer_epoch: int,
    micro_batch: int,
    participants: Iterable[Participant],
    now_ms: int,
) -> Decision:
    """A Spark sink task's producers joining micro-batch `micro_batch`'s transaction
    under the driver's id, producer id and epoch (rules 6 to 9)."""
    joining = frozenset(participants)
    if micro_batch < 0 or not joining or not all(map(_is_sink_participant, joining)):
        return Reply(InvalidRequestError)
    refused = _refuse_producer(entry, producer_id, producer_epoch)
    if refused is not None or entry is None:
        return refused or Reply(InvalidProducerIdMappingError)
    metadata = entry.metadata
    if micro_batch <= metadata.committed_micro_batch:
        return ALREADY_COMMITTED
    state = metadata.state
    if state in _PREPARE:
        return Reply(ConcurrentTransactionsError)
    if state is TxnState.ONGOING:
        if micro_batch != metadata.micro_batch:
            return Reply(InvalidTxnStateError)
        if joining <= metadata.participants:
            return OK
        joined = metadata.participants | joining
        start_ms = metadata.start_timestamp_ms
    else:
        if state is not TxnState.EMPTY or micro_batch <= metadata.micro_batch:
            return Reply(InvalidTxnStateError)
        joined = joining
        start_ms = now_ms
    target = _transit(
        metadata,
        TxnState.ONGOING,
        now_ms,
        participants=joined,
        partitions=metadata.partitions | {p.tp for p in joining},
        micro_batch=micro_batch,
        start_timestamp_ms=start_ms,
    )
    return Store(entry, target, OK)


def end_transaction(
    entry: TransactionEntry | None,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    now_ms: int,
) -> Decision:
    """EndTxn from the producer: commit or abort its open transaction."""
    refused = _refuse_producer(entry, producer_id, producer_epoch)
    if refused is not None or entry is None:
        return refused or Reply(InvalidProducerIdMappingError)
    metadata = entry.metadata
    state = metadata.state
    completing, completed = _ENDING[commit]
    if state is TxnState.ONGOING:
        committed_micro_batch = (
            max(metadata.committed_micro_batch, metadata.micro_batch)
            if commit
            else metadata.committed_micro_batch
        )
        target = _transit(metadata, completing, now_ms, committed_micro_batch=committed_micro_batch)
        return Store(entry, target, OK)
    if state is completed:
        return OK  # a retry of an EndTxn that completed
    if state is completing:
        return Reply(ConcurrentTransactionsError)
    return Reply(InvalidTxnStateError)


def complete(entry: TransactionEntry, now_ms: int) -> Store:
    """Once every marker is written: CompleteCommit or CompleteAbort, partitions and
    participants cleared (the micro-batch is kept: rule 9)."""
    metadata = entry.metadata
    done = (
        TxnState.COMPLETE_COMMIT
        if metadata.state is TxnState.PREPARE_COMMIT
        else TxnState.COMPLETE_ABORT
    )
    target = _transit(metadata, done, now_ms, partitions=frozenset(), participants=frozenset())
    return Store(entry, target, OK)


def is_timed_out(entry: TransactionEntry, now_ms: int) -> bool:
    """An open transaction past its timeout, with nothing in flight."""
    metadata = entry.metadata
    return (
        metadata.state is TxnState.ONGOING
        and entry.pending is None
        and metadata.start_timestamp_ms + metadata.timeout_ms < now_ms
    )


def abort_timed_out(entry: TransactionEntry, now_ms: int) -> Store | None:
    """The proactive abort of a transaction past its timeout, fencing its producer (a late
    commit from it is PRODUCER_FENCED rather than landing after the abort)."""
    if not is_timed_out(entry, now_ms):
        return None
    return _fence(entry, now_ms, OK)


def expire(entry: TransactionEntry, now_ms: int, expiration_ms: int) -> Store | None:
    """The removal of an id idle for transactional.id.expiration.ms (a tombstone)."""
    metadata = entry.metadata
    if (
        entry.pending is not None
        or metadata.state not in EXPIRABLE
        or metadata.last_update_timestamp_ms > now_ms - expiration_ms
    ):
        return None
    target = _transit(
        metadata,
        TxnState.DEAD,
        metadata.last_update_timestamp_ms,
        partitions=frozenset(),
    )
    return Store(entry, target, OK)


def in_flight(store: Store) -> TransactionEntry:
    """The entry while `store`'s append runs."""
    return replace(store.origin, pending=store.target.state)


def stored(store: Store) -> TransactionEntry | None:
    """The entry once `store` is appended and committed (None: the id is gone)."""
    return None if store.removes else TransactionEntry(store.target)


def store_failed(store: Store) -> TransactionEntry:
    """The entry after `store`'s append failed: as before, except that a fence keeps
    its bumped epoch in memory (rule 5)."""
    if not store.fence:
        return replace(store.origin, pending=None)
    fenced = replace(
        store.origin.metadata,
        producer_epoch=store.target.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
    )
    return TransactionEntry(fenced, failed_epoch_fence=True)


def _fence(entry: TransactionEntry, now_ms: int, reply: Reply) -> Store:
    """Abort the open transaction with the epoch bumped (Kafka's PrepareEpochFence, which
    replog stores as the PrepareAbort it leads to)."""
    metadata = entry.metadata
    epoch = metadata.producer_epoch + (0 if entry.failed_epoch_fence else 1)
    if epoch > MAX_PRODUCER_EPOCH:
        raise InvalidTxnStateError(
            f"{metadata.transactional_id}: epoch {metadata.producer_epoch} cannot be bumped"
        )
    check_transition(metadata.state, TxnState.PREPARE_EPOCH_FENCE)
    fenced = replace(metadata, state=TxnState.PREPARE_EPOCH_FENCE)
    target = _transit(
        fenced,
        TxnState.PREPARE_ABORT,
        now_ms,
        producer_epoch=epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
    )
    return Store(entry, target, reply, fence=True)


def _refuse_producer(
    entry: TransactionEntry | None, producer_id: int, producer_epoch: int
) -> Reply | None:
    """Rule 3's checks, in Kafka's order."""
    if entry is None or entry.metadata.producer_id != producer_id:
        return Reply(InvalidProducerIdMappingError)
    if entry.metadata.producer_epoch != producer_epoch:
        return Reply(ProducerFencedError)
    if entry.pending is not None:
        return Reply(ConcurrentTransactionsError)
    return None


def _is_sink_participant(participant: Participant) -> bool:
    """A derived producer id (rule 6) with an int16 epoch, on a real partition number."""
    return (
        participant.producer_id >= DERIVED_PRODUCER_ID_BASE
        and 0 <= participant.producer_epoch <= MAX_PRODUCER_EPOCH
        and participant.tp.partition >= 0
    )


def _may_continue(metadata: TransactionMetadata, expected: ExpectedProducer) -> bool:
    """Whether a producer that says it had `expected` may bump, by Kafka's three cases:
    the id was just created, the producer id is the id's (its epoch is checked next), or
    it is the id's previous one whose epoch ran out (a retried rotation)."""
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or expected.producer_id == metadata.producer_id
        or (
            expected.producer_id == metadata.last_producer_id
            and is_epoch_exhausted(expected.producer_epoch)
        )
    )


def _bumped_epochs(
    metadata: TransactionMetadata, expected: ExpectedProducer | None
) -> tuple[int, int] | None:
    """(the new epoch, the last epoch to remember), or None: the producer is fenced."""
    bumped = metadata.producer_epoch + 1
    if expected is None:
        return bumped, NO_PRODUCER_EPOCH
    if metadata.producer_epoch == NO_PRODUCER_EPOCH:
        return bumped, metadata.producer_epoch
    if expected.producer_epoch == metadata.producer_epoch:
        return bumped, metadata.producer_epoch
    if expected.producer_epoch == metadata.last_producer_epoch:
        return metadata.producer_epoch, metadata.last_producer_epoch  # a retry, answered again
    return None


def _transit(
    metadata: TransactionMetadata, target: TxnState, now_ms: int, **changes: Any
) -> TransactionMetadata:
    """`metadata` moved to `target` with `changes` (field values of several types), if
    the table allows it. As in Kafka, every change remembers the producer id it started
    from."""
    check_transition(metadata.state, target)
    return replace(
        metadata,
        state=target,
        last_update_timestamp_ms=now_ms,
        last_producer_id=metadata.producer_id,
        **changes,
    )
