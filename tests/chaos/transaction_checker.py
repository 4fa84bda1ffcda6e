"""Judging the transactional clients of a chaos schedule: what read_committed promises.

Pure, like checker.py: it takes each transaction the producers ran (its values, how it
ended, and when the answer to its end came), what the read_committed readers returned
while the faults ran (with when), and the final read_committed read of every partition
once the cluster has healed, and counts the broken promises:

- a committed transaction's record is in the final read exactly once (else *lost* or
  *duplicated*);
- no reader ever returns a record of an aborted transaction (*aborted_seen*);
- no reader returns a record before its producer asked to commit it, nor one of a
  transaction that is not in the final read (*uncommitted_seen*). A record read after the
  commit was asked but before the producer heard the answer is fine: the coordinator
  writes the markers after answering, but the answer can reach the producer later than
  a marker reaches a reader.

A transaction whose end was never answered (its commit failed or the schedule stopped
it) may have committed or not; it is judged by the final read: whole there, it
committed; its records must then be there once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from enum import Enum


class Outcome(Enum):
    COMMITTED = "committed"  # commit_transaction returned
    ABORTED = "aborted"  # abort_transaction returned, or the producer was fenced
    UNKNOWN = "unknown"  # the end was never answered


@dataclass(frozen=True, slots=True)
class Transaction:
    values: tuple[bytes, ...]
    outcome: Outcome
    # When (monotonic seconds) the producer asked to commit; None if it never did.
    commit_asked_at: float | None = None


@dataclass(frozen=True, slots=True)
class Read:
    """A value a read_committed reader returned, and when."""

    value: bytes
    at: float


@dataclass(frozen=True, slots=True)
class TransactionCounts:
    lost: int = 0
    duplicated: int = 0
    aborted_seen: int = 0
    uncommitted_seen: int = 0

    def __add__(self, other: TransactionCounts) -> TransactionCounts:
        mine, theirs = asdict(self), asdict(other)
        return TransactionCounts(**{name: mine[name] + theirs[name] for name in mine})

    @property
    def clean(self) -> bool:
        return not any(asdict(self).values())


def check_transactions(
    transactions: Sequence[Transaction], reads: Iterable[Read], final: Iterable[bytes]
) -> TransactionCounts:
    """Count broken promises; `final` is the values of the final read_committed read."""
    copies = Counter(final)
    owner = {value: t for t in transactions for value in t.values}
    committed = [t for t in transactions if _committed(t, copies)]
    kept = {value for t in committed for value in t.values}
    aborted = {value for t in transactions if t.outcome is Outcome.ABORTED for value in t.values}
    aborted_seen = sum(count for value, count in copies.items() if value in aborted)
    uncommitted_seen = 0
    for read in reads:
        transaction = owner.get(read.value)
        if transaction is None:
            continue
        if transaction.outcome is Outcome.ABORTED:
            aborted_seen += 1
        elif read.value not in kept or _too_early(transaction, read):
            uncommitted_seen += 1
    return TransactionCounts(
        lost=sum(1 for value in kept if copies[value] == 0),
        duplicated=sum(copies[value] - 1 for value in kept if copies[value] > 1),
        aborted_seen=aborted_seen,
        uncommitted_seen=uncommitted_seen,
    )


def _committed(transaction: Transaction, copies: Counter[bytes]) -> bool:
    if transaction.outcome is Outcome.COMMITTED:
        return True
    return transaction.outcome is Outcome.UNKNOWN and all(copies[v] for v in transaction.values)


def _too_early(transaction: Transaction, read: Read) -> bool:
    return transaction.commit_asked_at is not None and read.at < transaction.commit_asked_at
