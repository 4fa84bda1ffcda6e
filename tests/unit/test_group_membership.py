"""The group membership state machine, with plain values and the clock passed in."""

from __future__ import annotations

import itertools

import pytest

from brokerd.groups.members import GroupLimits, GroupState, JoinRequest, JoinResult
from brokerd.groups.membership import Group
from spark_replica.errors import (
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def make_group(**limits: int) -> Group:
    counter = itertools.count(1)
    return Group("g", GroupLimits(**limits), make_member_id=lambda p: f"{p}-{next(counter)}")


def request(
    member_id: str = "",
    *,
    client: str = "c",
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),),
    instance: str | None = None,
    two_step: bool = False,
    protocol_type: str = "consumer",
    session_ms: int = SESSION_MS,
) -> JoinRequest:
    return JoinRequest(
        member_id=member_id,
        group_instance_id=instance,
        client_id=client,
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=REBALANCE_MS,
        protocol_type=protocol_type,
        protocols=protocols,
        require_known_member_id=two_step,
    )


def join_stable(group: Group, *clients: str, now: float = 0.0) -> list[str]:
    """Join every client (members answered by an earlier generation rejoin), then the
    leader syncs; the member ids, in join order."""
    ids = [group.join(request(client=client), now).member_id for client in clients]
    while group.state is GroupState.PREPARING_REBALANCE:
        member = next(m for m in group.members.values() if not m.awaiting_join)
        group.join(request(member.member_id, client=member.client_id), now)
    leader = group.leader
    assert leader is not None and group.state is GroupState.COMPLETING_REBALANCE
    sync = group.sync(leader, group.generation, None, {m: m.encode() for m in ids}, now)
    assert sync.own_sync is not None and sync.own_sync.error is None
    assert group.state is GroupState.STABLE
    return ids


def test_first_member_joins_and_leads_a_stable_group() -> None:
    group = make_group()
    replies = group.join(request(client="a"), 0.0)
    answer = replies.own_join
    assert answer is not None and answer.error is None
    assert answer.member_id == "a-1" and answer.leader == "a-1" and answer.generation == 1
    assert answer.protocol_name == "range" and answer.protocol_type == "consumer"
    assert answer.members == (("a-1", None, b"m"),)
    assert group.state is GroupState.COMPLETING_REBALANCE
    sync = group.sync("a-1", 1, None, {"a-1": b"all"}, 1.0)
    assert sync.own_sync is not None and sync.own_sync.assignment == b"all"
    assert group.state is GroupState.STABLE


def test_second_member_rebalances_and_both_get_their_assignment() -> None:
    group = make_group()
    (a,) = join_stable(group, "a")
    joined_b = group.join(request(client="b"), 1.0)
    assert joined_b.own_join is None  # waits for a to rejoin
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.heartbeat(a, 1, None, 2.0) is RebalanceInProgressError
    rejoined_a = group.join(request(a, client="a"), 3.0)
    b = joined_b.member_id
    assert rejoined_a.own_join is not None and rejoined_a.own_join.generation == 2
    assert rejoined_a.own_join.leader == a
    assert {m for m, _, _ in rejoined_a.own_join.members} == {a, b}
    answer_b = rejoined_a.joins[b]
    assert answer_b.generation == 2 and answer_b.members == () and answer_b.leader == a
    follower_sync = group.sync(b, 2, None, {}, 4.0)
    assert follower_sync.own_sync is None  # waits for the leader's assignment
    leader_sync = group.sync(a, 2, None, {a: b"p0", b: b"p1"}, 5.0)
    assert leader_sync.own_sync is not None and leader_sync.own_sync.assignment == b"p0"
    assert leader_sync.syncs[b].assignment == b"p1"
    assert group.heartbeat(b, 2, None, 6.0) is None


def test_a_leaving_member_rebalances_and_the_other_gets_everything() -> None:
    group = make_group()
    a, b = join_stable(group, "a", "b")
    errors, _ = group.leave([(b, None)], 10.0)
    assert errors == [None]
    assert group.state is GroupState.PREPARING_REBALANCE
    rejoined = group.join(request(a, client="a"), 11.0)
    assert rejoined.own_join is not None and rejoined.own_join.generation == 3
    assert [m for m, _, _ in rejoined.own_join.members] == [a]
    assert group.heartbeat(b, 3, None, 12.0) is UnknownMemberIdError


def test_last_member_leaving_empties_the_group() -> None:
    group = make_group()
    (a,) = join_stable(group, "a")
    errors, _ = group.leave([(a, None)], 1.0)
    assert errors == [None] and group.state is GroupState.EMPTY and group.generation == 2
    assert group.leave([(a, None)], 2.0)[0] == [UnknownMemberIdError]


