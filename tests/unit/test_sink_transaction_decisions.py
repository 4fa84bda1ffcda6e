"""A Spark sink's transactions at the coordinator, pure: the registration of each task's
participants under the driver's transactional id from every state (decisions.py, rules 6
to 9), what EndTxn, completion and InitProducerId keep of the micro-batches, and the
markers of a transaction of many producers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from brokerd.transactions.decisions import (
    ALREADY_COMMITTED,
    OK,
    Reply,
    Store,
    complete,
    end_transaction,
    in_flight,
    init_producer_id,
    register_participants,
)
from brokerd.transactions.markers import Marker, markers_of
from brokerd.transactions.states import (
    NO_MICRO_BATCH,
    Participant,
    TransactionEntry,
    TransactionMetadata,
    TxnState,
)
from spark_replica.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from spark_replica.records import DERIVED_PRODUCER_ID_BASE
from spark_replica.topics import TopicPartition

TX = "replog-sink-query-1"
DRIVER, EPOCH = 4242, 3
OUT_0, OUT_1 = TopicPartition("out", 0), TopicPartition("out", 1)
TASK_A = DERIVED_PRODUCER_ID_BASE + 11
TASK_B = DERIVED_PRODUCER_ID_BASE + 22
A0 = Participant(OUT_0, TASK_A, 5)
A1 = Participant(OUT_1, TASK_A, 5)
B0 = Participant(OUT_0, TASK_B, 5)
S = TxnState


def entry(
    state: TxnState,
    micro_batch: int = NO_MICRO_BATCH,
    committed: int = NO_MICRO_BATCH,
    participants: frozenset[Participant] = frozenset(),
    pending: TxnState | None = None,
) -> TransactionEntry:
    metadata = TransactionMetadata(
        TX,
        DRIVER,
        EPOCH,
        60_000,
        state,
        frozenset(p.tp for p in participants),
        start_timestamp_ms=10 if participants else -1,
        last_update_timestamp_ms=10,
        participants=participants,
        micro_batch=micro_batch,
        committed_micro_batch=committed,
    )
    return TransactionEntry(metadata, pending)


def register(
    at: TransactionEntry | None,
    micro_batch: int,
    *participants: Participant,
    producer_id: int = DRIVER,
    epoch: int = EPOCH,
) -> Reply | Store:
    return register_participants(at, producer_id, epoch, micro_batch, participants, 100)


def stored_target(decision: Reply | Store) -> TransactionMetadata:
    assert isinstance(decision, Store), decision
    assert decision.reply == OK
    return decision.target


def test_the_first_registration_of_a_micro_batch_opens_its_transaction() -> None:
    target = stored_target(register(entry(S.EMPTY, micro_batch=6, committed=6), 7, A0, A1))
    assert target.state is S.ONGOING
    assert target.micro_batch == 7 and target.committed_micro_batch == 6
    assert target.participants == {A0, A1}
    assert target.partitions == {OUT_0, OUT_1}
    assert target.start_timestamp_ms == 100


@pytest.mark.parametrize("state", [S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_a_micro_batch_under_the_epoch_of_an_ended_one_is_refused(state: TxnState) -> None:
    """A task's producer takes the driver's epoch: a second transaction under one epoch
    would be refused at the leaders after the first one's markers, and lost."""
    ended = entry(state, micro_batch=6, committed=6 if state is S.COMPLETE_COMMIT else 5)
    assert register(ended, 7, A0) == Reply(InvalidTxnStateError)


def test_a_fresh_id_opens_its_first_micro_batch() -> None:
    target = stored_target(register(entry(S.EMPTY), 0, A0))
    assert (target.state, target.micro_batch, target.committed_micro_batch) == (S.ONGOING, 0, -1)


def test_later_registrations_of_the_open_micro_batch_add_their_participants() -> None:
    ongoing = entry(S.ONGOING, micro_batch=7, participants=frozenset({A0}))
    target = stored_target(register(ongoing, 7, B0, A1))
    assert target.participants == {A0, A1, B0}
    assert target.partitions == {OUT_0, OUT_1}
    assert target.start_timestamp_ms == 10, "the transaction began at its first registration"
    assert register(ongoing, 7, A0) == OK, "already registered: nothing to store"


