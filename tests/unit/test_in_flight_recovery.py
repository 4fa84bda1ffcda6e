"""How the idempotent send window recovers after a batch whose fate is unknown expired.

The rules first, with plain values; then the window against the broker's own
ProducerStateManager through a simulated connection that refuses, appends without
answering, and lets batches expire, taking a new epoch whenever the window asks: no
batch is stored twice, acknowledged batches are stored in send order, a batch reported
as not stored is not in the log, a batch fails only at its own delivery deadline, and
once the faults stop everything is delivered.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

import pytest

from brokerd.replication.producer_state import Outcome, ProducerStateManager
from spark_replica.client.in_flight import BatchState, Failure, PartitionWindow, WindowBatch
from spark_replica.client.retry import RetryPolicy
from spark_replica.errors import (
    ConnectionLostError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    OutOfOrderSequenceError,
    RequestTimedOutError,
    UnknownProducerIdError,
)
from spark_replica.records import BatchHeader
from tests.support import idempotent_header


def window() -> PartitionWindow[str]:
    return PartitionWindow(idempotent=True, max_in_flight=5, policy=RetryPolicy(0.1, 1.0))


def start(w: PartitionWindow[str], name: str, count: int, deadline: float) -> WindowBatch[str]:
    batch = WindowBatch(name, count, deadline)
    w.start(batch)
    return batch


def test_after_an_expiry_of_unknown_outcome_the_batches_behind_go_on_under_their_numbers() -> None:
    w = window()
    lost = start(w, "lost", 2, deadline=1.0)
    waiting = start(w, "waiting", 1, deadline=5.0)
    flying = start(w, "flying", 1, deadline=5.0)
    assert w.on_error(waiting, NotEnoughReplicasAfterAppendError(), now=0.5) == []
    # (A timeout, not a lost connection: that one's first retry would go at once.)
    failures = w.on_error(lost, RequestTimedOutError("no answer in time"), now=0.95)
    assert [(f.batch, f.expired) for f in failures] == [(lost, True)], "only the expired one"
    assert lost.maybe_appended and w.unresolved and not w.needs_new_identity
    assert not w.can_start(), "nothing new until the ones behind tell whether it landed"
    assert [b.base_sequence for b in w.batches] == [2, 3], "numbers kept: it may have landed"
    assert w.due_retry(1.0) is waiting
    w.resend(waiting)
    w.on_success(waiting)  # numbered after it, so it did land: the numbering holds
    assert not w.unresolved
    w.on_success(flying)
    assert w.can_start() and w.next_sequence == 4


def test_a_sequence_error_for_the_oldest_holds_the_window_for_numbers_from_zero() -> None:
    w = window()
    acked = start(w, "acked", 2, deadline=9.0)
    first = start(w, "first", 3, deadline=9.0)
    second = start(w, "second", 1, deadline=9.0)
    third = start(w, "third", 2, deadline=9.0)
    w.on_success(acked)
    assert w.on_error(first, UnknownProducerIdError("no state"), now=0.0) == []
    assert w.needs_new_identity and not w.can_start()
    assert w.due_retry(5.0) is None and w.next_retry_at() is None, "held, not resent"
    assert w.on_error(second, OutOfOrderSequenceError(), now=0.0) == []
    assert w.in_flight(), "the third is still unanswered: no new identity yet"
    assert w.on_error(third, ConnectionLostError(), now=0.0) == []
    assert not third.maybe_appended, "sent behind a batch the leader does not have"
    assert w.reset_identity(now=1.0) == []
    assert [b.base_sequence for b in (first, second, third)] == [0, 3, 4]
    assert (w.next_sequence, w.needs_new_identity) == (6, False)
    assert all(b.state is BatchState.RETRY for b in w.batches)
    assert w.due_retry(1.0) is first and not w.can_start()


def test_held_batches_past_their_deadline_expire_at_the_reset_as_never_stored() -> None:
    w = window()
    early = start(w, "early", 1, deadline=1.0)
    late = start(w, "late", 1, deadline=9.0)
    w.on_error(early, OutOfOrderSequenceError("expected 4"), now=0.5)
    w.on_error(late, OutOfOrderSequenceError("expected 4"), now=0.5)
    (failure,) = w.reset_identity(now=2.0)
    assert failure.batch is early and failure.expired and not early.maybe_appended
    assert isinstance(failure.error, OutOfOrderSequenceError)
    assert late.base_sequence == 0 and w.next_sequence == 1


def test_an_unresolved_batch_with_nothing_behind_it_needs_a_new_identity() -> None:
    w = window()
    lost = start(w, "lost", 1, deadline=1.0)
    (failure,) = w.on_error(lost, NotEnoughReplicasAfterAppendError(), now=0.99)
    assert failure.expired and failure.batch.maybe_appended
    assert w.needs_new_identity and not w.unresolved and not w.can_start()
    assert w.reset_identity(now=1.0) == []
    assert w.can_start() and w.next_sequence == 0


def test_without_a_new_identity_the_held_batches_fail_with_the_reason() -> None:
    w = window()
    held = start(w, "held", 1, deadline=9.0)
    w.on_error(held, OutOfOrderSequenceError(), now=0.0)
    reason = OutOfOrderSequenceError("explicit identity")
    assert [(f.batch, f.error) for f in w.stop(reason)] == [(held, reason)]
    assert w.fatal is reason and w.batches == [] and not w.can_start()


# ------------------------------------------------------------------ against the broker's state


@dataclass(frozen=True, slots=True)
class Attempt:
    batch: WindowBatch[int]
    sequence: int
    epoch: int


def header(attempt: Attempt, producer_id: int) -> BatchHeader:
    return idempotent_header(
        attempt.batch.record_count, producer_id, attempt.epoch, attempt.sequence
    )


BATCHES = 80
FAULTY_UNTIL_FINISHED = 40  # faults stop once this many batches have an outcome
STEP_S = 0.01
DELIVERY_TIMEOUT_S = 0.3


@pytest.mark.parametrize("seed", range(60))
def test_expiries_and_new_epochs_never_duplicate_or_reorder_and_delivery_resumes(
    seed: int,
) -> None:
    """One connection, answered in order. Faults: refused before the append (the ISR
    too small), appended but answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, appended but the
    connection lost (with everything behind it on the wire). An old duplicate counts as
    delivered, as the producer counts DUPLICATE_SEQUENCE_NUMBER."""
    rng = random.Random(seed)
    producer_id = 2**62 + seed
    epoch = 0
    leader = ProducerStateManager()
    log: list[int] = []
    w: PartitionWindow[int] = PartitionWindow(
        idempotent=True, max_in_flight=5, policy=RetryPolicy(0.02, 1.0)
    )
    queue = deque(range(BATCHES))
    counts = {n: rng.randint(1, 4) for n in queue}
    acked: list[int] = []
    failed: list[Failure[int]] = []
    started_after_faults: set[int] = set()
    wire: deque[Attempt] = deque()
    now = 0.0

    def faulty() -> bool:
        return len(acked) + len(failed) < FAULTY_UNTIL_FINISHED

    for _ in range(50_000):
        if not queue and not w.batches:
            break
        now += STEP_S
        if w.needs_new_identity and not w.in_flight():
            epoch += 1
            failed.extend(w.reset_identity(now))
        retry = w.due_retry(now)
        if retry is not None:
            w.resend(retry)
            wire.append(Attempt(retry, retry.base_sequence, epoch))
        while queue and w.can_start():
            batch_id = queue.popleft()
            if not faulty():
                started_after_faults.add(batch_id)
            batch = WindowBatch(batch_id, counts[batch_id], now + DELIVERY_TIMEOUT_S)
            w.start(batch)
            wire.append(Attempt(batch, batch.base_sequence, epoch))
        if not wire:
            continue
        attempt = wire.popleft()
        batch = attempt.batch
        fault = rng.random() if faulty() else 1.0
        if fault < 0.2:
            failed.extend(w.on_error(batch, NotEnoughReplicasError(), now))
            continue
        verdict = leader.check(header(attempt, producer_id))
        if verdict.outcome is Outcome.APPEND:
            leader.record(header(attempt, producer_id), len(log))
            log.append(batch.payload)
        elif verdict.outcome not in (Outcome.DUPLICATE, Outcome.OLD_DUPLICATE):
            assert verdict.outcome in (Outcome.OUT_OF_ORDER, Outcome.UNKNOWN_PRODUCER), verdict
            failed.extend(w.on_error(batch, OutOfOrderSequenceError(verdict.reason), now))
            continue
        if fault < 0.3:
            failed.extend(w.on_error(batch, NotEnoughReplicasAfterAppendError(), now))
            continue
        if fault < 0.4:
            lost = [attempt, *wire]
            wire.clear()
            for pending in lost:
                failed.extend(w.on_error(pending.batch, ConnectionLostError(), now))
            continue
        w.on_success(batch)
        acked.append(batch.payload)

    assert not queue and not w.batches, "every batch has an outcome"
    failed_ids = [f.batch.payload for f in failed]
    assert sorted(acked + failed_ids) == list(range(BATCHES)), "each exactly one outcome"
    assert len(log) == len(set(log)), "no batch stored twice"
    assert set(acked) <= set(log)
    acked_set = set(acked)
    assert [b for b in log if b in acked_set] == sorted(acked), "acknowledged, in send order"
    not_stored = {f.batch.payload for f in failed if not f.batch.maybe_appended}
    assert not not_stored & set(log), "a batch reported as not stored is not in the log"
    assert started_after_faults <= acked_set, "after the faults, everything is delivered"
    cascaded = [f for f in failed if not f.expired]
    assert not cascaded, "every fault here is retriable: a batch fails only at its deadline"
