"""The batches of one partition between first send and final answer: pure logic, no I/O.

Up to `max_in_flight` batches of a partition may be sent before the first is answered.
With an idempotent producer each is numbered when first sent, from the partition's next
sequence, so sequence order is send order, and the window decides, for every answer,
what becomes of the batch and of the ones behind it. The rules keep Kafka's promise:
never reorder, never duplicate, never lose without telling.

* A retriable error: resend after the client's retry policy's delay (retry.py: at once
  for the first retry after a stale-leader error, which the caller answers with a
  metadata refresh; otherwise retry.backoff.ms doubling up to retry.backoff.max.ms),
  while the batch's delivery deadline allows; past it the batch fails, marked
  `expired`, so that the caller can report the timeout along with its cause.
* A batch waiting its backoff after a stale-leader error is due at once when the
  metadata names a leader other than the one its latest attempt went to (`on_leader`):
  the backoff spares a broker that failed, and a new leader has not (Kafka's KIP-951).
  A crashed leader refuses the immediate first retry, because the metadata refreshed
  right after the crash still names it; the caller refreshes again while the retry
  waits, and sends it as soon as the controller's election shows.
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
  sent again). If some attempt may have landed (a lost connection, a timeout), whether
  the leader expects the numbers after it is unknown (`unresolved`): no new batch
  starts, and the batches behind it go on under their numbers, each until its own
  deadline. They settle it: one acknowledged means the lost batch landed and the
  numbering holds; a sequence error for the oldest means it did not.
* A sequence error (OUT_OF_ORDER_SEQUENCE, UNKNOWN_PRODUCER_ID) for the oldest batch:
  the leader's numbering is not ours, and none of the batches in the window is in its
  log under our identity (a batch it has is answered as a duplicate, and one of ours
  can only land right after its predecessor). They wait, and once nothing is in flight
  the partition takes a new producer identity (`needs_new_identity`) and they are
  numbered again from 0, in the same order, and resent: never a second copy, never out
  of order. So does an unresolved partition whose window empties, with nothing to renumber.
  A fenced epoch stops the partition.

With caller-chosen sequences (`caller_sequences`: the SequencedProducer, whose caller
must make a replay land on the same numbers) each batch arrives numbered and keeps its
number: a retriable error is retried as above, in order, but a sequence error, a
duplicate or a fenced epoch is the leader's verdict on that batch and fails it alone;
nothing is ever renumbered, and no new identity is taken.

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

from .retry import RetryPolicy, refreshes_metadata

P = TypeVar("P")

SEQUENCE_SPACE = 2**31  # sequence numbers wrap here, as Kafka's do
NO_SEQUENCE = -1
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
    waited: int = 0  # retries that waited a backoff (see retry.py)
    retry_at: float = 0.0
    maybe_appended: bool = False  # some attempt ended without saying whether it landed
    stale_copy: bool = False  # the copy in flight carries a sequence since moved down
    last_error: BaseException | None = None  # what its latest attempt ended with
    leader: tuple[int, int] | None = None  # (broker id, leader epoch) its latest attempt went to


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

    def __init__(
        self,
        *,
        idempotent: bool,
        max_in_flight: int,
        policy: RetryPolicy,
        caller_sequences: bool = False,
    ) -> None:
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
        # Batches arrive numbered by the caller, and keep their numbers (module docs).
        self.caller_sequences = caller_sequences
        self.max_in_flight = max_in_flight
        self.policy = policy
        self.next_sequence = 0
        self.batches: list[WindowBatch[P]] = []
        # A failed batch may or may not be in the log; the batches behind it will tell.
        self.unresolved = False
        # The leader's numbering is not ours: renumber under a new identity (reset_identity).
        self.needs_new_identity = False
        self.fatal: BaseException | None = None  # once set, nothing more is sent

    def can_start(self) -> bool:
        """Whether a new batch may be sent now."""
        if self.fatal is not None or self.needs_new_identity or self.unresolved:
            return False
        if self.idempotent and any(b.state is BatchState.RETRY for b in self.batches):
            return False
        return len(self.batches) < self.max_in_flight

    def in_flight(self) -> bool:
        """Whether some batch awaits an answer."""
        return any(b.state is BatchState.IN_FLIGHT for b in self.batches)

    def start(self, batch: WindowBatch[P]) -> None:
        """Number `batch` (when idempotent, unless the caller numbered it) and count it in
        flight; the caller sends it."""
        if self.idempotent and not self.caller_sequences:
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
        if self.needs_new_identity:
            return []  # held for their new numbers
        candidates = self.batches[:1] if self.idempotent else self.batches
        return [b for b in candidates if b.state is BatchState.RETRY]

    def awaits_leader(self, now: float) -> bool:
        """Whether a retry waits its backoff after a stale-leader error (see on_leader)."""
        return any(
            batch.retry_at > now and refreshes_metadata(batch.last_error)
            for batch in self._retry_candidates()
        )

    def on_leader(self, leader: tuple[int, int], now: float) -> bool:
        """The metadata names `leader` (broker id, leader epoch) for the partition: a retry
        waiting after a stale-leader error whose attempt went elsewhere is due now.

        Whether some retry became due. A partition without a leader (a negative id)
        changes nothing.
        """
        if leader[0] < 0:
            return False
        moved = False
        for batch in self._retry_candidates():
            if (
                batch.retry_at > now
                and refreshes_metadata(batch.last_error)
                and batch.leader is not None
                and batch.leader != leader
            ):
                batch.retry_at = now
                moved = True
        return moved

    def resend(self, batch: WindowBatch[P]) -> None:
        """`batch` is being sent again, with its current sequence."""
        batch.state = BatchState.IN_FLIGHT
        batch.attempts += 1
        batch.stale_copy = False

    def on_success(self, batch: WindowBatch[P]) -> None:
        """The leader has `batch` (just appended, or a duplicate of an appended one).

        It carries numbers after every earlier batch's, so those that failed unresolved
        did land: the numbering holds.
        """
        self.batches.remove(batch)
        self.unresolved = False

    def on_error(
        self, batch: WindowBatch[P], error: BaseException, now: float, *, sent: bool = True
    ) -> list[Failure[P]]:
        """Decide what `error`, ending an attempt of `batch`, means; return what failed.

        `sent` is False when the attempt ended before the request was written (no
        leader known, no connection): then it cannot have landed, whatever the error.
        The returned failures are out of the window; a batch not among them is waiting
        for a retry (see due_retry), for its own answer or for new numbers.
        """
        batch.last_error = error
        if batch.stale_copy:
            # That copy carried numbers since moved down: it was refused for the gap.
            batch.stale_copy = False
            return self._retry_or_fail(batch, error, now, backoff_s=0.0)
        if self.idempotent and not self.caller_sequences and isinstance(error, SEQUENCE_ERRORS):
            if batch is self.batches[0] or self.needs_new_identity:
                return self._renumber_later(batch, error, now)
            # Sent against a gap that an earlier batch's retry may fill.
            return self._retry_or_fail(batch, error, now, backoff_s=self._backoff(batch, error))
        if sent and not self.needs_new_identity and not isinstance(error, NOT_APPENDED_ERRORS):
            # (Once the leader's numbering is known to differ, no copy in flight can land.)
            batch.maybe_appended = True
        if not getattr(error, "retriable", False):
            return self._fail(batch, error)
        return self._retry_or_fail(batch, error, now, backoff_s=self._backoff(batch, error))

    def _renumber_later(
        self, batch: WindowBatch[P], error: BaseException, now: float
    ) -> list[Failure[P]]:
        """The oldest batch met the leader's other numbering: none of ours is in its log."""
        self.needs_new_identity = True
        self.unresolved = False
        for held in self.batches:
            held.maybe_appended = False
        return self._retry_or_fail(batch, error, now, backoff_s=0.0)

    def _backoff(self, batch: WindowBatch[P], error: BaseException) -> float:
        """The policy's delay before `batch`'s next attempt (`attempts` sent so far)."""
        if batch.attempts == 1 and refreshes_metadata(error):
            return 0.0
        batch.waited += 1
        return self.policy.waiting_delay_s(batch.waited)

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
        if not self.idempotent or self.caller_sequences:
            return failures
        behind = self.batches[index:]
        if isinstance(error, InvalidProducerEpochError):
            self.fatal = error
            for later in behind:
                self.batches.remove(later)
            return failures + [Failure(later, error) for later in behind]
        if batch.maybe_appended:
            self.unresolved = True
        elif not self.needs_new_identity:
            self._move_down(behind, batch.record_count)
        if self.unresolved and not self.batches:
            # Nothing left to tell whether it landed: start again under a new identity.
            self.unresolved = False
            self.needs_new_identity = True
        return failures

    def _move_down(self, behind: list[WindowBatch[P]], count: int) -> None:
        """A batch that never landed gives its numbers to the ones behind it."""
        for later in behind:
            later.base_sequence = (later.base_sequence - count) % SEQUENCE_SPACE
            later.maybe_appended = False
            if later.state is BatchState.IN_FLIGHT:
                later.stale_copy = True
        self.next_sequence = (self.next_sequence - count) % SEQUENCE_SPACE

    def reset_identity(self, now: float) -> list[Failure[P]]:
        """A new producer identity was taken: number the held batches again from 0.

        They are resent in the same order, at once; those whose deadline has passed
        while they were held fail instead, as expired (they were never appended).
        """
        if self.in_flight():
            raise ValueError("the identity may change only while nothing is in flight")
        failures: list[Failure[P]] = []
        sequence = 0
        for batch in list(self.batches):
            if batch.deadline <= now:
                assert batch.last_error is not None  # held only after an answer
                self.batches.remove(batch)
                failures.append(Failure(batch, batch.last_error, expired=True))
                continue
            batch.base_sequence = sequence
            sequence = (sequence + batch.record_count) % SEQUENCE_SPACE
            batch.maybe_appended = False
            batch.state = BatchState.RETRY
            batch.retry_at = now
        self.next_sequence = sequence
        self.needs_new_identity = False
        self.unresolved = False
        return failures

    def stop(self, error: BaseException) -> list[Failure[P]]:
        """Send nothing more: the held batches fail with `error` (nothing is in flight)."""
        self.fatal = error
        failures = [Failure(batch, error) for batch in self.batches]
        self.batches.clear()
        return failures
