"""The transaction coordinator's decisions, pure: every transition of Kafka's state table,
every decision of InitProducerId, AddPartitions/AddOffsets, EndTxn, completion, timeout
and expiry, and every error each answers, with plain values and a counter for ids."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from brokerd.transactions.decisions import (
    OK,
    ExpectedProducer,
    Reply,
    Store,
    abort_timed_out,
    add_partitions,
    complete,
    end_transaction,
    expire,
    in_flight,
    init_producer_id,
    is_timed_out,
    store_failed,
    stored,
)
from brokerd.transactions.states import (
    VALID_PREVIOUS,
    TransactionEntry,
    TransactionMetadata,
    TxnState,
    check_transition,
)
from spark_replica.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from spark_replica.topics import TopicPartition

TX = "tx-1"
MAX_TIMEOUT = 900_000
TIMEOUT = 60_000
OUT = TopicPartition("out", 0)
OUT_1 = TopicPartition("out", 1)
OFFSETS = TopicPartition("__consumer_offsets", 7)
S = TxnState


class Ids:
    """A producer id allocator that counts what it handed out."""

    def __init__(self, first: int = 1000) -> None:
        self._ids: Iterator[int] = itertools.count(first)
        self.handed_out: list[int] = []

    def __call__(self) -> int:
        self.handed_out.append(next(self._ids))
        return self.handed_out[-1]


def init(
    entry: TransactionEntry | None,
    now: int = 100,
    *,
    expected: ExpectedProducer | None = None,
    ids: Ids | None = None,
    timeout: int = TIMEOUT,
    transactional_id: str = TX,
) -> Reply | Store:
    return init_producer_id(
        entry,
        transactional_id,
        timeout,
        expected,
        now,
        max_timeout_ms=MAX_TIMEOUT,
        allocate_producer_id=ids or Ids(),
    )


def entry(state: TxnState, epoch: int = 3, **fields: Any) -> TransactionEntry:
    partitions = (
        frozenset({OUT}) if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else frozenset()
    )
    metadata = TransactionMetadata(TX, 42, epoch, TIMEOUT, state, partitions, 50, 60)
    return TransactionEntry(replace(metadata, **fields))


def store_of(decision: Reply | Store) -> Store:
    assert isinstance(decision, Store), decision
    return decision


def through(decision: Reply | Store) -> TransactionEntry:
    """The entry once the decision's append has been stored."""
    after = stored(store_of(decision))
    assert after is not None
    return after


# -- the table ---------------------------------------------------------------------------

LEGAL = {(source, target) for target, sources in VALID_PREVIOUS.items() for source in sources}


@pytest.mark.parametrize(("source", "target"), sorted(itertools.product(S, S)))
def test_every_pair_of_states_is_legal_exactly_as_kafkas_table_says(
    source: TxnState, target: TxnState
) -> None:
    if (source, target) in LEGAL:
        check_transition(source, target)
    else:
        with pytest.raises(InvalidTxnStateError, match=f"from {source.kafka_name} to"):
            check_transition(source, target)


def test_kafkas_state_ids_and_names() -> None:
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert len(LEGAL) == 16


# -- InitProducerId ----------------------------------------------------------------------


def test_a_new_id_gets_a_producer_id_and_epoch_0() -> None:
    ids = Ids()
    store = store_of(init(None, now=7, ids=ids))
    assert ids.handed_out == [1000]
    assert (store.target.producer_id, store.target.producer_epoch) == (1000, 0)
    assert store.target.state is S.EMPTY and store.target.timeout_ms == TIMEOUT
    assert store.target.last_update_timestamp_ms == 7
    assert store.reply == Reply(None, 1000, 0)
    assert in_flight(store).pending is S.EMPTY and in_flight(store).metadata.producer_epoch == -1


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_an_idle_id_has_its_epoch_bumped_and_its_new_timeout_taken(state: TxnState) -> None:
    store = store_of(init(entry(state), now=500, timeout=5_000))
    assert (store.target.producer_id, store.target.producer_epoch) == (42, 4)
    assert store.target.state is S.EMPTY and store.target.timeout_ms == 5_000
    assert store.target.partitions == frozenset() and store.target.start_timestamp_ms == -1
    assert store.reply == Reply(None, 42, 4) and not store.fence


