"""ListTransactions and DescribeTransactions over a coordinator's ids, pure: Kafka's
filters (state names, producer ids, duration), unknown state names answered back, Dead
ids hidden, partitions grouped by topic."""

from __future__ import annotations

import pytest

from brokerd.transactions.states import TransactionEntry, TransactionMetadata, TxnState
from brokerd.transactions.views import (
    DescribedTransaction,
    ListedTransaction,
    describe_transaction,
    list_transactions,
)
from spark_replica.errors import TransactionalIdNotFoundError
from spark_replica.topics import TopicPartition


def entry(
    transactional_id: str, producer_id: int, state: TxnState, start_ms: int = -1
) -> TransactionEntry:
    partitions = (
        frozenset({TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)})
        if state is TxnState.ONGOING
        else frozenset()
    )
    return TransactionEntry(
        TransactionMetadata(transactional_id, producer_id, 3, 60_000, state, partitions, start_ms)
    )


ENTRIES = [
    entry("t-ongoing", 10, TxnState.ONGOING, start_ms=1_000),
    entry("t-empty", 11, TxnState.EMPTY),
    entry("t-dead", 12, TxnState.DEAD),
    entry("t-aborting", 13, TxnState.PREPARE_ABORT, start_ms=9_000),
]


def listed(*names: str) -> list[ListedTransaction]:
    by_name = {e.metadata.transactional_id: e.metadata for e in ENTRIES}
    return [
        ListedTransaction(name, by_name[name].producer_id, by_name[name].state.kafka_name)
        for name in names
    ]


@pytest.mark.parametrize(
    ("states", "producer_ids", "min_duration_ms", "expected"),
    [
        ((), (), -1, listed("t-aborting", "t-empty", "t-ongoing")),
        (("Ongoing", "PrepareAbort"), (), -1, listed("t-aborting", "t-ongoing")),
        ((), (11, 13, 99), -1, listed("t-aborting", "t-empty")),
        (("Ongoing",), (11,), -1, []),
        (("Dead",), (), -1, []),
        (("Ongoing", "PrepareAbort"), (), 5_000, listed("t-ongoing")),
    ],
)
def test_the_filters_are_kafkas(
    states: tuple[str, ...],
    producer_ids: tuple[int, ...],
    min_duration_ms: int,
    expected: list[ListedTransaction],
) -> None:
    listing = list_transactions(ENTRIES, states, producer_ids, 10_000, min_duration_ms)
    assert listing.transactions == expected
    assert listing.unknown_state_filters == []


def test_unknown_state_names_are_answered_back() -> None:
    listing = list_transactions(ENTRIES, ["Ongoing", "ongoing", "Running"], [], 0)
    assert listing.transactions == listed("t-ongoing")
    assert listing.unknown_state_filters == ["Running", "ongoing"]


def test_a_described_transaction_groups_its_partitions_by_topic() -> None:
    assert describe_transaction("t-ongoing", ENTRIES[0]) == DescribedTransaction(
        transactional_id="t-ongoing",
        state="Ongoing",
        timeout_ms=60_000,
        start_timestamp_ms=1_000,
        producer_id=10,
        producer_epoch=3,
        partitions={"a": [1, 2], "b": [0]},
    )
    assert describe_transaction("t-empty", ENTRIES[1]).partitions == {}


@pytest.mark.parametrize("found", [None, ENTRIES[2]], ids=["never seen", "dead"])
def test_an_unknown_or_expiring_id_is_not_found(found: TransactionEntry | None) -> None:
    with pytest.raises(TransactionalIdNotFoundError, match="no transactional id 'x'"):
        describe_transaction("x", found)
