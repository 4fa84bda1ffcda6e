"""Leader election strategies, checked with plain values (no controller, no ZooKeeper)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokerd.controller.election import (
    ElectionResult,
    controlled_shutdown_leader,
    isr_without_restarted,
    offline_leader,
    preferred_leader,
    reassign_leader,
    shrink_isr_without,
)

ALL_LIVE = {1, 2, 3}
Result = ElectionResult
case = pytest.param


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "expected"),
    [
        case([1, 2, 3], [1, 2, 3], ALL_LIVE, False, Result(1, (1, 2, 3)), id="all-well"),
        case([1, 2, 3], [1, 2, 3], {2, 3}, False, Result(2, (2, 3)), id="preferred-dead"),
        case([1, 2, 3], [3, 2], ALL_LIVE, False, Result(2, (3, 2)), id="assignment-order"),
        case([1, 2, 3], [3], ALL_LIVE, False, Result(3, (3,)), id="first-not-in-isr"),
        case([1, 2, 3], [1], {2, 3}, False, None, id="isr-dead-clean"),
        case([1, 2, 3], [1], {2, 3}, True, Result(2, (2,), unclean=True), id="isr-dead-unclean"),
        case([1, 2, 3], [], ALL_LIVE, False, None, id="empty-isr-clean"),
        case([3, 1, 2], [], ALL_LIVE, True, Result(3, (3,), unclean=True), id="empty-isr-unclean"),
        case([1, 2, 3], [1, 2, 3], set(), False, None, id="nobody-live-clean"),
        case([1, 2, 3], [1, 2, 3], set(), True, None, id="nobody-live-unclean"),
        case([1, 2, 3], [1, 2], {2, 3}, True, Result(2, (2,)), id="unclean-unused"),
    ],
)
def test_offline_leader(
    assignment: list[int],
    isr: list[int],
    live: set[int],
    unclean: bool,
    expected: ElectionResult | None,
) -> None:
    assert offline_leader(assignment, isr, live, unclean) == expected


@pytest.mark.parametrize(
    ("targets", "isr", "live", "expected"),
    [
        case([4, 5], [1, 4, 5], {1, 4, 5}, Result(4, (1, 4, 5)), id="first-target"),
        case([4, 5], [1, 4, 5], {1, 5}, Result(5, (1, 5)), id="first-target-dead"),
        case([4, 5], [5, 1, 4], {1, 4, 5}, Result(4, (5, 1, 4)), id="target-order"),
        case([4, 5], [1, 5], {1, 4, 5}, Result(5, (1, 5)), id="first-not-in-isr"),
        case([4, 5], [1], {1, 4, 5}, None, id="no-target-in-isr"),
        case([4, 5], [], {1, 4, 5}, None, id="empty-isr"),
        case([4, 5], [1, 4, 5], set(), None, id="nobody-live"),
    ],
)
def test_reassign_leader(
    targets: list[int], isr: list[int], live: set[int], expected: ElectionResult | None
) -> None:
    assert reassign_leader(targets, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "expected"),
    [
        case([2, 1, 3], [1, 2, 3], ALL_LIVE, Result(2, (1, 2, 3)), id="preferred-in-isr"),
        case([2, 1, 3], [1, 2, 3], {1, 3}, None, id="preferred-dead"),
        case([2, 1, 3], [1, 3], ALL_LIVE, None, id="preferred-not-in-isr"),
        case([2, 1, 3], [], ALL_LIVE, None, id="empty-isr"),
        case([2, 1, 3], [1, 2, 3], set(), None, id="nobody-live"),
        case([2, 1, 3], [1, 2, 3], {2}, Result(2, (2,)), id="dead-leave-isr"),
        case([], [1], ALL_LIVE, None, id="no-assignment"),
    ],
)
def test_preferred_leader(
    assignment: list[int], isr: list[int], live: set[int], expected: ElectionResult | None
) -> None:
    assert preferred_leader(assignment, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "shutting_down", "expected"),
    [
        case([1, 2, 3], [1, 2, 3], ALL_LIVE, {1}, Result(2, (2, 3)), id="leader-shuts-down"),
        case([1, 2, 3], [1, 2, 3], ALL_LIVE, set(), Result(1, (1, 2, 3)), id="nobody-shuts-down"),
        case([1, 2, 3], [1, 2, 3], ALL_LIVE, {3}, Result(1, (1, 2)), id="follower-shuts-down"),
        case([1, 2, 3], [1, 2, 3], {1, 3}, {1}, Result(3, (3,)), id="next-dead"),
        case([1, 2, 3], [3, 2, 1], ALL_LIVE, {1}, Result(2, (3, 2)), id="assignment-order"),
        case([1, 2, 3], [1, 3], ALL_LIVE, {1}, Result(3, (3,)), id="next-not-in-isr"),
        case([1, 2, 3], [1], ALL_LIVE, {1}, None, id="only-isr-member-leaving"),
        case([1, 2, 3], [], ALL_LIVE, set(), None, id="empty-isr"),
        case([1, 2, 3], [1, 2, 3], set(), set(), None, id="nobody-live"),
        case([1, 2, 3], [1, 2, 3], ALL_LIVE, ALL_LIVE, None, id="all-shut-down"),
    ],
)
def test_controlled_shutdown_leader(
    assignment: list[int],
    isr: list[int],
    live: set[int],
    shutting_down: set[int],
    expected: ElectionResult | None,
) -> None:
    assert controlled_shutdown_leader(assignment, isr, live, shutting_down) == expected


@pytest.mark.parametrize(
    ("isr", "gone", "expected"),
    [
        ([1, 2, 3], {2}, (1, 3)),
        ([3, 1, 2], {1, 9}, (3, 2)),
        ([1, 2], set(), (1, 2)),
        ([1, 2], {1, 2}, ()),
        ([], {1}, ()),
    ],
)
def test_shrink_isr_without(isr: list[int], gone: set[int], expected: tuple[int, ...]) -> None:
    assert shrink_isr_without(isr, gone) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "restarted", "unclean", "expected"),
    [
        case([2, 3, 1], [2, 3, 1], ALL_LIVE, {2}, False, Result(3, (3, 1)), id="leader-restarted"),
        case([2, 3, 1], [2, 3, 1], {3}, {3}, False, None, id="only-restarted-live"),
        case([2, 3, 1], [2, 3, 1], {3}, {3}, True, Result(3, (3,), unclean=True), id="unclean"),
        case([2, 3, 1], [2, 3], {2, 3}, {2, 3}, False, Result(2, (2, 3)), id="all-restarted"),
        case([2, 3, 1], [3, 1], ALL_LIVE, {2}, False, Result(3, (3, 1)), id="not-in-isr-anyway"),
    ],
)
def test_offline_leader_after_restarts(
    assignment: list[int],
    isr: list[int],
    live: set[int],
    restarted: set[int],
    unclean: bool,
    expected: ElectionResult | None,
) -> None:
    assert offline_leader(assignment, isr, live, unclean, restarted) == expected


@pytest.mark.parametrize(
    ("isr", "restarted", "expected"),
    [
        ([2, 3, 1], {3}, (2, 1)),
        ([2, 3, 1], set(), (2, 3, 1)),
        ([2, 3], {2, 3}, (2, 3)),
        ([2, 3], {1, 2}, (3,)),
    ],
)
def test_isr_without_restarted(
    isr: list[int], restarted: set[int], expected: tuple[int, ...]
) -> None:
    assert isr_without_restarted(isr, restarted) == expected


def test_result_is_frozen() -> None:
    result = ElectionResult(1, (1,))
    with pytest.raises(AttributeError):
        result.leader = 2  # type: ignore[misc]


brokers = st.integers(min_value=0, max_value=7)


@given(
    assignment=st.lists(brokers, max_size=6, unique=True),
    isr=st.lists(brokers, max_size=6, unique=True),
    live=st.sets(brokers),
    unclean=st.booleans(),
)
def test_offline_leader_never_picks_dead_or_unsynced_replicas(
    assignment: list[int], isr: list[int], live: set[int], unclean: bool
) -> None:
    result = offline_leader(assignment, isr, live, unclean)
    if result is None:
        assert not any(r in live and (unclean or r in isr) for r in assignment)
        return
    assert result.leader in live
    assert result.leader in assignment
    assert result.unclean == (result.leader not in isr)
    assert unclean or result.leader in isr
    assert result.leader in result.isr
    assert set(result.isr) <= live


@given(
    assignment=st.lists(brokers, max_size=6, unique=True),
    isr=st.lists(brokers, max_size=6, unique=True),
    live=st.sets(brokers),
    restarted=st.sets(brokers),
)
def test_a_restarted_replica_is_elected_cleanly_only_if_every_isr_member_restarted(
    assignment: list[int], isr: list[int], live: set[int], restarted: set[int]
) -> None:
    result = offline_leader(assignment, isr, live, False, restarted)
    if result is not None and result.leader in restarted:
        assert set(isr) <= restarted
