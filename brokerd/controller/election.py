"""Leader election for one partition, as pure functions of (assignment, ISR, live replicas).

They are pure so that they can be tested with plain values and so that the controller can
apply them to a whole batch of partitions and write the results to ZooKeeper afterwards.
Every strategy picks the first eligible replica in the order of the given replica list,
never in ISR order: the assignment order says which replica is preferred, and keeping to
it moves leadership back to the preferred replica whenever it can.

The ISR handed back keeps only live replicas (in their old ISR order): a dead broker cannot
be in sync, and an ISR naming one would let it be elected again before it has caught up.

A replica that restarted since the ISR was written (``restarted``: its registration is
newer than the state) is no longer in sync either, whatever the state says: its crash may
have taken the unflushed tail of its log, so it left the ISR when it died and the state
just does not say so yet. Electing it would make the others truncate to its shorter log.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ElectionResult:
    """The new leader and ISR; ``unclean`` marks a leader chosen from outside the ISR."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def shrink_isr_without(isr: Sequence[int], gone: Collection[int]) -> tuple[int, ...]:
    """The ISR without ``gone``, for a partition whose leader survives a broker failure."""
    return tuple(replica for replica in isr if replica not in gone)


def isr_without_restarted(isr: Sequence[int], restarted: Collection[int]) -> tuple[int, ...]:
    """The ISR without the members that restarted since it was written, unless every member
    did: then none of them can hold more than another, and they all stay in."""
    kept = shrink_isr_without(isr, restarted)
    return kept if kept else tuple(isr)


def _live_isr(isr: Sequence[int], live: Collection[int]) -> tuple[int, ...]:
    return tuple(replica for replica in isr if replica in live)


def _elect(candidates: Sequence[int], new_isr: tuple[int, ...]) -> ElectionResult | None:
    """The first candidate that is in ``new_isr`` leads it; ``new_isr`` holds only live ones."""
    leader = next((replica for replica in candidates if replica in new_isr), None)
    return None if leader is None else ElectionResult(leader, new_isr)


def offline_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    unclean_enabled: bool,
    restarted: Collection[int] = (),
) -> ElectionResult | None:
    """A leader for a partition whose leader died (or restarted), or None if it must stay
    offline.

    Unclean election gives up committed records that only the dead ISR members held, in
    exchange for availability, so it is only done when the caller has enabled it.
    """
    clean = _elect(assignment, _live_isr(isr_without_restarted(isr, restarted), live))
    if clean is not None or not unclean_enabled:
        return clean
    leader = next((replica for replica in assignment if replica in live), None)
    return None if leader is None else ElectionResult(leader, (leader,), unclean=True)


def reassign_leader(
    target_replicas: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> ElectionResult | None:
    """A leader among the replicas a reassignment moves the partition to."""
    return _elect(target_replicas, _live_isr(isr, live))


def preferred_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> ElectionResult | None:
    """The first assigned replica, if it can lead now; nobody else is a preferred leader."""
    return _elect(assignment[:1], _live_isr(isr, live))


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> ElectionResult | None:
    """A leader that is not shutting down; the brokers going away also leave the ISR."""
    return _elect(assignment, shrink_isr_without(_live_isr(isr, live), shutting_down))