@pytest.mark.parametrize(
    "state", [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT]
)
def test_a_micro_batch_at_or_below_the_last_committed_writes_nothing(state: TxnState) -> None:
    at = entry(state, micro_batch=9, committed=8, participants=frozenset({A0}))
    assert register(at, 8, A0) == ALREADY_COMMITTED
    assert register(at, 2, B0) == ALREADY_COMMITTED
    assert ALREADY_COMMITTED.error is None and ALREADY_COMMITTED.already_committed


def test_a_stale_driver_epoch_is_fenced_and_another_producer_id_is_not_the_ids() -> None:
    ongoing = entry(S.ONGOING, micro_batch=7, participants=frozenset({A0}))
    assert register(ongoing, 7, B0, epoch=EPOCH - 1) == Reply(ProducerFencedError)
    assert register(ongoing, 7, B0, producer_id=DRIVER + 1) == Reply(InvalidProducerIdMappingError)
    assert register(None, 0, A0) == Reply(InvalidProducerIdMappingError)


def test_a_registration_while_a_change_is_in_flight_or_the_transaction_ends_waits() -> None:
    ongoing = entry(S.ONGOING, micro_batch=7, participants=frozenset({A0}))
    pending = replace(ongoing, pending=S.ONGOING)
    assert register(pending, 7, B0) == Reply(ConcurrentTransactionsError)
    for state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        ending = entry(state, micro_batch=7, participants=frozenset({A0}))
        assert register(ending, 7, B0) == Reply(ConcurrentTransactionsError)


@pytest.mark.parametrize(
    ("state", "micro_batch"),
    [
        (S.ONGOING, 6),  # older than the open one: a zombie task
        (S.ONGOING, 8),  # a newer one while 7 is open: the driver skipped its EndTxn
        (S.COMPLETE_ABORT, 7),  # its transaction was aborted
        (S.COMPLETE_ABORT, 5),
        (S.COMPLETE_COMMIT, 6),  # older than the one that ended, yet not committed
    ],
)
def test_a_micro_batch_that_is_not_the_open_one_nor_a_new_one_is_refused(
    state: TxnState, micro_batch: int
) -> None:
    participants = frozenset({A0}) if state is S.ONGOING else frozenset()
    at = entry(state, micro_batch=7, committed=4, participants=participants)
    assert register(at, micro_batch, B0) == Reply(InvalidTxnStateError)


def test_a_kafka_producers_open_transaction_takes_no_participants() -> None:
    kafka_txn = replace(
        entry(S.ONGOING).metadata, partitions=frozenset({OUT_0}), start_timestamp_ms=10
    )
    assert register(TransactionEntry(kafka_txn), 0, A0) == Reply(InvalidTxnStateError)


@pytest.mark.parametrize(
    ("micro_batch", "participants"),
    [
        (-1, (A0,)),
        (7, ()),
        (7, (Participant(OUT_0, DERIVED_PRODUCER_ID_BASE - 1, 0),)),  # an allocated id
        (7, (Participant(OUT_0, TASK_A, -1),)),
        (7, (Participant(OUT_0, TASK_A, 2**15),)),
        (7, (Participant(TopicPartition("out", -1), TASK_A, 0),)),
    ],
)
def test_malformed_registrations_are_invalid_requests(
    micro_batch: int, participants: tuple[Participant, ...]
) -> None:
    at = entry(S.EMPTY)
    assert register(at, micro_batch, *participants) == Reply(InvalidRequestError)


