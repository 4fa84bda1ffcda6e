"""The send window with caller-chosen sequences (the SequencedProducer's): batches keep
the numbers they came with, retriable errors are retried in order, and a sequence
error, a duplicate or a fence is the verdict on that batch alone, never a renumbering."""

from __future__ import annotations

from spark_replica.client.in_flight import BatchState, PartitionWindow, WindowBatch
from spark_replica.client.retry import RetryPolicy
from spark_replica.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceError,
)


def window() -> PartitionWindow[str]:
    return PartitionWindow(
        idempotent=True, max_in_flight=5, policy=RetryPolicy(0.1, 1.0), caller_sequences=True
    )


def start(w: PartitionWindow[str], name: str, sequence: int) -> WindowBatch[str]:
    batch = WindowBatch(name, 4, deadline=5.0, base_sequence=sequence)
    w.start(batch)
    return batch


def test_batches_keep_the_callers_numbers_and_retry_in_order() -> None:
    w = window()
    first, second = start(w, "first", 100), start(w, "second", 7)
    assert [b.base_sequence for b in w.batches] == [100, 7]
    assert w.on_error(first, NotLeaderOrFollowerError("moved"), now=0.0) == []
    assert first.state is BatchState.RETRY and not w.can_start()
    assert w.due_retry(0.0) is first
    w.resend(first)
    w.on_success(first)
    w.on_success(second)
    assert [first.base_sequence, second.base_sequence] == [100, 7]
    assert w.can_start()


def test_sequence_verdicts_fail_one_batch_and_renumber_nothing() -> None:
    for verdict in (
        OutOfOrderSequenceError("gap"),
        DuplicateSequenceNumberError("old"),
        InvalidProducerEpochError("fenced"),
    ):
        w = window()
        refused, behind = start(w, "refused", 12), start(w, "behind", 16)
        failures = w.on_error(refused, verdict, now=0.0)
        assert [(f.batch, f.error, f.expired) for f in failures] == [(refused, verdict, False)]
        assert w.batches == [behind] and behind.base_sequence == 16
        assert not w.needs_new_identity and not w.unresolved and w.fatal is None