def test_session_expiry_removes_the_silent_member() -> None:
    group = make_group()
    a, b = join_stable(group, "a", "b")
    assert group.next_deadline_ms() == SESSION_MS
    assert group.heartbeat(a, 2, None, 8_000.0) is None
    replies = group.tick(SESSION_MS)  # b never heartbeat
    assert not replies.joins and group.state is GroupState.PREPARING_REBALANCE
    assert b not in group.members
    assert group.heartbeat(a, 2, None, SESSION_MS + 1) is RebalanceInProgressError
    assert group.join(request(a, client="a"), SESSION_MS + 2).own_join is not None


def test_rebalance_timeout_drops_members_that_did_not_rejoin() -> None:
    group = make_group()
    a, b = join_stable(group, "a", "b")
    waiting = group.join(request(a, client="a", protocols=(("range", b"new"),)), 1.0)
    assert waiting.own_join is None
    # b keeps heartbeating but never rejoins.
    for t in range(5_000, REBALANCE_MS, 5_000):
        assert group.heartbeat(b, 2, None, float(t)) is RebalanceInProgressError
        assert group.tick(float(t)).joins == {}
    done = group.tick(REBALANCE_MS + 1.0)
    assert done.joins[a].generation == 3 and list(group.members) == [a]


def test_waiting_join_keeps_its_session_alive() -> None:
    group = make_group()
    a, b = join_stable(group, "a", "b")
    assert group.join(request(a, client="a", protocols=(("range", b"x"),)), 1.0).own_join is None
    group.heartbeat(b, 2, None, REBALANCE_MS - 5_000)
    assert group.tick(SESSION_MS * 2).joins == {}
    assert a in group.members


def test_two_step_join_hands_out_the_id_first() -> None:
    group = make_group()
    first = group.join(request(client="a", two_step=True), 0.0)
    assert first.own_join is not None and first.own_join.error is MemberIdRequiredError
    member_id = first.own_join.member_id
    assert member_id == "a-1" and group.state is GroupState.EMPTY
    second = group.join(request(member_id, client="a", two_step=True), 1.0)
    assert second.own_join is not None and second.own_join.member_id == member_id
    assert second.own_join.error is None and second.own_join.generation == 1


def test_unused_member_id_expires() -> None:
    group = make_group()
    first = group.join(request(client="a", two_step=True), 0.0)
    assert first.own_join is not None
    group.tick(SESSION_MS + 1.0)
    late = group.join(request(first.own_join.member_id, two_step=True), SESSION_MS + 2.0)
    assert late.own_join is not None and late.own_join.error is UnknownMemberIdError


def test_unknown_member_id_is_refused() -> None:
    group = make_group()
    join_stable(group, "a")
    replies = group.join(request("nobody"), 1.0)
    assert replies.own_join is not None and replies.own_join.error is UnknownMemberIdError


def test_protocol_type_and_protocols_must_match_the_group() -> None:
    group = make_group()
    join_stable(group, "a")
    other_type = group.join(request(client="b", protocol_type="connect"), 1.0)
    assert other_type.own_join is not None
    assert other_type.own_join.error is InconsistentGroupProtocolError
    no_common = group.join(request(client="b", protocols=(("roundrobin", b""),)), 1.0)
    assert no_common.own_join is not None
    assert no_common.own_join.error is InconsistentGroupProtocolError
    empty = make_group().join(request(protocols=()), 0.0)
    assert empty.own_join is not None and empty.own_join.error is InconsistentGroupProtocolError


def test_protocol_chosen_by_votes_among_those_all_support() -> None:
    group = make_group()
    both = (("cooperative-sticky", b"1"), ("range", b"2"))
    a = group.join(request(client="a", protocols=(("range", b"r"), ("roundrobin", b"x"))), 0.0)
    assert a.own_join is not None
    group.sync(a.member_id, 1, None, {}, 0.0)
    b = group.join(request(client="b", protocols=both), 1.0)
    c = group.join(request(client="c", protocols=both), 1.0)
    done = group.join(request(a.member_id, client="a", protocols=a_protocols()), 2.0)
    assert b.own_join is None and c.own_join is None
    assert done.own_join is not None and done.own_join.protocol_name == "range"
    assert dict((m, meta) for m, _, meta in done.own_join.members)[b.member_id] == b"2"


def a_protocols() -> tuple[tuple[str, bytes], ...]:
    return (("range", b"r"), ("roundrobin", b"x"))


def test_votes_pick_the_protocol_most_members_prefer() -> None:
    group = make_group(initial_rebalance_delay_ms=100)
    prefs_rr = (("roundrobin", b""), ("range", b""))
    prefs_range = (("range", b""), ("roundrobin", b""))
    group.join(request(client="a", protocols=prefs_range), 0.0)
    group.join(request(client="b", protocols=prefs_rr), 0.0)
    group.join(request(client="c", protocols=prefs_rr), 0.0)
    done = group.tick(100.0)
    assert {answer.protocol_name for answer in done.joins.values()} == {"roundrobin"}


