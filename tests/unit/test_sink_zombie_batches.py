"""The zombie rule of a partition's producer state for a Spark sink's transactions: a
transactional batch of a derived producer id (DERIVED_PRODUCER_ID_BASE and up) at the
epoch whose transaction a marker already ended here is fenced, unless it repeats a batch
by its sequences; Kafka's producers (allocated ids) are unaffected, and the rule
survives a snapshot and restore. Then on a real partition, as a leader answers it."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log import Log, LogConfig
from brokerd.replication.partition import Partition, TxnMarker
from brokerd.replication.producer_state import Outcome, ProducerStateManager
from spark_replica.errors import InvalidProducerEpochError
from spark_replica.records import (
    CONTROL_FLAG,
    DERIVED_PRODUCER_ID_BASE,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    ControlMarker,
    ControlType,
    build_batch,
)
from spark_replica.topics import TopicPartition

TASK = DERIVED_PRODUCER_ID_BASE + 9
KAFKA_PRODUCER = 4001
EPOCH = 12
COMMIT = ControlMarker(ControlType.COMMIT, coordinator_epoch=3)


def data(offset: int, seq: int, count: int = 1, *, pid: int, epoch: int = EPOCH) -> BatchHeader:
    return BatchHeader(
        base_offset=offset,
        batch_length=100,
        leader_epoch=0,
        magic=2,
        crc=0,
        attributes=TRANSACTIONAL_FLAG,
        last_offset_delta=count - 1,
        first_timestamp=0,
        max_timestamp=0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        record_count=count,
    )


def marker(offset: int, *, pid: int, epoch: int = EPOCH) -> BatchHeader:
    header = data(offset, NO_SEQUENCE, pid=pid, epoch=epoch)
    fields = {name: getattr(header, name) for name in header.__slots__}
    return BatchHeader(**{**fields, "attributes": CONTROL_FLAG | TRANSACTIONAL_FLAG})


def ended(pid: int) -> ProducerStateManager:
    """`pid` wrote batches at sequences 0-1 and 2-3 in one transaction, then its marker."""
    state = ProducerStateManager()
    state.record(data(0, 0, 2, pid=pid), 0)
    state.record(data(2, 2, 2, pid=pid), 2)
    state.record(marker(4, pid=pid), 4, marker=COMMIT)
    return state


def test_a_sink_tasks_next_batch_after_its_marker_is_fenced() -> None:
    verdict = ended(TASK).check(data(5, 4, pid=TASK))
    assert verdict.outcome is Outcome.FENCED
    assert "its transaction here ended" in verdict.reason


@pytest.mark.parametrize("sequence", [1, 9])
def test_a_zombie_batch_out_of_sequence_is_fenced_too(sequence: int) -> None:
    assert ended(TASK).check(data(5, sequence, pid=TASK)).outcome is Outcome.FENCED


def test_only_new_batches_of_a_sink_tasks_ended_epoch_are_fenced() -> None:
    state = ended(TASK)
    assert state.check(data(5, 4, pid=TASK)).outcome is Outcome.FENCED
    repeat = state.check(data(5, 2, 2, pid=TASK))
    assert (repeat.outcome, repeat.base_offset, repeat.last_offset) == (Outcome.DUPLICATE, 2, 3)
    assert state.check(data(5, 0, pid=TASK, epoch=EPOCH + 1)).outcome is Outcome.APPEND
    kafka = ended(KAFKA_PRODUCER)
    assert kafka.check(data(5, 4, pid=KAFKA_PRODUCER)).outcome is Outcome.APPEND
    long_ago = ProducerStateManager()
    for batch in range(6):
        long_ago.record(data(batch, batch, pid=TASK), batch)
    long_ago.record(marker(6, pid=TASK), 6, marker=COMMIT)
    assert long_ago.check(data(7, 6, pid=TASK)).outcome is Outcome.FENCED
    assert long_ago.check(data(7, 0, pid=TASK)).outcome is Outcome.OLD_DUPLICATE


def test_the_rule_survives_a_snapshot() -> None:
    restored = ProducerStateManager()
    restored.restore(ended(TASK).encode_snapshot())
    assert restored.check(data(5, 4, pid=TASK)).outcome is Outcome.FENCED
    version_3 = ["replog-producer-state 3", "1", f"{TASK} {EPOCH} 0 3 -1 0 1 0 1 2 3 2 3"]
    older = ProducerStateManager()
    older.restore(version_3)
    assert older.check(data(5, 4, pid=TASK)).outcome is Outcome.APPEND, "not known then"


def test_a_leader_refuses_a_zombie_batch_with_the_fence_error(tmp_path: Path) -> None:
    tp = TopicPartition("out", 0)
    partition = Partition(tp, Log.open(tmp_path, LogConfig(), now_ms=0), 1)
    partition.make_leader(0, [1], [1], 0, 0, now_ms=0)

    def batch(sequence: int) -> bytes:
        return build_batch(
            [f"r{sequence}"],
            timestamps=[0],
            attributes=TRANSACTIONAL_FLAG,
            producer_id=TASK,
            producer_epoch=EPOCH,
            base_sequence=sequence,
        )

    partition.append_as_leader(batch(0), acks=1, now_ms=0)
    partition.append_markers([TxnMarker(TASK, EPOCH, 3, ControlType.COMMIT)], now_ms=0)
    assert partition.append_as_leader(batch(0), acks=1, now_ms=0).bytes_appended == 0
    with pytest.raises(InvalidProducerEpochError, match="its transaction here ended"):
        partition.append_as_leader(batch(1), acks=1, now_ms=0)
    assert partition.log.log_end_offset == 2
    assert partition.producer_state.open_transactions() == {}
