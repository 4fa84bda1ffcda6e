"""Offsets committed in transactions: pending until their marker (brokerd/groups/
txn_offsets.py, stored_groups.py), and a load of an offsets partition that replays them
at their COMMIT, drops them at their ABORT and hands back those still open
(brokerd/coordination/internal_topic.py), on a real log, no processes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brokerd.coordination.internal_topic import (
    InternalTopic,
    Record,
    TxnProducer,
    append,
    read_records,
)
from brokerd.groups.stored_groups import OffsetChange, StoredGroups
from brokerd.groups.txn_offsets import PendingTxnOffsets
from brokerd.log import Log, LogConfig
from brokerd.replication.partition import Partition, TxnMarker
from spark_replica.errors import InvalidProducerEpochError, OffsetMetadataTooLargeError
from spark_replica.records import ControlType
from spark_replica.topics import OFFSETS_TOPIC, TopicPartition
from spark_replica.wire.kafka.offsets_records import OffsetValue

T0, T1 = TopicPartition("in", 0), TopicPartition("in", 1)
G, OTHER = "etl", "other"
P1, P2, P3 = 1001, 1002, 1003


def offset(value: int) -> OffsetValue:
    return OffsetValue(value, -1, "", 0)


def test_a_commit_marker_makes_the_pending_offsets_the_committed_ones() -> None:
    pending = PendingTxnOffsets()
    pending.add(P1, G, {T0: offset(5)})
    pending.add(P1, G, {T0: offset(7), T1: offset(3)})
    pending.add(P2, OTHER, {T0: offset(9)})
    assert pending.is_pending(G, T0) and pending.is_pending(OTHER, T0)
    assert not pending.is_pending(OTHER, T1)
    assert pending.complete(P1, committed=True) == {G: {T0: offset(7), T1: offset(3)}}
    assert not pending.is_pending(G, T0)
    assert pending.complete(P2, committed=False) == {}
    assert pending.producers() == []


def test_a_later_plain_commit_supersedes_a_pending_transactional_offset() -> None:
    pending = PendingTxnOffsets()
    pending.add(P1, G, {T0: offset(5), T1: offset(6)})
    pending.supersede(G, {T0: None})
    assert not pending.is_pending(G, T0) and pending.is_pending(G, T1)
    assert pending.complete(P1, committed=True) == {G: {T1: offset(6)}}


def test_stored_groups_show_transactional_offsets_only_once_committed() -> None:
    stored = StoredGroups()
    stored.change(OffsetChange(G, T0, offset(1)))
    stored.pending.add(P1, G, {T0: offset(10), T1: offset(11)})
    assert stored.offsets_of(G) == {T0: offset(1)}
    stored.complete_transaction(P1, committed=True)
    assert stored.offsets_of(G) == {T0: offset(10), T1: offset(11)}
    stored.pending.add(P2, G, {T0: offset(20)})
    stored.change(OffsetChange(G, T0, offset(15)))  # plain, later: wins
    stored.complete_transaction(P2, committed=True)
    assert stored.offsets_of(G)[T0] == offset(15)


# --------------------------------------------------------------------------- loading


TOPIC = InternalTopic(
    OFFSETS_TOPIC, 1, 1, 1 << 20, 5000, load_buffer_size=300, too_large=OffsetMetadataTooLargeError
)


def offsets_leader(tmp_path: Path) -> Partition:
    tp = TopicPartition(OFFSETS_TOPIC, 0)
    partition = Partition(tp, Log.open(tmp_path / f"{OFFSETS_TOPIC}-0", LogConfig(), now_ms=0), 1)
    partition.make_leader(0, [1], [1], 0, 0, now_ms=0)
    return partition


def record(group: str, tp: TopicPartition, value: int) -> Record:
    return OffsetChange(group, tp, offset(value)).record()


def end(partition: Partition, producer_id: int, kind: ControlType, epoch: int = 0) -> None:
    partition.append_markers([TxnMarker(producer_id, epoch, 0, kind)], now_ms=0)


def load(partition: Partition) -> StoredGroups:
    """What a coordinator's load of the partition holds."""
    stored = StoredGroups()

    async def replay() -> None:
        async for records in read_records(TOPIC, partition, stored.replay_open):
            stored.replay(records)

    asyncio.run(replay())
    return stored


def write(partition: Partition, records: list[Record], producer: TxnProducer | None = None) -> None:
    asyncio.run(append(TOPIC, partition, records, producer))


def test_a_load_applies_transactions_at_their_commit_and_drops_aborted_ones(
    tmp_path: Path,
) -> None:
    partition = offsets_leader(tmp_path)
    write(partition, [record(G, T0, 1)])
    write(partition, [record(G, T0, 10)], TxnProducer(P1, 0))
    write(partition, [record(G, T1, 20)], TxnProducer(P2, 0))
    write(partition, [record(G, T1, 11)], TxnProducer(P1, 0))
    write(partition, [record(OTHER, T0, 30)], TxnProducer(P3, 0))
    assert load(partition).offsets_of(G) == {T0: offset(1)}, "nothing ended yet"
    end(partition, P2, ControlType.ABORT)
    end(partition, P1, ControlType.COMMIT)
    write(partition, [record(OTHER, T0, 31)])  # plain, after P3's: supersedes it
    stored = load(partition)
    assert stored.offsets_of(G) == {T0: offset(10), T1: offset(11)}
    assert stored.offsets_of(OTHER) == {T0: offset(31)}
    assert stored.skipped == 0, "control batches are not replayed as records"
    assert stored.pending.producers() == [], "P3's only offset was superseded"


def test_a_load_hands_back_the_transactions_still_open(tmp_path: Path) -> None:
    partition = offsets_leader(tmp_path)
    write(partition, [record(G, T0, 1)])
    write(partition, [record(G, T0, 5), record(G, T1, 6)], TxnProducer(P1, 0))
    stored = load(partition)
    assert stored.offsets_of(G) == {T0: offset(1)}
    assert stored.pending.is_pending(G, T0) and stored.pending.is_pending(G, T1)
    end(partition, P1, ControlType.COMMIT)
    stored.complete_transaction(P1, committed=True)
    assert stored.offsets_of(G) == load(partition).offsets_of(G) == {T0: offset(5), T1: offset(6)}


def test_a_producer_s_offsets_are_numbered_on_and_a_stale_epoch_is_refused(
    tmp_path: Path,
) -> None:
    partition = offsets_leader(tmp_path)
    write(partition, [record(G, T0, 1), record(G, T1, 2)], TxnProducer(P1, 3))
    write(partition, [record(G, T0, 4)], TxnProducer(P1, 3))
    assert partition.producer_state.next_sequence(P1, 3) == 3
    end(partition, P1, ControlType.COMMIT, epoch=3)
    write(partition, [record(G, T0, 5)], TxnProducer(P1, 4))  # a new epoch starts at 0
    with pytest.raises(InvalidProducerEpochError):
        write(partition, [record(G, T0, 6)], TxnProducer(P1, 3))
