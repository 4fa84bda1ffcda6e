"""Partition and replica states as data: each state lists the states it may be entered from.

The controller asks for a transition of a whole batch at once (all partitions of a dead
broker, all replicas of a deleted topic). Checking a batch against these tables splits it
into the keys that may move and the ones that may not; the caller applies the first and
logs the second, so one bad key never blocks the rest. This module does no logging and no
I/O, so the tables can be tested pair by pair with plain values.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from enum import Enum, auto
from typing import Generic, TypeVar


class PartitionState(Enum):
    """Kafka's partition states; a NEW partition has replicas but no leader yet."""

    NON_EXISTENT = auto()
    NEW = auto()
    ONLINE = auto()
    OFFLINE = auto()

    @property
    def valid_previous_states(self) -> frozenset[PartitionState]:
        return _PARTITION_PREVIOUS[self]


class ReplicaState(Enum):
    """Kafka's replica states, including the three steps of deleting a replica."""

    NEW = auto()
    ONLINE = auto()
    OFFLINE = auto()
    REPLICA_DELETION_STARTED = auto()
    REPLICA_DELETION_SUCCESSFUL = auto()
    REPLICA_DELETION_INELIGIBLE = auto()
    NON_EXISTENT = auto()

    @property
    def valid_previous_states(self) -> frozenset[ReplicaState]:
        return _REPLICA_PREVIOUS[self]


_P = PartitionState
_PARTITION_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}

_R = ReplicaState
_REPLICA_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.REPLICA_DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.REPLICA_DELETION_INELIGIBLE}),
    _R.REPLICA_DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.REPLICA_DELETION_SUCCESSFUL: frozenset({_R.REPLICA_DELETION_STARTED}),
    _R.REPLICA_DELETION_INELIGIBLE: frozenset({_R.REPLICA_DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.REPLICA_DELETION_SUCCESSFUL}),
}

K = TypeVar("K", bound=Hashable)
S = TypeVar("S", PartitionState, ReplicaState)


def is_valid_transition(current: S, target: S) -> bool:
    """Whether something in ``current`` may be moved to ``target``."""
    return current in target.valid_previous_states


def split_transitions(
    current_states: Mapping[K, S], target: S, default: S, keys: Iterable[K] | None = None
) -> tuple[list[K], list[K]]:
    """Split ``keys`` (all of ``current_states`` if None) into (may move, may not move).

    A key missing from ``current_states`` is in ``default``, normally NON_EXISTENT: the
    controller has not seen it yet. Both lists keep the order of ``keys``.
    """
    valid: list[K] = []
    invalid: list[K] = []
    for key in current_states if keys is None else keys:
        current = current_states.get(key, default)
        (valid if is_valid_transition(current, target) else invalid).append(key)
    return valid, invalid


class StateTable(Generic[K, S]):
    """The current state of every partition (or replica) the controller knows about.

    Keys not in the table are in ``default``. Moving a key to ``default`` forgets it, so
    deleted partitions and replicas do not pile up in memory.
    """

    def __init__(self, default: S, initial: Mapping[K, S] | None = None) -> None:
        """``initial`` loads states read back on controller failover, unchecked."""
        self._default: S = default
        self._states: dict[K, S] = dict(initial or {})

    def get(self, key: K) -> S:
        return self._states.get(key, self._default)

    def transition(self, keys: Iterable[K], target: S) -> tuple[list[K], list[K]]:
        """Move the keys that may go to ``target``; return (moved, refused) for logging."""
        moved, refused = split_transitions(self._states, target, self._default, keys)
        for key in moved:
            if target is self._default:
                self._states.pop(key, None)
            else:
                self._states[key] = target
        return moved, refused

    def remove(self, key: K) -> None:
        """Forget ``key`` unchecked: a finished topic deletion drops it in whatever state."""
        self._states.pop(key, None)

    def keys_in(self, state: S) -> list[K]:
        """The known keys currently in ``state`` (never the forgotten ones in ``default``)."""
        return [key for key, current in self._states.items() if current is state]
