"""Open transactions in the producer state: opened by transactional batches, ended by
markers, fenced by epochs, kept by snapshots; and the last stable offset they give."""

from __future__ import annotations

import pytest

from brokerd.replication.open_transactions import CompletedTransaction
from brokerd.replication.producer_state import (
    ActiveProducer,
    Outcome,
    ProducerStateManager,
    Verdict,
)
from spark_replica.errors import InvalidControlRecordError, ProtocolError
from spark_replica.records import (
    CONTROL_FLAG,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    ControlMarker,
    ControlType,
)

ABORT = ControlMarker(ControlType.ABORT, coordinator_epoch=3)
COMMIT = ControlMarker(ControlType.COMMIT, coordinator_epoch=3)


def data(
    offset: int, seq: int, count: int = 1, *, pid: int = 1, epoch: int = 0, txn: bool = True
) -> BatchHeader:
    return BatchHeader(
        base_offset=offset,
        batch_length=100,
        leader_epoch=0,
        magic=2,
        crc=0,
        attributes=TRANSACTIONAL_FLAG if txn else 0,
        last_offset_delta=count - 1,
        first_timestamp=0,
        max_timestamp=0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        record_count=count,
    )


def control(offset: int, *, pid: int = 1, epoch: int = 0) -> BatchHeader:
    header = data(offset, NO_SEQUENCE, pid=pid, epoch=epoch)
    return BatchHeader(
        **{
            **{name: getattr(header, name) for name in header.__slots__},
            "attributes": CONTROL_FLAG | TRANSACTIONAL_FLAG,
        }
    )


def check_marker(state: ProducerStateManager, pid: int, epoch: int, coordinator: int) -> Verdict:
    """One marker's verdict: a run of one."""
    [(_, verdict)] = state.plan_markers([(pid, epoch, coordinator)])
    return verdict


def test_a_transaction_opens_at_its_first_batch_and_a_marker_ends_it() -> None:
    state = ProducerStateManager()
    state.record(data(10, 0, 3), 10)
    state.record(data(13, 3, 2), 13)
    assert state.open_transactions() == {1: 10}
    assert state.last_stable_offset(high_watermark=15) == 10
    ended = state.record(control(15), 15, marker=COMMIT)
    assert ended == CompletedTransaction(1, 10, 15, aborted=False, last_stable_offset=16)
    assert state.open_transactions() == {}
    assert state.coordinator_epoch(1) == 3


def test_the_lso_waits_until_the_marker_itself_is_committed() -> None:
    state = ProducerStateManager()
    state.record(data(0, 0, 5), 0)
    state.record(control(5), 5, marker=ABORT)
    assert state.last_stable_offset(high_watermark=3) == 0
    assert state.last_stable_offset(high_watermark=5) == 0  # the marker is not below the HW
    assert state.last_stable_offset(high_watermark=6) == 6
    assert state.last_stable_offset(high_watermark=9) == 9


def test_the_earliest_open_transaction_holds_the_lso() -> None:
    state = ProducerStateManager()
    state.record(data(0, 0, pid=1), 0)
    state.record(data(1, 0, pid=2), 1)
    state.record(data(2, 1, pid=1), 2)
    assert state.last_stable_offset(high_watermark=3) == 0
    ended = state.record(control(3, pid=1), 3, marker=ABORT)
    assert ended is not None and ended.aborted
    assert (ended.first_offset, ended.last_stable_offset) == (0, 1)
    state.forget_replicated(high_watermark=4)
    assert state.last_stable_offset(high_watermark=4) == 1
    assert state.record(control(4, pid=2), 4, marker=COMMIT) == CompletedTransaction(
        2, 1, 4, aborted=False, last_stable_offset=5
    )


def test_a_marker_of_a_producer_with_nothing_open_ends_an_empty_transaction() -> None:
    state = ProducerStateManager()
    ended = state.record(control(7, pid=4, epoch=2), 7, marker=ABORT)
    assert ended == CompletedTransaction(4, 7, 7, aborted=True, last_stable_offset=8)
    assert state.check(data(8, 0, pid=4, epoch=2)).outcome is Outcome.APPEND


def test_markers_are_fenced_by_producer_and_coordinator_epochs() -> None:
    state = ProducerStateManager()
    state.record(data(0, 0, epoch=2), 0)
    state.record(control(1, epoch=2), 1, marker=ControlMarker(ControlType.COMMIT, 5))
    assert check_marker(state, 1, 1, 5).outcome is Outcome.FENCED
    assert check_marker(state, 1, 2, 4).outcome is Outcome.COORDINATOR_FENCED
    assert check_marker(state, 1, 2, 5).outcome is Outcome.APPEND
    assert check_marker(state, 1, 3, 6).outcome is Outcome.APPEND
    assert check_marker(state, 2, 0, 0).outcome is Outcome.APPEND  # an unknown producer
    assert check_marker(state, -1, 0, 0).outcome is Outcome.INVALID


