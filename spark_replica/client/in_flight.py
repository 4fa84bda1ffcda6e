"""The batches of one partition between first send and final answer: pure logic, no I/O.

Up to `max_in_flight` batches of a partition may be sent before the first is answered.
With an idempotent producer each is numbered when first sent, from the partition's next
sequence, so sequence order is send order, and the window decides, for every answer,
what becomes of the batch and of the ones behind it. The rules keep Kafka's promise:
never reorder, never duplicate, never lose without telling.

* A retriable error: resend after a backoff, doubling per attempt up to MAX_BACKOFF_S,
  while the batch's delivery deadline allows; past it the batch fails, marked
  `expired`, so that the caller can report the timeout along with its cause.
* The batches behind a failed one were sent against a gap, and the leader refuses them
  with OUT_OF_ORDER_SEQUENCE (or UNKNOWN_PRODUCER_ID for a producer it has not seen):
  for any batch but the oldest unanswered one these are retriable too.
* Retries go in sequence order, one at a time: only the oldest unanswered batch is
  resent, and no new batch starts while a retry is pending. The leader remembers a
  producer's last five batches with their offsets, so a resent batch that had landed is
  answered with its first offsets, whatever happened to the answer the first time.
* A batch that fails for good: if every attempt was refused before the leader appended
  it, its sequence numbers were never used, so the batches behind it move down by its
  record count (copies already sent with the old numbers are refused for the gap and
  sent again). If some attempt may have landed (a lost connection, a timeout), the
  numbering is unknown from there on: the batches behind it that were sent fail too,
  after their own answers arrive, and the partition needs a new producer identity
  before it sends again (`needs_new_identity`). A fenced epoch stops the partition.

Without idempotence there are no sequence numbers: a failed batch is simply resent and
any batch may go while others wait for a retry, so with more than one in flight a retry
can land after a later batch (the same caveat as Kafka's
max.in.flight.requests.per.connection > 1 without idempotence).

The caller owns the clock (seconds of a monotonic clock, passed in) and the I/O; the
payload of a batch is opaque here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Generic, TypeVar

from spark_replica import errors
from spark_replica.errors import ConfigError, InvalidProducerEpochError, OutOfOrderSequenceError

P = TypeVar("P")

SEQUENCE_SPACE = 2**31  # sequence numbers wrap here, as Kafka's do
NO_SEQUENCE = -1
MAX_BACKOFF_S = 1.0
# The most batches an idempotent producer may have in flight per partition: the leader
# remembers five batches per producer, so a retry is always of one it can recognise.
MAX_IDEMPOTENT_IN_FLIGHT = 5

# Errors a leader answers before appending anything, or that the client raises before
# sending: a batch whose every attempt ended in one of these is certainly not in the log.
NOT_APPENDED_ERRORS: tuple[type[Exception], ...] = (
    errors.ConfigError,
    errors.CorruptMessageError,
    errors.FencedLeaderEpochError,
    errors.InvalidProducerEpochError,
    errors.InvalidRecordError,
    errors.InvalidRequiredAcksError,
    errors.InvalidTopicError,
    errors.LeaderNotAvailableError,
    errors.MessageTooLargeError,
    errors.NotEnoughReplicasError,
    errors.OutOfOrderSequenceError,
    errors.RecordListTooLargeError,
    errors.TimeoutExpiredError,
    errors.UnknownLeaderEpochError,
    errors.UnknownProducerIdError,
    errors.UnknownTopicOrPartitionError,
)
# The leader's numbering differs from ours when these answer the oldest unanswered batch.
SEQUENCE_ERRORS = (OutOfOrderSequenceError, errors.UnknownProducerIdError)


class BatchState(enum.Enum):
    IN_FLIGHT = "in_flight"  # sent, answer awaited
    RETRY = "retry"  # answered with an error it may be resent after


@dataclass(eq=False, slots=True)
class WindowBatch(Generic[P]):
    """One batch's sending state; `payload` is whatever the caller sends."""

    payload: P
    record_count: int
    deadline: float
    base_sequence: int = NO_SEQUENCE
    state: BatchState = BatchState.IN_FLIGHT
    attempts: int = 0
    retry_at: float = 0.0
    maybe_appended: bool = False  # some attempt ended without saying whether it landed
    stale_copy: bool = False  # the copy in flight carries a sequence since moved down
    doomed: bool = False  # an earlier batch's fate is unknown: fail on answer, no retry


@dataclass(frozen=True, slots=True)
class Failure(Generic[P]):
    """A batch that failed for good, and the error to report for it.

    `expired`: the error was retriable, but the batch's delivery deadline came first.
    """

    batch: WindowBatch[P]
    error: BaseException
    expired: bool = False


