"""A transactional id's states and what it holds in each: Kafka's, as data.

Everything that decides which transition is legal lives in this file's table; the
decisions (decisions.py) only choose a target and ask `check_transition`.

- Empty, CompleteCommit, CompleteAbort → Ongoing: the first AddPartitionsToTxn (or
  AddOffsetsToTxn) begins a transaction; later ones keep it Ongoing;
- Ongoing → PrepareCommit or PrepareAbort: EndTxn, or the producer fenced (by a new one,
  or by the timeout), which aborts;
- PrepareCommit → CompleteCommit, PrepareAbort → CompleteAbort: every marker written;
- Empty, CompleteCommit, CompleteAbort → Empty: InitProducerId bumps the epoch.

Dead is an id being expired (written as a tombstone, never as a value); PrepareEpochFence
is Kafka's step between Ongoing and PrepareAbort when a new producer (or the timeout)
fences the old one, never stored: replog makes the bumped epoch part of the PrepareAbort
record itself. The numbers are Kafka's state ids, which the records store.

A Spark sink's transaction (replog's own, beside Kafka's) is one per micro-batch of a
streaming query, written by many producers: each task registers its participants (its
derived producer id and epoch, and the partition it writes) under the driver's
transactional id, and the metadata keeps them with the micro-batch open and the last one
committed, so that a re-run of a committed micro-batch writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from spark_replica.errors import InvalidTxnStateError
from spark_replica.topics import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1
# Epochs are int16; Kafka hands out at most 32766 so that one more bump (a fence) fits.
MAX_PRODUCER_EPOCH = 2**15 - 1
NO_MICRO_BATCH = -1


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions give (Kafka's)."""
        return _KAFKA_NAMES[self]


_KAFKA_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

# Each state's legal previous states: the one table every transition is checked against.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset(
        {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}
# States in which an idle transactional id may expire (no transaction open).
EXPIRABLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
# States a stored record may hold: Dead is a tombstone and the fence is never written.
STORABLE = frozenset(TxnState) - {TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE}


def check_transition(source: TxnState, target: TxnState) -> None:
    """Raise InvalidTxnStateError unless `source` → `target` is in the table."""
    if source not in VALID_PREVIOUS[target]:
        raise InvalidTxnStateError(
            f"a transaction cannot go from {source.kafka_name} to {target.kafka_name}"
        )


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's rule: the id is rotated before its epoch reaches the int16 limit."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True, order=True)
class Participant:
    """One producer writing into a Spark sink's transaction on one partition: a task's
    derived idempotent identity (never an allocated producer id), ended by its own
    marker there."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """A transactional id's state as stored, but for the last producer id and epoch:
    memory only, as in Kafka with version 0 records, where they let a retried
    InitProducerId be answered again."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_timestamp_ms: int = NO_TIMESTAMP  # when the open transaction added its first partition
    last_update_timestamp_ms: int = NO_TIMESTAMP  # expiry counts from here
    last_producer_id: int = NO_PRODUCER_ID  # before the last rotation of the producer id
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # A Spark sink's transaction: the producers registered in the open one (their
    # partitions are in `partitions` too), its micro-batch (kept once it ended, so that a
    # late task of it is refused), and the last micro-batch committed (kept for good).
    participants: frozenset[Participant] = frozenset()
    micro_batch: int = NO_MICRO_BATCH
    committed_micro_batch: int = NO_MICRO_BATCH

    @property
    def is_sink(self) -> bool:
        """Whether a Spark sink's transactions have used the id (its records say more)."""
        return bool(self.participants) or max(self.micro_batch, self.committed_micro_batch) >= 0


@dataclass(frozen=True, slots=True)
class TransactionEntry:
    """What the coordinator holds for one id: the stored metadata, the state an append
    in flight will give it (requests meanwhile answer CONCURRENT_TRANSACTIONS), and
    whether a fence's append failed, after which the epoch already bumped in memory is
    not bumped again (Kafka's hasFailedEpochFence)."""

    metadata: TransactionMetadata
    pending: TxnState | None = None
    failed_epoch_fence: bool = False