def test_a_new_producer_epoch_keeps_the_coordinator_epoch() -> None:
    state = ProducerStateManager()
    state.record(control(0), 0, marker=ControlMarker(ControlType.ABORT, 9))
    state.record(data(1, 0, epoch=1), 1)
    assert state.coordinator_epoch(1) == 9
    assert check_marker(state, 1, 1, 8).outcome is Outcome.COORDINATOR_FENCED


def test_a_producer_may_not_write_outside_its_open_transaction() -> None:
    state = ProducerStateManager()
    state.record(data(0, 0), 0)
    verdict = state.check(data(1, 1, txn=False))
    assert verdict.outcome is Outcome.INVALID_TXN_STATE
    assert "transaction open from offset 0" in verdict.reason
    assert state.check(data(1, 1)).outcome is Outcome.APPEND


def test_a_control_batch_needs_its_marker() -> None:
    with pytest.raises(InvalidControlRecordError, match="without its marker"):
        ProducerStateManager().record(control(0), 0)


def test_a_producer_with_an_open_transaction_does_not_expire() -> None:
    state = ProducerStateManager()
    state.record(data(0, 0, pid=1), 0, seen_ms=1_000)
    state.record(data(1, 0, pid=2, txn=False), 1, seen_ms=1_000)
    assert state.expire(now_ms=100_000, expiration_ms=10_000) == 1
    assert set(state.snapshot()) == {1}


def test_snapshots_keep_open_transactions_and_coordinator_epochs() -> None:
    state = ProducerStateManager()
    state.record(data(0, 0, pid=1), 0)
    state.record(control(1, pid=1), 1, marker=ControlMarker(ControlType.COMMIT, 6))
    state.record(data(2, 0, pid=2, epoch=4), 2)
    state.record(control(3, pid=3, epoch=1), 3, marker=ABORT)  # known from a marker alone
    restored = ProducerStateManager()
    restored.restore(state.encode_snapshot())
    assert restored.snapshot() == state.snapshot()
    assert restored.open_transactions() == {2: 2}
    assert restored.last_stable_offset(high_watermark=10) == 2
    assert [restored.coordinator_epoch(pid) for pid in (1, 2, 3)] == [6, -1, 3]
    assert check_marker(restored, 3, 1, 2).outcome is Outcome.COORDINATOR_FENCED


def test_a_version_2_snapshot_still_loads() -> None:
    lines = ["replog-producer-state 2", "2", "5 1 700 0 2 10 12", "6 0 800 4 4 13 13"]
    state = ProducerStateManager()
    state.restore(lines)
    assert state.open_transactions() == {}
    assert state.coordinator_epoch(5) == -1
    assert state.check(data(14, 3, pid=5, epoch=1, txn=False)).outcome is Outcome.APPEND
    assert state.check(data(14, 0, 3, pid=5, epoch=1, txn=False)).outcome is Outcome.DUPLICATE


@pytest.mark.parametrize(
    "lines",
    [
        ["replog-producer-state 5", "0"],
        ["replog-producer-state 2", "1", "5 1 700"],  # version 2 lines name a batch
        ["replog-producer-state 3", "1", "5 1 700 0"],
        ["replog-producer-state 3", "1", "5 1 700 0 -1 1 2"],
    ],
)
def test_malformed_snapshots_are_refused(lines: list[str]) -> None:
    with pytest.raises(ProtocolError):
        ProducerStateManager().restore(lines)


def test_active_producers_are_what_describe_producers_answers() -> None:
    """Per producer id: its epoch, the last sequence and time it wrote, its latest
    marker's coordinator epoch and its open transaction's first offset (-1: none)."""
    state = ProducerStateManager()
    state.record(data(0, 0, 3, pid=7, txn=False), 0, seen_ms=1_000)
    state.record(data(3, 0, 2, pid=5, epoch=2), 3, seen_ms=2_000)
    state.record(data(5, 2, 4, pid=5, epoch=2), 5, seen_ms=3_000)
    state.record(control(9, pid=9), 9, seen_ms=4_000, marker=COMMIT)  # a marker, no batch
    assert state.active_producers() == [
        ActiveProducer(5, 2, 5, 3_000, -1, 3),
        ActiveProducer(7, 0, 2, 1_000, -1, -1),
        ActiveProducer(9, 0, -1, 4_000, 3, -1),
    ]
    state.record(control(10, pid=5, epoch=2), 10, seen_ms=5_000, marker=ABORT)
    assert state.active_producers()[0] == ActiveProducer(5, 2, 5, 5_000, 3, -1)
