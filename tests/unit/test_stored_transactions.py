"""A `__transaction_state` partition replayed into its ids, pure: the record of each
state, the last record per id winning, tombstones, damaged records skipped and counted,
and which transactions a new coordinator must finish."""

from __future__ import annotations

import pytest

from brokerd.transactions.states import TransactionEntry, TransactionMetadata, TxnState
from brokerd.transactions.stored_transactions import StoredTransactions, metadata_of, record_of
from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.transaction_records import (
    TransactionLogValue,
    decode_value,
    encode_key,
    encode_value,
)

OUT = frozenset({TopicPartition("out", 1), TopicPartition("out", 0)})


def metadata(state: TxnState, transactional_id: str = "a", epoch: int = 2) -> TransactionMetadata:
    partitions = OUT if state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT) else frozenset()
    return TransactionMetadata(transactional_id, 7, epoch, 1_000, state, partitions, 10, 20)


@pytest.mark.parametrize(
    "state",
    [
        TxnState.EMPTY,
        TxnState.ONGOING,
        TxnState.PREPARE_COMMIT,
        TxnState.PREPARE_ABORT,
        TxnState.COMPLETE_COMMIT,
        TxnState.COMPLETE_ABORT,
    ],
)
def test_each_storable_state_round_trips_through_its_record(state: TxnState) -> None:
    stored = StoredTransactions()
    stored.replay([record_of(metadata(state))])
    assert stored.entries == {"a": TransactionEntry(metadata(state))}


def test_empty_stores_null_partitions_and_others_a_sorted_list() -> None:
    _, empty = record_of(metadata(TxnState.EMPTY))
    _, ongoing = record_of(metadata(TxnState.ONGOING))
    assert empty is not None and decode_value(empty).partitions is None
    assert ongoing is not None
    assert decode_value(ongoing).partitions == (TopicPartition("out", 0), TopicPartition("out", 1))


def test_the_last_record_wins_and_a_tombstone_removes() -> None:
    stored = StoredTransactions()
    stored.replay(
        [
            record_of(metadata(TxnState.ONGOING, "a", epoch=1)),
            record_of(metadata(TxnState.EMPTY, "b")),
            record_of(metadata(TxnState.COMPLETE_COMMIT, "a", epoch=1)),
            record_of(metadata(TxnState.DEAD, "b")),
        ]
    )
    assert stored.entries == {"a": TransactionEntry(metadata(TxnState.COMPLETE_COMMIT, "a", 1))}
    assert record_of(metadata(TxnState.DEAD, "b")) == (encode_key("b"), None)
    assert stored.summary() == "1 transactional ids"


def test_damaged_records_are_skipped_and_counted() -> None:
    good = record_of(metadata(TxnState.EMPTY, "good"))
    dead = TransactionLogValue(7, 2, 1_000, TxnState.DEAD.value, None, 1, 1)
    stored = StoredTransactions()
    stored.replay(
        [
            (None, b"\x00"),  # no key
            (b"\x00\x07", good[1]),  # a key version that does not exist
            (encode_key("torn"), good[1][:-3] if good[1] else None),
            (encode_key("odd"), encode_value(TransactionLogValue(7, 2, 1_000, 9, None, 1, 1))),
            (encode_key("dead"), encode_value(dead)),
            good,
        ]
    )
    assert list(stored.entries) == ["good"]
    assert stored.skipped == 5
    assert stored.summary() == "1 transactional ids (5 records that did not decode skipped)"


def test_a_state_no_record_holds_is_named() -> None:
    fence = TransactionLogValue(7, 2, 1_000, TxnState.PREPARE_EPOCH_FENCE.value, None, 1, 1)
    with pytest.raises(ProtocolError, match="a stored value cannot be PrepareEpochFence"):
        metadata_of("a", fence)
    with pytest.raises(ProtocolError, match="unknown transaction state 12"):
        metadata_of("a", TransactionLogValue(7, 2, 1_000, 12, None, 1, 1))


def test_prepared_transactions_are_the_unfinished_ones() -> None:
    stored = StoredTransactions()
    stored.replay(
        [
            record_of(metadata(state, state.kafka_name))
            for state in (
                TxnState.EMPTY,
                TxnState.ONGOING,
                TxnState.PREPARE_COMMIT,
                TxnState.PREPARE_ABORT,
                TxnState.COMPLETE_ABORT,
            )
        ]
    )
    unfinished = [entry.metadata.transactional_id for entry in stored.unfinished()]
    assert unfinished == ["PrepareCommit", "PrepareAbort"]