def test_an_ongoing_transaction_is_fenced_aborted_and_the_new_producer_told_to_retry() -> None:
    ongoing = entry(S.ONGOING)
    store = store_of(init(ongoing, now=900))
    assert store.fence and store.writes_markers
    assert store.target.state is S.PREPARE_ABORT and store.target.producer_epoch == 4
    assert store.target.partitions == {OUT}
    assert store.reply == Reply(ConcurrentTransactionsError)
    # The old producer, still at epoch 3, is fenced from then on.
    after = through(store)
    assert add_partitions(after, 42, 3, [OUT_1], 901) == Reply(ProducerFencedError)
    assert end_transaction(after, 42, 3, True, 901) == Reply(ProducerFencedError)
    # Once the abort completed, the new producer's retry bumps once more.
    done = through(complete(after, 950))
    assert done.metadata.state is S.COMPLETE_ABORT and done.metadata.partitions == frozenset()
    assert store_of(init(done, now=960)).reply == Reply(None, 42, 5)


def test_a_failed_fence_still_fences_and_is_not_bumped_twice() -> None:
    store = store_of(init(entry(S.ONGOING)))
    failed = store_failed(store)
    assert failed.failed_epoch_fence and failed.pending is None
    assert failed.metadata.state is S.ONGOING and failed.metadata.producer_epoch == 4
    assert add_partitions(failed, 42, 3, [OUT], 200) == Reply(ProducerFencedError)
    again = store_of(init(failed))
    assert again.target.producer_epoch == 4 and again.fence
    assert not through(again).failed_epoch_fence


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_a_completing_transaction_answers_concurrent_transactions(state: TxnState) -> None:
    assert init(entry(state)) == Reply(ConcurrentTransactionsError)


def test_anything_while_an_append_is_in_flight_answers_concurrent_transactions() -> None:
    pending = in_flight(store_of(init(entry(S.EMPTY))))
    assert init(pending) == Reply(ConcurrentTransactionsError)
    assert add_partitions(pending, 42, 3, [OUT], 1) == Reply(ConcurrentTransactionsError)
    assert end_transaction(pending, 42, 3, True, 1) == Reply(ConcurrentTransactionsError)
    assert abort_timed_out(replace(pending, metadata=entry(S.ONGOING).metadata), 10**9) is None
    assert expire(pending, 10**12, 1) is None


def test_an_exhausted_epoch_gets_a_new_producer_id() -> None:
    ids = Ids(first=77)
    store = store_of(init(entry(S.COMPLETE_COMMIT, epoch=32766), ids=ids))
    assert (store.target.producer_id, store.target.producer_epoch) == (77, 0)
    assert store.target.last_producer_id == 42
    assert store.target.last_producer_epoch == -1
    # 32765 is not exhausted: bumped to 32766, the last epoch handed out for an id.
    assert store_of(init(entry(S.EMPTY, epoch=32765))).target.producer_epoch == 32766


@pytest.mark.parametrize(
    ("expected", "reply"),
    [
        (ExpectedProducer(42, 3), Reply(None, 42, 4)),  # recovering: bumped
        (ExpectedProducer(42, 1), Reply(ProducerFencedError)),  # another took over
        (ExpectedProducer(9, 3), Reply(ProducerFencedError)),  # not the id's producer
    ],
)
def test_a_producer_that_says_what_it_had_is_bumped_or_fenced(
    expected: ExpectedProducer, reply: Reply
) -> None:
    decision = init(entry(S.COMPLETE_ABORT), expected=expected)
    assert (decision.reply if isinstance(decision, Store) else decision) == reply


def test_a_retried_bump_is_answered_again_without_bumping() -> None:
    first = through(init(entry(S.EMPTY), expected=ExpectedProducer(42, 3)))
    assert (first.metadata.producer_epoch, first.metadata.last_producer_epoch) == (4, 3)
    retry = store_of(init(first, expected=ExpectedProducer(42, 3)))
    assert retry.reply == Reply(None, 42, 4)
    # A producer without an expected epoch (a new instance) resets the last epoch.
    fresh = through(init(first))
    assert (fresh.metadata.producer_epoch, fresh.metadata.last_producer_epoch) == (5, -1)
    assert init(fresh, expected=ExpectedProducer(42, 3)) == Reply(ProducerFencedError)