def test_initial_delay_gathers_members_into_one_generation() -> None:
    group = make_group(initial_rebalance_delay_ms=300)
    a = group.join(request(client="a"), 0.0)
    b = group.join(request(client="b"), 100.0)
    assert a.own_join is None and b.own_join is None
    assert group.next_deadline_ms() == 300.0
    done = group.tick(300.0)
    assert {answer.generation for answer in done.joins.values()} == {1}
    assert set(done.joins) == {a.member_id, b.member_id}


def test_sync_and_heartbeat_errors() -> None:
    group = make_group()
    a, b = join_stable(group, "a", "b")
    assert group.sync(a, 1, None, {}, 1.0).own_sync.error is IllegalGenerationError  # type: ignore[union-attr]
    assert group.sync("x", 2, None, {}, 1.0).own_sync.error is UnknownMemberIdError  # type: ignore[union-attr]
    wrong_type = group.sync(a, 2, None, {}, 1.0, protocol_type="connect")
    assert wrong_type.own_sync is not None
    assert wrong_type.own_sync.error is InconsistentGroupProtocolError
    stable = group.sync(b, 2, None, {}, 1.0)
    assert stable.own_sync is not None and stable.own_sync.assignment == b.encode()
    assert group.heartbeat(a, 1, None, 1.0) is IllegalGenerationError
    assert group.heartbeat("x", 2, None, 1.0) is UnknownMemberIdError
    assert make_group().heartbeat("x", 0, None, 1.0) is UnknownMemberIdError


def test_waiting_sync_is_told_to_rejoin_when_a_rebalance_starts() -> None:
    group = make_group()
    a = group.join(request(client="a"), 0.0).member_id
    group.sync(a, 1, None, {a: b"x"}, 0.0)
    b = group.join(request(client="b"), 1.0).member_id
    group.join(request(a, client="a"), 1.0)
    assert group.sync(b, 2, None, {}, 2.0).own_sync is None
    c = group.join(request(client="c"), 3.0)
    assert c.syncs[b].error is RebalanceInProgressError
    assert group.sync(a, 2, None, {}, 4.0).own_sync.error is RebalanceInProgressError  # type: ignore[union-attr]


def test_lost_join_answer_is_sent_again_without_a_rebalance() -> None:
    group = make_group()
    _, b = join_stable(group, "a", "b")
    again = group.join(request(b, client="b"), 5.0)
    assert again.own_join is not None and again.own_join.generation == 2
    assert group.state is GroupState.STABLE


def test_leader_rejoining_a_stable_group_rebalances() -> None:
    group = make_group()
    a, _ = join_stable(group, "a", "b")
    assert group.join(request(a, client="a"), 5.0).own_join is None
    assert group.state is GroupState.PREPARING_REBALANCE


def test_commit_checks() -> None:
    group = make_group()
    assert group.check_commit("", -1, None, 0.0) is None  # simple commit, no members
    a, _ = join_stable(group, "a", "b")
    assert group.check_commit("", -1, None, 1.0) is UnknownMemberIdError
    assert group.check_commit(a, 2, None, 1.0) is None
    assert group.check_commit(a, 1, None, 1.0) is IllegalGenerationError
    assert group.check_commit("x", 2, None, 1.0) is UnknownMemberIdError
    group.join(request(client="c"), 2.0)
    assert group.check_commit(a, 2, None, 3.0) is None  # preparing: commit before revoking


def test_group_max_size() -> None:
    group = make_group(max_size=1)
    join_stable(group, "a")
    refused = group.join(request(client="b"), 1.0)
    assert refused.own_join is not None and refused.own_join.error is GroupMaxSizeReachedError


def test_static_member_restart_keeps_its_assignment_without_rebalance() -> None:
    group = make_group()
    leader = group.join(request(client="a", instance="i-a"), 0.0).member_id
    group.sync(leader, 1, None, {leader: b"x"}, 0.0)
    follower = group.join(request(client="b", instance="i-b"), 1.0)
    group.join(request(leader, client="a", instance="i-a"), 1.0)
    group.sync(follower.member_id, 2, "i-b", {}, 2.0)
    group.sync(leader, 2, "i-a", {leader: b"p0", follower.member_id: b"p1"}, 2.0)
    assert group.state is GroupState.STABLE
    restarted = group.join(request(client="b", instance="i-b"), 3.0)
    answer = restarted.own_join
    assert answer is not None and answer.error is None and answer.generation == 2
    assert answer.member_id != follower.member_id and group.state is GroupState.STABLE
    sync = group.sync(answer.member_id, 2, "i-b", {}, 4.0)
    assert sync.own_sync is not None and sync.own_sync.assignment == b"p1"
    fenced = group.heartbeat(follower.member_id, 2, "i-b", 5.0)
    assert fenced is FencedInstanceIdError