def test_a_commit_records_its_micro_batch_as_committed_and_an_abort_does_not() -> None:
    ongoing = entry(S.ONGOING, micro_batch=7, committed=6, participants=frozenset({A0, B0}))
    commit = end_transaction(ongoing, DRIVER, EPOCH, True, 200)
    abort = end_transaction(ongoing, DRIVER, EPOCH, False, 200)
    assert isinstance(commit, Store) and isinstance(abort, Store)
    assert commit.target.committed_micro_batch == 7
    assert abort.target.committed_micro_batch == 6
    for prepared in (commit.target, abort.target):
        assert prepared.participants == {A0, B0}, "the markers need them"
        done = complete(TransactionEntry(prepared), 300).target
        assert done.participants == frozenset() and done.partitions == frozenset()
        assert done.micro_batch == 7, "kept: a late task of 7 is refused"


def test_a_re_run_after_a_commit_the_driver_did_not_record_writes_nothing() -> None:
    """The driver crashed between EndTxn and Spark's commit log: the restarted driver
    bumps the epoch and re-runs the micro-batch, whose tasks are told it committed."""
    ongoing = entry(S.ONGOING, micro_batch=7, committed=6, participants=frozenset({A0}))
    commit = end_transaction(ongoing, DRIVER, EPOCH, True, 200)
    assert isinstance(commit, Store)
    done = complete(TransactionEntry(commit.target), 300)
    restarted = init_producer_id(
        TransactionEntry(done.target),
        TX,
        60_000,
        None,
        400,
        max_timeout_ms=900_000,
        allocate_producer_id=lambda: 1,
    )
    assert isinstance(restarted, Store)
    empty = restarted.target
    assert (empty.state, empty.producer_epoch) == (S.EMPTY, EPOCH + 1)
    assert (empty.micro_batch, empty.committed_micro_batch) == (NO_MICRO_BATCH, 7)
    again = TransactionEntry(empty)
    assert register(again, 7, A0, epoch=EPOCH + 1) == ALREADY_COMMITTED
    assert register(again, 7, A0) == Reply(ProducerFencedError), "the old driver's tasks"
    assert stored_target(register(again, 8, A0, epoch=EPOCH + 1)).micro_batch == 8


def test_a_driver_restarted_mid_micro_batch_aborts_it_and_may_run_it_again() -> None:
    ongoing = entry(S.ONGOING, micro_batch=7, committed=6, participants=frozenset({A0}))
    fence = init_producer_id(
        ongoing, TX, 60_000, None, 400, max_timeout_ms=900_000, allocate_producer_id=lambda: 1
    )
    assert isinstance(fence, Store) and fence.fence
    assert fence.reply == Reply(ConcurrentTransactionsError)
    assert fence.target.state is S.PREPARE_ABORT and fence.target.participants == {A0}
    aborted = complete(TransactionEntry(fence.target), 500).target
    bumped = init_producer_id(
        TransactionEntry(aborted),
        TX,
        60_000,
        None,
        600,
        max_timeout_ms=900_000,
        allocate_producer_id=lambda: 1,
    )
    assert isinstance(bumped, Store)
    target = stored_target(register(TransactionEntry(bumped.target), 7, A0, epoch=EPOCH + 2))
    assert (target.state, target.micro_batch) == (S.ONGOING, 7)


def test_the_registration_is_held_pending_while_it_is_stored() -> None:
    store = register(entry(S.EMPTY), 0, A0)
    assert isinstance(store, Store)
    assert in_flight(store).pending is S.ONGOING


def test_a_sink_transaction_ends_with_a_marker_per_participant() -> None:
    prepared = replace(
        entry(S.ONGOING, micro_batch=7, participants=frozenset({A0, A1, B0})).metadata,
        state=S.PREPARE_COMMIT,
    )
    # The driver's producer wrote to no partition of its own: it gets no marker.
    assert markers_of(prepared, 9) == [
        Marker(OUT_0, TASK_A, 5, 9, True),
        Marker(OUT_0, TASK_B, 5, 9, True),
        Marker(OUT_1, TASK_A, 5, 9, True),
    ]
    offsets = TopicPartition("__consumer_offsets", 3)
    with_driver = replace(prepared, partitions=prepared.partitions | {offsets})
    assert Marker(offsets, DRIVER, EPOCH, 9, True) in markers_of(with_driver, 9)
    assert len(markers_of(with_driver, 9)) == 4
