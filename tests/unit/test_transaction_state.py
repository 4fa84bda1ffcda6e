"""The transactional producer's state machine and Kafka's error rules, with plain values:
fenced is fatal for good, failures inside a transaction are abortable (only an abort is
allowed), calls out of order are TransactionStateError and change nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from spark_replica.client.transaction_state import (
    VALID_PREVIOUS,
    TransactionState,
    TxnState,
)
from spark_replica.errors import (
    CorruptMessageError,
    InvalidProducerEpochError,
    ProducerFencedError,
    TimeoutExpiredError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    TransactionStateError,
)


def ready() -> TransactionState:
    state = TransactionState("orders")
    state.begin_init()
    state.completed()
    return state


def in_transaction() -> TransactionState:
    state = ready()
    state.begin_transaction()
    return state


def test_a_transaction_commits_and_aborts_and_the_producer_is_ready_again() -> None:
    state = in_transaction()
    state.check_sending("send")
    state.begin_commit()
    state.completed()
    assert state.state is TxnState.READY
    state.begin_transaction()
    state.begin_abort()
    state.completed()
    assert state.state is TxnState.READY


@pytest.mark.parametrize(
    ("make", "call", "advice"),
    [
        (lambda: TransactionState("orders"), "begin_transaction", "init_transactions first"),
        (ready, "check_sending", "begin_transaction first"),
        (ready, "begin_commit", "begin_transaction first"),
        (ready, "begin_abort", "begin_transaction first"),
        (in_transaction, "begin_transaction", "commit or abort the open transaction"),
        (in_transaction, "begin_init", "commit or abort the open transaction"),
    ],
)
def test_calls_out_of_order_are_refused_and_change_nothing(
    make: Callable[[], TransactionState], call: str, advice: str
) -> None:
    state = make()
    before = state.state
    method = getattr(state, call)
    arguments = ("send",) if call == "check_sending" else ()
    with pytest.raises(TransactionStateError, match=advice):
        method(*arguments)
    assert state.state is before


@pytest.mark.parametrize(
    "error", [ProducerFencedError("fenced"), InvalidProducerEpochError("old epoch")]
)
def test_fenced_is_fatal_for_every_later_call(error: Exception) -> None:
    state = in_transaction()
    raised = state.failed(error)
    assert isinstance(raised, ProducerFencedError)
    assert state.state is TxnState.FATAL_ERROR
    for call in (state.begin_abort, state.begin_commit, state.begin_transaction):
        with pytest.raises(ProducerFencedError):
            call()
    with pytest.raises(ProducerFencedError):
        state.check_sending("send")


def test_a_refused_transactional_id_is_fatal_and_raised_again() -> None:
    state = TransactionState("orders")
    state.begin_init()
    denied = TransactionalIdAuthorizationFailedError("no Write on 'orders'")
    assert state.failed(denied) is denied
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        state.begin_init()


@pytest.mark.parametrize("during", ["in transaction", "committing"])
def test_a_failure_inside_a_transaction_allows_only_an_abort(during: str) -> None:
    state = in_transaction()
    if during == "committing":
        state.begin_commit()
    cause = CorruptMessageError("batch refused")
    state.failed(cause)
    assert state.state is TxnState.ABORTABLE_ERROR
    for call in (state.begin_commit, state.begin_transaction):
        with pytest.raises(TransactionAbortableError, match="call abort_transaction") as raised:
            call()
        assert raised.value.__cause__ is cause
    with pytest.raises(TransactionAbortableError):
        state.check_sending("send")
    state.begin_abort()
    state.completed()
    assert state.state is TxnState.READY


def test_a_failed_abort_may_be_retried_and_a_failed_init_too() -> None:
    state = in_transaction()
    state.begin_abort()
    state.failed(TimeoutExpiredError("no coordinator answered"))
    assert state.state is TxnState.ABORTING
    state.begin_abort()
    state.completed()
    fresh = TransactionState("orders")
    fresh.begin_init()
    fresh.failed(TimeoutExpiredError("no coordinator answered"))
    fresh.begin_init()
    fresh.completed()
    assert fresh.state is TxnState.READY


def test_the_table_names_every_state_and_nothing_leaves_fatal() -> None:
    assert set(VALID_PREVIOUS) == set(TxnState)
    assert all(TxnState.FATAL_ERROR not in previous for previous in VALID_PREVIOUS.values())