def test_static_leader_restart_acts_as_follower_without_rebalance() -> None:
    # Which member leads depends on whose JoinGroup came first; a restarted leader must
    # not rebalance either. It is told the old member id leads, so it does not reassign,
    # and syncs for its stored assignment; it leads the next rebalance (Kafka does this).
    group = make_group()
    leader = group.join(request(client="a", instance="i-a"), 0.0).member_id
    group.sync(leader, 1, "i-a", {}, 0.0)
    follower = group.join(request(client="b", instance="i-b"), 1.0).member_id
    group.join(request(leader, client="a", instance="i-a"), 1.0)
    group.sync(follower, 2, "i-b", {}, 2.0)
    group.sync(leader, 2, "i-a", {leader: b"p0", follower: b"p1"}, 2.0)
    restarted = group.join(request(client="a", instance="i-a"), 3.0).own_join
    assert restarted is not None and restarted.error is None and restarted.generation == 2
    assert restarted.leader == leader != restarted.member_id and restarted.members == ()
    assert group.state is GroupState.STABLE and group.leader == restarted.member_id
    sync = group.sync(restarted.member_id, 2, "i-a", {}, 4.0)
    assert sync.own_sync is not None and sync.own_sync.assignment == b"p0"
    assert group.heartbeat(leader, 2, "i-a", 5.0) is FencedInstanceIdError


def test_leave_by_instance_id() -> None:
    group = make_group()
    a = group.join(request(client="a", instance="i-a"), 0.0).member_id
    assert group.leave([("", "i-x")], 1.0)[0] == [UnknownMemberIdError]
    assert group.leave([("other", "i-a")], 1.0)[0] == [FencedInstanceIdError]
    errors, _ = group.leave([("", "i-a")], 1.0)
    assert errors == [None] and a not in group.members and group.state is GroupState.EMPTY


def test_leaving_member_with_a_waiting_join_gets_an_answer() -> None:
    group = make_group()
    a, _ = join_stable(group, "a", "b")
    group.join(request(a, client="a", protocols=(("range", b"y"),)), 1.0)
    errors, replies = group.leave([(a, None)], 2.0)
    assert errors == [None]
    assert replies.joins[a] == JoinResult(a, UnknownMemberIdError)


@pytest.mark.parametrize("method", ["abandon"])
def test_abandon_answers_every_waiter(method: str) -> None:
    group = make_group(initial_rebalance_delay_ms=1_000)
    a = group.join(request(client="a"), 0.0).member_id
    replies = getattr(group, method)()
    assert replies.joins[a].error.code == 16


def test_static_restart_with_new_metadata_keeps_the_generation() -> None:
    # A restarted consumer's metadata differs (it owns no partitions yet); only a change
    # of the group's selected protocol calls for a rebalance, as in Kafka.
    group = make_group()
    leader = group.join(request(client="a", instance="i-a"), 0.0).member_id
    group.sync(leader, 1, "i-a", {}, 0.0)
    follower = group.join(request(client="b", instance="i-b"), 1.0).member_id
    group.join(request(leader, client="a", instance="i-a"), 1.0)
    group.sync(follower, 2, "i-b", {}, 2.0)
    group.sync(leader, 2, "i-a", {leader: b"p0", follower: b"p1"}, 2.0)
    restarted = group.join(
        request(client="b", instance="i-b", protocols=(("range", b"owns nothing"),)), 3.0
    )
    assert restarted.own_join is not None and restarted.own_join.generation == 2
    assert group.state is GroupState.STABLE
    switched = group.join(
        request(client="b", instance="i-b", protocols=(("roundrobin", b""), ("range", b""))),
        4.0,
    )
    assert switched.own_join is not None and switched.own_join.generation == 2


def test_static_restart_that_changes_the_protocol_rebalances() -> None:
    group = make_group()
    prefs = (("range", b""), ("roundrobin", b""))
    leader = group.join(request(client="a", instance="i-a", protocols=prefs), 0.0).member_id
    group.sync(leader, 1, "i-a", {}, 0.0)
    follower = group.join(request(client="b", instance="i-b", protocols=prefs), 1.0).member_id
    group.join(request(leader, client="a", instance="i-a", protocols=prefs), 1.0)
    group.sync(follower, 2, "i-b", {}, 2.0)
    group.sync(leader, 2, "i-a", {}, 2.0)
    only_rr = group.join(request(client="b", instance="i-b", protocols=(("roundrobin", b""),)), 3.0)
    assert only_rr.own_join is None and group.state is GroupState.PREPARING_REBALANCE