def test_a_retried_rotation_is_recognised_by_the_previous_producer_id() -> None:
    rotated = through(init(entry(S.EMPTY, epoch=32766), expected=ExpectedProducer(42, 32766)))
    assert rotated.metadata.producer_id == 1000
    assert rotated.metadata.last_producer_epoch == 32766
    retry = init(rotated, expected=ExpectedProducer(42, 32766))
    assert store_of(retry).reply == Reply(None, 1000, 0)
    assert init(rotated, expected=ExpectedProducer(42, 5)) == Reply(ProducerFencedError)


def test_a_just_created_id_accepts_any_expected_producer() -> None:
    created = TransactionEntry(TransactionMetadata(TX, 42, -1, TIMEOUT, S.EMPTY))
    assert store_of(init(created, expected=ExpectedProducer(7, 9))).reply == Reply(None, 42, 0)


@pytest.mark.parametrize(
    ("transactional_id", "timeout", "reply"),
    [
        ("", TIMEOUT, Reply(InvalidRequestError)),
        (TX, 0, Reply(InvalidTransactionTimeoutError)),
        (TX, -1, Reply(InvalidTransactionTimeoutError)),
        (TX, MAX_TIMEOUT + 1, Reply(InvalidTransactionTimeoutError)),
    ],
)
def test_bad_requests_are_refused_before_anything_is_allocated(
    transactional_id: str, timeout: int, reply: Reply
) -> None:
    ids = Ids()
    assert init(None, transactional_id=transactional_id, timeout=timeout, ids=ids) == reply
    assert ids.handed_out == []
    assert store_of(init(None, timeout=MAX_TIMEOUT)).target.timeout_ms == MAX_TIMEOUT


# -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_the_first_partition_begins_a_transaction(state: TxnState) -> None:
    store = store_of(add_partitions(entry(state), 42, 3, [OUT, OFFSETS], 300))
    assert store.target.state is S.ONGOING and store.target.partitions == {OUT, OFFSETS}
    assert store.target.start_timestamp_ms == 300 and store.reply == OK


def test_more_partitions_join_the_open_transaction_and_known_ones_store_nothing() -> None:
    ongoing = entry(S.ONGOING)
    store = store_of(add_partitions(ongoing, 42, 3, [OUT_1], 300))
    assert store.target.partitions == {OUT, OUT_1}
    assert store.target.start_timestamp_ms == 50 and store.target.last_update_timestamp_ms == 300
    assert add_partitions(ongoing, 42, 3, [OUT], 300) == OK


@pytest.mark.parametrize(
    ("target", "producer_id", "epoch", "reply"),
    [
        (None, 42, 3, Reply(InvalidProducerIdMappingError)),
        (entry(S.ONGOING), 41, 3, Reply(InvalidProducerIdMappingError)),
        (entry(S.ONGOING), 42, 2, Reply(ProducerFencedError)),
        (entry(S.ONGOING), 42, 4, Reply(ProducerFencedError)),
        (entry(S.PREPARE_COMMIT), 42, 3, Reply(ConcurrentTransactionsError)),
        (entry(S.PREPARE_ABORT), 42, 3, Reply(ConcurrentTransactionsError)),
    ],
)
def test_add_partitions_errors(
    target: TransactionEntry | None, producer_id: int, epoch: int, reply: Reply
) -> None:
    assert add_partitions(target, producer_id, epoch, [OUT_1], 300) == reply


# -- EndTxn, the markers' completion -----------------------------------------------------


