"""The partition and replica transition tables, pair by pair, and batch splitting.

The expected transitions are written out here again (from Kafka's state machines) rather
than read from the module, so a slip in either copy fails a test.
"""

from __future__ import annotations

from itertools import product

import pytest

from brokerd.controller.states import (
    PartitionState,
    ReplicaState,
    StateTable,
    is_valid_transition,
    split_transitions,
)

P = PartitionState
R = ReplicaState

PARTITION_ALLOWED = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE),
    (P.ONLINE, P.ONLINE),
    (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE),
    (P.ONLINE, P.OFFLINE),
    (P.OFFLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}

REPLICA_ALLOWED = {
    (R.NON_EXISTENT, R.NEW),
    *((previous, R.ONLINE) for previous in (R.NEW, R.ONLINE, R.OFFLINE)),
    (R.REPLICA_DELETION_INELIGIBLE, R.ONLINE),
    *((previous, R.OFFLINE) for previous in (R.NEW, R.ONLINE, R.OFFLINE)),
    (R.REPLICA_DELETION_INELIGIBLE, R.OFFLINE),
    (R.OFFLINE, R.REPLICA_DELETION_STARTED),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_SUCCESSFUL),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_INELIGIBLE),
    (R.REPLICA_DELETION_SUCCESSFUL, R.NON_EXISTENT),
}

ALL_PAIRS = [*product(PartitionState, repeat=2), *product(ReplicaState, repeat=2)]


@pytest.mark.parametrize(("current", "target"), ALL_PAIRS, ids=str)
def test_every_transition_matches_kafka(
    current: PartitionState | ReplicaState, target: PartitionState | ReplicaState
) -> None:
    allowed = (current, target) in PARTITION_ALLOWED | REPLICA_ALLOWED
    assert is_valid_transition(current, target) is allowed
    assert (current in target.valid_previous_states) is allowed


def test_state_sets_are_kafkas() -> None:
    assert [s.name for s in PartitionState] == ["NON_EXISTENT", "NEW", "ONLINE", "OFFLINE"]
    assert {s.name for s in ReplicaState} == {
        "NEW",
        "ONLINE",
        "OFFLINE",
        "REPLICA_DELETION_STARTED",
        "REPLICA_DELETION_SUCCESSFUL",
        "REPLICA_DELETION_INELIGIBLE",
        "NON_EXISTENT",
    }


MIXED = {("t", 0): P.NEW, ("t", 1): P.ONLINE, ("t", 2): P.NON_EXISTENT, ("u", 0): P.OFFLINE}


def test_split_transitions_splits_a_mixed_batch_in_order() -> None:
    assert split_transitions(MIXED, P.ONLINE, P.NON_EXISTENT) == (
        [("t", 0), ("t", 1), ("u", 0)],
        [("t", 2)],
    )
    assert split_transitions(MIXED, P.NON_EXISTENT, P.NON_EXISTENT) == (
        [("u", 0)],
        [("t", 0), ("t", 1), ("t", 2)],
    )


def test_split_transitions_puts_unknown_keys_in_the_default_state() -> None:
    keys = [("u", 0), ("new", 0), ("t", 1), ("new", 1)]
    assert split_transitions(MIXED, P.NEW, P.NON_EXISTENT, keys) == (
        [("new", 0), ("new", 1)],
        [("u", 0), ("t", 1)],
    )


def test_split_transitions_of_nothing() -> None:
    assert split_transitions({}, R.ONLINE, R.NON_EXISTENT) == ([], [])


def test_state_table_moves_only_the_valid_part_of_a_batch() -> None:
    table: StateTable[tuple[str, int, int], ReplicaState] = StateTable(R.NON_EXISTENT)
    assert table.transition([("t", 0, 1), ("t", 0, 2)], R.NEW) == ([("t", 0, 1), ("t", 0, 2)], [])
    assert table.transition([("t", 0, 1)], R.ONLINE) == ([("t", 0, 1)], [])

    moved, refused = table.transition([("t", 0, 1), ("t", 0, 2), ("t", 0, 3)], R.OFFLINE)
    assert (moved, refused) == ([("t", 0, 1), ("t", 0, 2)], [("t", 0, 3)])
    assert table.get(("t", 0, 3)) is R.NON_EXISTENT
    assert table.keys_in(R.OFFLINE) == [("t", 0, 1), ("t", 0, 2)]

    moved, refused = table.transition([("t", 0, 1), ("t", 0, 2)], R.REPLICA_DELETION_SUCCESSFUL)
    assert (moved, refused) == ([], [("t", 0, 1), ("t", 0, 2)])
    assert table.keys_in(R.OFFLINE) == [("t", 0, 1), ("t", 0, 2)]


def test_state_table_walks_a_replica_through_deletion_and_forgets_it() -> None:
    table: StateTable[tuple[str, int, int], ReplicaState] = StateTable(
        R.NON_EXISTENT, {("t", 0, 1): R.OFFLINE}
    )
    for target in (
        R.REPLICA_DELETION_STARTED,
        R.REPLICA_DELETION_SUCCESSFUL,
        R.NON_EXISTENT,
    ):
        assert table.transition([("t", 0, 1)], target) == ([("t", 0, 1)], [])
        assert table.get(("t", 0, 1)) is target
    assert table.keys_in(R.NON_EXISTENT) == []
    assert table.transition([("t", 0, 1)], R.NEW) == ([("t", 0, 1)], [])


def test_state_table_remove_forgets_a_key_whatever_its_state() -> None:
    table: StateTable[tuple[str, int], PartitionState] = StateTable(
        P.NON_EXISTENT, {("t", 0): P.ONLINE, ("t", 1): P.ONLINE}
    )
    table.remove(("t", 0))
    table.remove(("never", 0))
    assert table.get(("t", 0)) is P.NON_EXISTENT
    assert table.keys_in(P.ONLINE) == [("t", 1)]


def test_state_table_does_not_share_its_initial_mapping() -> None:
    initial = {("t", 0): P.NEW}
    table: StateTable[tuple[str, int], PartitionState] = StateTable(P.NON_EXISTENT, initial)
    table.transition([("t", 0)], P.ONLINE)
    assert initial == {("t", 0): P.NEW}