class PartitionWindow(Generic[P]):
    """The started, unfinished batches of one partition, in sequence (= send) order."""

    def __init__(self, *, idempotent: bool, max_in_flight: int, retry_backoff_s: float) -> None:
        if max_in_flight < 1:
            raise ConfigError(
                f"max_in_flight_per_partition must be at least 1, not {max_in_flight}"
            )
        if idempotent and max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
            raise ConfigError(
                f"max_in_flight_per_partition={max_in_flight}: an idempotent producer may "
                f"have at most {MAX_IDEMPOTENT_IN_FLIGHT} batches in flight per partition"
            )
        self.idempotent = idempotent
        self.max_in_flight = max_in_flight
        self.retry_backoff_s = retry_backoff_s
        self.next_sequence = 0
        self.batches: list[WindowBatch[P]] = []
        self.needs_new_identity = False
        self.fatal: BaseException | None = None  # once set, nothing more is sent

    def can_start(self) -> bool:
        """Whether a new batch may be sent now."""
        if self.fatal is not None or self.needs_new_identity:
            return False
        if self.idempotent and any(b.state is BatchState.RETRY or b.doomed for b in self.batches):
            return False
        return len(self.batches) < self.max_in_flight

    def start(self, batch: WindowBatch[P]) -> None:
        """Number `batch` (when idempotent) and count it in flight; the caller sends it."""
        if self.idempotent:
            batch.base_sequence = self.next_sequence
            self.next_sequence = (self.next_sequence + batch.record_count) % SEQUENCE_SPACE
        batch.state = BatchState.IN_FLIGHT
        batch.attempts = 1
        self.batches.append(batch)

    def due_retry(self, now: float) -> WindowBatch[P] | None:
        """The batch to resend now, if any: with idempotence only the oldest one."""
        for batch in self._retry_candidates():
            if batch.retry_at <= now:
                return batch
        return None

    def next_retry_at(self) -> float | None:
        """When `due_retry` will next have a batch; None if no retry is pending."""
        times = [batch.retry_at for batch in self._retry_candidates()]
        return min(times) if times else None

    def _retry_candidates(self) -> list[WindowBatch[P]]:
        candidates = self.batches[:1] if self.idempotent else self.batches
        return [b for b in candidates if b.state is BatchState.RETRY]

    def resend(self, batch: WindowBatch[P]) -> None:
        """`batch` is being sent again, with its current sequence."""
        batch.state = BatchState.IN_FLIGHT
        batch.attempts += 1
        batch.stale_copy = False

    def on_success(self, batch: WindowBatch[P]) -> None:
        """The leader has `batch` (just appended, or a duplicate of an appended one)."""
        self.batches.remove(batch)

    def on_error(
        self, batch: WindowBatch[P], error: BaseException, now: float, *, sent: bool = True
    ) -> list[Failure[P]]:
        """Decide what `error`, ending an attempt of `batch`, means; return what failed.

        `sent` is False when the attempt ended before the request was written (no
        leader known, no connection): then it cannot have landed, whatever the error.
        The returned failures are out of the window; a batch not among them is waiting
        for a retry (see due_retry) or for its own answer.
        """
        if batch.stale_copy:
            # That copy carried numbers since moved down: it was refused for the gap.
            batch.stale_copy = False
            return self._retry_or_fail(batch, error, now, backoff_s=0.0)
        if sent and not isinstance(error, NOT_APPENDED_ERRORS):
            batch.maybe_appended = True
        if batch.doomed:
            return self._fail(batch, error)
        retriable = getattr(error, "retriable", False) or (
            self.idempotent and isinstance(error, SEQUENCE_ERRORS) and batch is not self.batches[0]
        )
        if not retriable:
            return self._fail(batch, error)
        return self._retry_or_fail(batch, error, now, backoff_s=self._backoff(batch))

    def _backoff(self, batch: WindowBatch[P]) -> float:
        return min(self.retry_backoff_s * 2 ** (batch.attempts - 1), MAX_BACKOFF_S)

    def _retry_or_fail(
        self, batch: WindowBatch[P], error: BaseException, now: float, backoff_s: float
    ) -> list[Failure[P]]:
        if now + backoff_s > batch.deadline:
            _, *behind = self._fail(batch, error)
            return [Failure(batch, error, expired=True), *behind]
        batch.state = BatchState.RETRY
        batch.retry_at = now + backoff_s
        return []

    def _fail(self, batch: WindowBatch[P], error: BaseException) -> list[Failure[P]]:
        index = self.batches.index(batch)
        self.batches.pop(index)
        failures = [Failure(batch, error)]
        if not self.idempotent:
            return failures
        behind = self.batches[index:]
        if isinstance(error, InvalidProducerEpochError):
            self.fatal = error
            return failures + self._give_up(behind, error)
        if batch.doomed or batch.maybe_appended or isinstance(error, SEQUENCE_ERRORS):
            self.needs_new_identity = True
            cause = OutOfOrderSequenceError(
                f"an earlier batch of this partition failed and may or may not have been "
                f"appended ({error}); this batch was sent after it, so its own fate is "
                "unknown too"
            )
            return failures + self._give_up(behind, cause)
        for later in behind:
            later.base_sequence = (later.base_sequence - batch.record_count) % SEQUENCE_SPACE
            later.maybe_appended = False
            if later.state is BatchState.IN_FLIGHT:
                later.stale_copy = True
        self.next_sequence = (self.next_sequence - batch.record_count) % SEQUENCE_SPACE
        return failures

    def _give_up(self, behind: list[WindowBatch[P]], error: BaseException) -> list[Failure[P]]:
        """Fail the waiting batches behind a lost one now; those in flight on their answer.

        A batch still in flight may yet be answered with success (it landed, so the one
        before it did too): that answer is reported as it is.
        """
        failures = []
        for later in behind:
            if later.state is BatchState.IN_FLIGHT:
                later.doomed = True
            else:
                self.batches.remove(later)
                failures.append(Failure(later, error))
        return failures

    def reset_identity(self) -> None:
        """A new producer identity was taken for this partition: numbering restarts at 0."""
        if self.batches:
            raise ValueError("the identity may change only while nothing is in flight")
        self.next_sequence = 0
        self.needs_new_identity = False
