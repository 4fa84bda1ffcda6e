"""What ListTransactions and DescribeTransactions show of the ids a coordinator holds, as
Kafka's coordinator shows them (KIP-664, KIP-994): pure.

Both show an id's stored state, not one an append in flight will give it. An id being
expired (Dead) is shown by neither: for DescribeTransactions it is
TRANSACTIONAL_ID_NOT_FOUND, like an id never seen. A ListTransactions state filter
that names no state is answered back as unknown rather than refused, so an operator
sees the typo; the duration filter keeps transactions open at least that long.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from brokerd.transactions.states import TransactionEntry, TxnState
from spark_replica.errors import TransactionalIdNotFoundError

NO_DURATION_FILTER = -1
_STATE_NAMES = frozenset(state.kafka_name for state in TxnState)


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactions: list[ListedTransaction]
    unknown_state_filters: list[str]


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    transactional_id: str
    state: str
    timeout_ms: int
    start_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    partitions: dict[str, list[int]]  # by topic, each sorted


def list_transactions(
    entries: Iterable[TransactionEntry],
    states: Collection[str],
    producer_ids: Collection[int],
    now_ms: int,
    min_duration_ms: int = NO_DURATION_FILTER,
) -> TransactionListing:
    """The ids that pass every filter given (an empty filter passes all), by id."""
    listed = []
    for entry in entries:
        metadata = entry.metadata
        if metadata.state is TxnState.DEAD:
            continue
        if producer_ids and metadata.producer_id not in producer_ids:
            continue
        if states and metadata.state.kafka_name not in states:
            continue
        if min_duration_ms >= 0 and now_ms - metadata.start_timestamp_ms < min_duration_ms:
            continue
        listed.append(
            ListedTransaction(
                metadata.transactional_id, metadata.producer_id, metadata.state.kafka_name
            )
        )
    listed.sort(key=lambda transaction: transaction.transactional_id)
    unknown = sorted(set(states) - _STATE_NAMES)
    return TransactionListing(listed, unknown)


def describe_transaction(
    transactional_id: str, entry: TransactionEntry | None
) -> DescribedTransaction:
    if entry is None or entry.metadata.state is TxnState.DEAD:
        raise TransactionalIdNotFoundError(
            f"the coordinator holds no transactional id {transactional_id!r}"
        )
    metadata = entry.metadata
    partitions: dict[str, list[int]] = {}
    for tp in sorted(metadata.partitions):
        partitions.setdefault(tp.topic, []).append(tp.partition)
    return DescribedTransaction(
        transactional_id=transactional_id,
        state=metadata.state.kafka_name,
        timeout_ms=metadata.timeout_ms,
        start_timestamp_ms=metadata.start_timestamp_ms,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        partitions=partitions,
    )
