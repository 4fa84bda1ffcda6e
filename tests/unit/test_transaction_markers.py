"""Writing a transaction's markers, against a recording fake of the partition leaders'
marker append: grouped by leader, retried while leaders move, skipped for deleted
topics, stopped when the coordinator is replaced or no longer coordinates."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from brokerd.transactions.markers import (
    NO_LEADER,
    Marker,
    by_leader,
    markers_of,
    write_markers,
)
from brokerd.transactions.states import TransactionMetadata, TxnState
from spark_replica.errors import (
    InvalidProducerEpochError,
    MessageTooLargeError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    TransactionCoordinatorFencedError,
)
from spark_replica.topics import TopicPartition

A0, A1, B0, GONE = (
    TopicPartition("a", 0),
    TopicPartition("a", 1),
    TopicPartition("b", 0),
    TopicPartition("gone", 0),
)
DEADLINE_S = 10.0


def prepared(state: TxnState, *partitions: TopicPartition) -> TransactionMetadata:
    return TransactionMetadata("tx", 9, 4, 1_000, state, frozenset(partitions), 1, 2)


@dataclass
class Leaders:
    """Who leads what (changeable between rounds), and each marker append recorded;
    `errors` are raised, in order, by the appends of their partition first."""

    leaders: dict[TopicPartition, int]
    errors: dict[TopicPartition, list[Exception]] = field(default_factory=dict)
    written: list[tuple[int, TopicPartition, bool]] = field(default_factory=list)
    attempts: int = 0

    def leader_of(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp)

    async def write(self, tp: TopicPartition, markers: Sequence[Marker]) -> None:
        assert [(m.tp, m.producer_id, m.producer_epoch, m.coordinator_epoch) for m in markers] == [
            (tp, 9, 4, 3)
        ]
        self.attempts += 1
        pending = self.errors.get(tp)
        if pending:
            raise pending.pop(0)
        self.written += [(self.leaders[tp], tp, m.committed) for m in markers]


def write(leaders: Leaders, markers: list[Marker], still: bool = True) -> bool:
    return asyncio.run(
        asyncio.wait_for(
            write_markers(markers, leaders.write, leaders.leader_of, lambda: still, 0.001),
            DEADLINE_S,
        )
    )


def test_a_commit_and_an_abort_have_one_marker_per_partition() -> None:
    commit = markers_of(prepared(TxnState.PREPARE_COMMIT, B0, A0), 3)
    assert commit == [Marker(A0, 9, 4, 3, True), Marker(B0, 9, 4, 3, True)]
    abort = markers_of(prepared(TxnState.PREPARE_ABORT, A1), 3)
    assert abort == [Marker(A1, 9, 4, 3, False)]
    with pytest.raises(ValueError, match="tx is Ongoing"):
        markers_of(prepared(TxnState.ONGOING, A0), 3)


def test_markers_are_grouped_by_leader_and_deleted_topics_left_out() -> None:
    markers = markers_of(prepared(TxnState.PREPARE_COMMIT, A0, A1, B0, GONE), 3)
    groups = by_leader(markers, {A0: 1, A1: 2, B0: NO_LEADER}.get)
    assert {leader: [m.tp for m in group] for leader, group in groups.items()} == {
        1: [A0],
        2: [A1],
        NO_LEADER: [B0],
    }


def test_every_marker_is_written_by_its_leader() -> None:
    leaders = Leaders({A0: 1, A1: 2, B0: 1})
    assert write(leaders, markers_of(prepared(TxnState.PREPARE_COMMIT, A0, A1, B0), 3))
    assert sorted(leaders.written) == [(1, A0, True), (1, B0, True), (2, A1, True)]


def test_markers_are_retried_while_leaders_move_and_until_one_is_elected() -> None:
    leaders = Leaders(
        {A0: 1, A1: NO_LEADER},
        errors={A0: [NotLeaderOrFollowerError("moved"), NotEnoughReplicasError("few")]},
    )
    rounds = 0

    def leader_of(tp: TopicPartition) -> int | None:
        nonlocal rounds
        rounds += 1
        if rounds > 4:
            leaders.leaders = {A0: 3, A1: 2}  # the moved leader and the newly elected one
        return leaders.leader_of(tp)

    markers = markers_of(prepared(TxnState.PREPARE_ABORT, A0, A1), 3)
    done = asyncio.run(
        asyncio.wait_for(
            write_markers(markers, leaders.write, leader_of, lambda: True, 0.001), DEADLINE_S
        )
    )
    assert done
    assert sorted(leaders.written) == [(2, A1, False), (3, A0, False)]


def test_a_partition_of_a_deleted_topic_needs_no_marker() -> None:
    leaders = Leaders({A0: 1})
    assert write(leaders, markers_of(prepared(TxnState.PREPARE_COMMIT, A0, GONE), 3))
    assert leaders.written == [(1, A0, True)]


@pytest.mark.parametrize(
    "stale", [InvalidProducerEpochError("stale"), TransactionCoordinatorFencedError("newer")]
)
def test_a_stale_epoch_stops_the_markers_for_the_next_coordinator(stale: Exception) -> None:
    leaders = Leaders({A0: 1}, errors={A0: [stale]})
    assert not write(leaders, markers_of(prepared(TxnState.PREPARE_COMMIT, A0), 3))
    assert leaders.written == []


def test_no_marker_is_written_once_the_partition_is_led_elsewhere() -> None:
    leaders = Leaders({A0: 1})
    assert not write(leaders, markers_of(prepared(TxnState.PREPARE_COMMIT, A0), 3), still=False)
    assert leaders.attempts == 0


def test_an_error_that_cannot_pass_is_raised() -> None:
    leaders = Leaders({A0: 1}, errors={A0: [MessageTooLargeError("bad")]})
    with pytest.raises(MessageTooLargeError):
        write(leaders, markers_of(prepared(TxnState.PREPARE_COMMIT, A0), 3))


def test_a_partitions_markers_go_to_its_leader_together() -> None:
    """A Spark sink's transaction ends with a marker per producer: those of one partition
    are written by one call, for its leader to append in one append."""
    calls: list[tuple[TopicPartition, list[int]]] = []

    async def write(tp: TopicPartition, markers: Sequence[Marker]) -> None:
        calls.append((tp, [m.producer_id for m in markers]))

    markers = [Marker(A0, 11, 0, 3, True), Marker(A1, 11, 0, 3, True), Marker(A0, 12, 0, 3, True)]
    done = asyncio.run(
        asyncio.wait_for(write_markers(markers, write, {A0: 1, A1: 1}.get, lambda: True), 10)
    )
    assert done
    assert sorted(calls) == [(A0, [11, 12]), (A1, [11])]
