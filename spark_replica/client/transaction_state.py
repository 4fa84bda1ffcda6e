"""A transactional producer's state, and Kafka's rules for its errors, as data with no I/O.

The states and the calls that move between them:

    UNINITIALIZED --init_transactions--> INITIALIZING --> READY
    READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING --> READY
    IN_TRANSACTION | ABORTABLE_ERROR | ABORTING --abort_transaction--> ABORTING --> READY
    IN_TRANSACTION | COMMITTING --an abortable error--> ABORTABLE_ERROR
    any state --a fenced or fatal error--> FATAL_ERROR (final)

Rules (Kafka's client): a producer fenced by a newer one with its transactional id
(PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH on its transactional requests) is unusable
for good: every call raises ProducerFencedError. A refusal of the transactional id
itself (not authorized, invalid timeout, protocol misuse) is fatal the same way, every
call raising it again. Any other failure inside a transaction (a batch that could not be
written, an offset commit refused) is abortable: only abort_transaction is allowed, and
everything else raises TransactionAbortableError with the failure as its cause. A
failure while aborting leaves the producer aborting: the caller may call abort again.
Retriable coordinator errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS) never reach this module: the caller
retries them until its deadline, and only then is the timeout abortable.

A call that finds the producer in the wrong state raises TransactionStateError and
changes nothing.
"""

from __future__ import annotations

import enum

from spark_replica.errors import (
    InvalidProducerEpochError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    TransactionStateError,
    UnsupportedVersionError,
)


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


# Each state and the states it may be entered from.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.UNINITIALIZED: frozenset(),
    TxnState.INITIALIZING: frozenset({TxnState.UNINITIALIZED}),
    TxnState.READY: frozenset({TxnState.INITIALIZING, TxnState.COMMITTING, TxnState.ABORTING}),
    TxnState.IN_TRANSACTION: frozenset({TxnState.READY}),
    TxnState.COMMITTING: frozenset({TxnState.IN_TRANSACTION}),
    # From ABORTING too: an abort whose EndTxn failed may be called again.
    TxnState.ABORTING: frozenset(
        {TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.ABORTING}
    ),
    TxnState.ABORTABLE_ERROR: frozenset({TxnState.IN_TRANSACTION, TxnState.COMMITTING}),
    TxnState.FATAL_ERROR: frozenset(set(TxnState) - {TxnState.FATAL_ERROR}),
}

# Errors that end the producer, not just its transaction.
_FATAL = (
    TransactionalIdAuthorizationFailedError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    InvalidRequestError,
    UnsupportedVersionError,
)


def is_fenced(error: BaseException) -> bool:
    """A newer producer took the transactional id over."""
    return isinstance(error, ProducerFencedError | InvalidProducerEpochError)


def is_fatal(error: BaseException) -> bool:
    return is_fenced(error) or isinstance(error, _FATAL)


class TransactionState:
    """One transactional producer's state; owned by the producer's event loop."""

    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.state = TxnState.UNINITIALIZED
        # What put the producer in ABORTABLE_ERROR or FATAL_ERROR.
        self.error: BaseException | None = None

    def _move(self, to: TxnState, call: str) -> None:
        self._raise_if_fatal()
        if self.state not in VALID_PREVIOUS[to]:
            if self.state is TxnState.ABORTABLE_ERROR:
                raise self._abortable(call)
            raise TransactionStateError(
                f"{call}: transactional producer {self.transactional_id!r} is "
                f"{self.state.value}; {_ADVICE[self.state]}"
            )
        self.state = to

    def _raise_if_fatal(self) -> None:
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error

    def _abortable(self, call: str) -> TransactionAbortableError:
        error = TransactionAbortableError(
            f"{call}: the transaction of {self.transactional_id!r} failed ({self.error}); "
            "call abort_transaction"
        )
        error.__cause__ = self.error
        return error

    def begin_init(self) -> None:
        self._move(TxnState.INITIALIZING, "init_transactions")

    def begin_transaction(self) -> None:
        self._move(TxnState.IN_TRANSACTION, "begin_transaction")

    def begin_commit(self) -> None:
        self._move(TxnState.COMMITTING, "commit_transaction")

    def begin_abort(self) -> None:
        self._move(TxnState.ABORTING, "abort_transaction")

    def completed(self) -> None:
        """init_transactions, commit or abort done: ready for the next transaction."""
        self._move(TxnState.READY, "completing")

    def raise_if_failed(self, call: str) -> None:
        """Raise what a failure recorded since the last call makes of `call`."""
        self._raise_if_fatal()
        if self.state is TxnState.ABORTABLE_ERROR:
            raise self._abortable(call)

    def check_sending(self, call: str) -> None:
        """Raise unless records (or offsets) may join the open transaction now."""
        self.raise_if_failed(call)
        if self.state is not TxnState.IN_TRANSACTION:
            raise TransactionStateError(
                f"{call}: transactional producer {self.transactional_id!r} is "
                f"{self.state.value}; {_ADVICE[self.state]}"
            )

    def failed(self, error: BaseException) -> BaseException:
        """Record a failure by Kafka's rules; return what the call that met it raises."""
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            return self.error
        if is_fatal(error):
            if is_fenced(error) and not isinstance(error, ProducerFencedError):
                fenced = ProducerFencedError(
                    f"transactional id {self.transactional_id!r}: a newer producer with "
                    f"this id fenced this one ({error}); close it"
                )
                fenced.__cause__ = error
                error = fenced
            self.state, self.error = TxnState.FATAL_ERROR, error
            return error
        if self.state in (TxnState.UNINITIALIZED, TxnState.INITIALIZING):
            self.state = TxnState.UNINITIALIZED  # init_transactions may be called again
            return error
        if self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            self.state, self.error = TxnState.ABORTABLE_ERROR, error
        return error


_ADVICE: dict[TxnState, str] = {
    TxnState.UNINITIALIZED: "call init_transactions first",
    TxnState.INITIALIZING: "wait for init_transactions to finish",
    TxnState.READY: "call begin_transaction first",
    TxnState.IN_TRANSACTION: "commit or abort the open transaction first",
    TxnState.COMMITTING: "the transaction is being committed",
    TxnState.ABORTING: "the transaction is being aborted",
    TxnState.ABORTABLE_ERROR: "call abort_transaction",
    TxnState.FATAL_ERROR: "close the producer",
}