@pytest.mark.parametrize(
    ("commit", "prepare", "done"),
    [(True, S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (False, S.PREPARE_ABORT, S.COMPLETE_ABORT)],
)
def test_end_prepares_then_completes(commit: bool, prepare: TxnState, done: TxnState) -> None:
    store = store_of(end_transaction(entry(S.ONGOING), 42, 3, commit, 400))
    assert store.target.state is prepare and store.writes_markers and not store.fence
    assert store.target.partitions == {OUT} and store.target.start_timestamp_ms == 50
    assert store.reply == OK
    prepared = through(store)
    finished = store_of(complete(prepared, 450))
    assert finished.target.state is done and finished.target.partitions == frozenset()
    assert finished.target.start_timestamp_ms == 50 and not finished.writes_markers
    assert through(finished).metadata.last_update_timestamp_ms == 450


@pytest.mark.parametrize(
    ("state", "commit", "reply"),
    [
        (S.COMPLETE_COMMIT, True, OK),  # a retry after the commit completed
        (S.COMPLETE_ABORT, False, OK),
        (S.PREPARE_COMMIT, True, Reply(ConcurrentTransactionsError)),
        (S.PREPARE_ABORT, False, Reply(ConcurrentTransactionsError)),
        (S.COMPLETE_COMMIT, False, Reply(InvalidTxnStateError)),
        (S.COMPLETE_ABORT, True, Reply(InvalidTxnStateError)),
        (S.PREPARE_COMMIT, False, Reply(InvalidTxnStateError)),
        (S.PREPARE_ABORT, True, Reply(InvalidTxnStateError)),
        (S.EMPTY, True, Reply(InvalidTxnStateError)),
        (S.EMPTY, False, Reply(InvalidTxnStateError)),
    ],
)
def test_end_answers_by_state(state: TxnState, commit: bool, reply: Reply) -> None:
    assert end_transaction(entry(state), 42, 3, commit, 400) == reply


@pytest.mark.parametrize(
    ("target", "producer_id", "epoch", "reply"),
    [
        (None, 42, 3, Reply(InvalidProducerIdMappingError)),
        (entry(S.ONGOING), 43, 3, Reply(InvalidProducerIdMappingError)),
        (entry(S.ONGOING), 42, 2, Reply(ProducerFencedError)),
    ],
)
def test_end_errors(
    target: TransactionEntry | None, producer_id: int, epoch: int, reply: Reply
) -> None:
    assert end_transaction(target, producer_id, epoch, True, 400) == reply


@pytest.mark.parametrize("state", [S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_only_a_prepared_transaction_completes(state: TxnState) -> None:
    with pytest.raises(InvalidTxnStateError):
        complete(entry(state), 500)


def test_a_failed_append_leaves_the_entry_as_it_was() -> None:
    store = store_of(end_transaction(entry(S.ONGOING), 42, 3, True, 400))
    assert store_failed(store) == entry(S.ONGOING)


# -- timeouts and expiry -----------------------------------------------------------------


def test_a_transaction_past_its_timeout_is_aborted_with_its_producer_fenced() -> None:
    ongoing = entry(S.ONGOING, start_timestamp_ms=1_000)
    assert not is_timed_out(ongoing, 1_000 + TIMEOUT)
    assert abort_timed_out(ongoing, 1_000 + TIMEOUT) is None
    store = abort_timed_out(ongoing, 1_001 + TIMEOUT)
    assert store is not None and store.fence and store.reply == OK
    assert store.target.state is S.PREPARE_ABORT and store.target.producer_epoch == 4
    assert end_transaction(through(store), 42, 3, True, 1_002 + TIMEOUT) == Reply(
        ProducerFencedError
    )


@pytest.mark.parametrize("state", [S.EMPTY, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_ABORT])
def test_only_an_ongoing_transaction_times_out(state: TxnState) -> None:
    assert abort_timed_out(entry(state), 10**12) is None


def test_the_last_epoch_cannot_be_fenced_past_the_int16_limit() -> None:
    with pytest.raises(InvalidTxnStateError, match="cannot be bumped"):
        init(entry(S.ONGOING, epoch=32767))


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_an_idle_id_expires_as_a_tombstone(state: TxnState) -> None:
    idle = entry(state, last_update_timestamp_ms=1_000)
    assert expire(idle, 1_999, 1_000) is None
    store = expire(idle, 2_000, 1_000)
    assert store is not None and store.removes and store.target.state is S.DEAD
    assert stored(store) is None


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_an_open_transaction_never_expires(state: TxnState) -> None:
    assert expire(entry(state, last_update_timestamp_ms=0), 10**12, 1) is None
