"""One consumer group's membership protocol as a pure state machine (no I/O, time passed in).

Kafka's classic group protocol: members JoinGroup, the coordinator waits until every
known member has rejoined (or the rebalance timeout passes), bumps the generation, picks
a protocol every member supports and a leader; the leader computes the assignment
client-side and hands it over in SyncGroup, which delivers each member its share.

States and what moves them:

    Empty                a group with no members (it may still hold committed offsets)
      -> PreparingRebalance   a member joins
    PreparingRebalance   waiting for the members to (re)join
      -> CompletingRebalance  every member joined (after the initial delay), or the
                              rebalance timeout passed (members that did not rejoin leave)
      -> Empty                nobody is left when the join completes
    CompletingRebalance  join answered; waiting for the leader's SyncGroup
      -> Stable               the leader's assignment arrived
      -> PreparingRebalance   a member joins anew, leaves, or its session expires
    Stable               assignment delivered; members heartbeat
      -> PreparingRebalance   a member joins, leaves, changes its protocols, or expires
    Dead                 the group was deleted; nothing moves it out

A request whose answer must wait (JoinGroup during a rebalance, SyncGroup before the
leader's) is answered later, in the `Replies` of whichever call completes it; the
coordinator keeps one waiter per member id and delivers them. A member with a waiting
request counts as alive (its request stands for heartbeats), as in Kafka.

Static membership (group.instance.id): a member that rejoins under a known instance id
takes the old member's place, and the old member id is fenced. In a Stable group a
member's restart is answered at once with the current generation and assignment, with no
rebalance. A restarted leader is told the old member id leads, so it acts as a follower and
does not reassign a Stable group (Kafka does the same); it leads the next rebalance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from brokerd.groups.members import (
    ErrorType,
    GroupLimits,
    GroupState,
    JoinRequest,
    JoinResult,
    Member,
    Replies,
    SyncResult,
    new_member_id,
)
from spark_replica.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)


class Group:
    """The membership of one group; owned by the coordinator's event loop."""

    def __init__(
        self,
        group_id: str,
        limits: GroupLimits | None = None,
        make_member_id: Callable[[str], str] = new_member_id,
    ) -> None:
        self.group_id = group_id
        self.limits = limits or GroupLimits()
        self._make_member_id = make_member_id
        self.state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}  # in join order
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        # Two-step join (v4+): ids handed out and not yet used, with their deadline.
        self.pending_members: dict[str, float] = {}
        self._rebalance_deadline_ms = 0.0
        self._join_not_before_ms = 0.0

    # -- queries -------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.members

    def next_deadline_ms(self) -> float | None:
        """The earliest time at which `tick` may change something."""
        deadlines = [d for m in self.members.values() if (d := m.session_deadline_ms()) is not None]
        deadlines.extend(self.pending_members.values())
        if self.state is GroupState.PREPARING_REBALANCE:
            deadlines.append(self._rebalance_deadline_ms)
            if self._all_joined():
                deadlines.append(self._join_not_before_ms)
        return min(deadlines, default=None)

    # -- JoinGroup -------------------------------------------------------------

    def join(self, request: JoinRequest, now_ms: float) -> Replies:
        return self._join(request, now_ms).claim_own()

    def _join(self, request: JoinRequest, now_ms: float) -> Replies:
        if self.state is GroupState.DEAD:
            return self._join_error(request.member_id, CoordinatorNotAvailableError)
        if not self._protocols_acceptable(request):
            return self._join_error(request.member_id, InconsistentGroupProtocolError)
        if request.member_id == "":
            return self._join_unknown(request, now_ms)
        if request.member_id in self.pending_members:
            del self.pending_members[request.member_id]
            return self._add_member(request.member_id, request, now_ms)
        member = self.members.get(request.member_id)
        if member is None:
            return self._join_error(request.member_id, UnknownMemberIdError)
        if request.group_instance_id != member.group_instance_id:
            return self._join_error(request.member_id, FencedInstanceIdError)
        return self._join_known(member, request, now_ms)

    def _join_error(self, member_id: str, error: ErrorType) -> Replies:
        return Replies(member_id=member_id, own_join=JoinResult(member_id=member_id, error=error))

    def _protocols_acceptable(self, request: JoinRequest) -> bool:
        if not request.protocol_type or not request.protocols:
            return False
        if not self.members:
            return True
        if request.protocol_type != self.protocol_type:
            return False
        return bool(self._candidate_protocols() & {name for name, _ in request.protocols})

    def _candidate_protocols(self) -> set[str]:
        names = [m.protocol_names() for m in self.members.values()]
        return set.intersection(*names) if names else set()

    def _join_unknown(self, request: JoinRequest, now_ms: float) -> Replies:
        instance = request.group_instance_id
        if instance is not None and instance in self.static_members:
            return self._replace_static_member(request, now_ms)
        if len(self.members) + len(self.pending_members) >= self.limits.max_size:
            return self._join_error("", GroupMaxSizeReachedError)
        member_id = self._make_member_id(instance or request.client_id)
        if request.require_known_member_id and instance is None:
            self.pending_members[member_id] = now_ms + request.session_timeout_ms
            return self._join_error(member_id, MemberIdRequiredError)
        return self._add_member(member_id, request, now_ms)

    def _add_member(self, member_id: str, request: JoinRequest, now_ms: float) -> Replies:
        if len(self.members) >= self.limits.max_size:
            return self._join_error(member_id, GroupMaxSizeReachedError)
        member = _member_from(member_id, request, now_ms)
        member.awaiting_join = True
        self.members[member_id] = member
        if request.group_instance_id is not None:
            self.static_members[request.group_instance_id] = member_id
        if self.protocol_type is None or len(self.members) == 1:
            self.protocol_type = request.protocol_type
        replies = Replies(member_id=member_id)
        replies.merge(self._prepare_rebalance(now_ms))
        replies.merge(self._maybe_complete_join(now_ms))
        return replies

    def _replace_static_member(self, request: JoinRequest, now_ms: float) -> Replies:
        """A known group.instance.id came back under a new member id: it takes the old
        member's place and the old id is fenced."""
        assert request.group_instance_id is not None
        old = self.members.pop(self.static_members[request.group_instance_id])
        replies = Replies()
        if old.awaiting_join:
            replies.joins[old.member_id] = JoinResult(old.member_id, FencedInstanceIdError)
        if old.awaiting_sync:
            replies.syncs[old.member_id] = SyncResult(FencedInstanceIdError)
        member_id = self._make_member_id(request.group_instance_id)
        member = _member_from(member_id, request, now_ms)
        member.assignment = old.assignment
        self.members[member_id] = member
        self.static_members[request.group_instance_id] = member_id
        was_leader = self.leader == old.member_id
        if was_leader:
            self.leader = member_id
        replies.member_id = member_id
        # Its metadata may differ (a restarted consumer owns nothing yet); only a change
        # of the group's protocol needs the leader to assign anew.
        same_protocol = bool(self._candidate_protocols()) and (
            self._select_protocol() == self.protocol_name
        )
        if self.state is GroupState.STABLE and same_protocol:
            replies.own_join = self._join_result(
                member_id, include_members=False, leader=old.member_id if was_leader else None
            )
            return replies
        member.awaiting_join = True
        replies.merge(self._prepare_rebalance(now_ms))
        replies.merge(self._maybe_complete_join(now_ms))
        return replies

    def _join_known(self, member: Member, request: JoinRequest, now_ms: float) -> Replies:
        replies = Replies(member_id=member.member_id)
        unchanged = tuple(request.protocols) == member.protocols
        # A follower that lost our answer (or a leader during CompletingRebalance) gets the
        # same generation again; a leader rejoining a Stable group wants to reassign.
        answer_again = self.state is GroupState.COMPLETING_REBALANCE or (
            self.state is GroupState.STABLE and member.member_id != self.leader
        )
        if unchanged and answer_again:
            member.last_heartbeat_ms = now_ms
            replies.own_join = self._join_result(
                member.member_id, include_members=member.member_id == self.leader
            )
            return replies
        _update_member(member, request, now_ms)
        member.awaiting_join = True
        replies.merge(self._prepare_rebalance(now_ms))
        replies.merge(self._maybe_complete_join(now_ms))
        return replies

    def _join_result(
        self, member_id: str, *, include_members: bool, leader: str | None = None
    ) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if include_members and self.protocol_name is not None:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()
            )
        return JoinResult(
            member_id=member_id,
            generation=self.generation,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=leader or self.leader or "",
            members=members,
        )

    # -- rebalancing -------------------------------------------------------------

    def _prepare_rebalance(self, now_ms: float) -> Replies:
        """Enter PreparingRebalance (if not there already); syncs waiting for an
        assignment that will never come are told to rejoin."""
        replies = Replies()
        if self.state is GroupState.PREPARING_REBALANCE:
            return replies
        for member in self.members.values():
            if member.awaiting_sync:
                member.awaiting_sync = False
                member.last_heartbeat_ms = now_ms
                replies.syncs[member.member_id] = SyncResult(RebalanceInProgressError)
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self._rebalance_deadline_ms = now_ms + timeout
        delay = self.limits.initial_rebalance_delay_ms if self.state is GroupState.EMPTY else 0
        self._join_not_before_ms = min(now_ms + delay, self._rebalance_deadline_ms)
        self.state = GroupState.PREPARING_REBALANCE
        return replies

    def _all_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def _maybe_complete_join(self, now_ms: float) -> Replies:
        if self.state is not GroupState.PREPARING_REBALANCE:
            return Replies()
        if now_ms >= self._rebalance_deadline_ms or (
            self._all_joined() and now_ms >= self._join_not_before_ms
        ):
            return self._complete_join(now_ms)
        return Replies()

    def _complete_join(self, now_ms: float) -> Replies:
        for member in [m for m in self.members.values() if not m.awaiting_join]:
            self._remove(member)
        self.pending_members.clear()
        self.generation += 1
        replies = Replies()
        if not self.members:
            self.state = GroupState.EMPTY
            self.protocol_name = None
            self.leader = None
            return replies
        self.protocol_name = self._select_protocol()
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.state = GroupState.COMPLETING_REBALANCE
        for member in self.members.values():
            member.awaiting_join = False
            member.assignment = b""
            member.last_heartbeat_ms = now_ms
            replies.joins[member.member_id] = self._join_result(
                member.member_id, include_members=member.member_id == self.leader
            )
        return replies

    def _select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those every member
        supports; the most votes win, ties broken by the leader's preference."""
        candidates = self._candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(name for name, _ in member.protocols if name in candidates)] += 1
        leader = self.members.get(self.leader or "") or next(iter(self.members.values()))
        preference = [name for name, _ in leader.protocols if name in candidates]
        return max(preference, key=lambda name: (votes[name], -preference.index(name)))

    def _remove(self, member: Member) -> None:
        del self.members[member.member_id]
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader == member.member_id:
            self.leader = next(iter(self.members), None)

    def _member_gone(self, member: Member, now_ms: float, error: ErrorType) -> Replies:
        """Remove a member that left or expired; a waiting request of its gets `error`."""
        replies = Replies()
        if member.awaiting_join:
            replies.joins[member.member_id] = JoinResult(member.member_id, error)
        if member.awaiting_sync:
            replies.syncs[member.member_id] = SyncResult(error)
        self._remove(member)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            replies.merge(self._prepare_rebalance(now_ms))
        replies.merge(self._maybe_complete_join(now_ms))
        return replies

    # -- SyncGroup ---------------------------------------------------------------

    def sync(
        self,
        member_id: str,
        generation: int,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        now_ms: float,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Replies:
        replies = self._sync(
            member_id,
            generation,
            group_instance_id,
            assignments,
            now_ms,
            protocol_type,
            protocol_name,
        )
        return replies.claim_own()

    def _sync(
        self,
        member_id: str,
        generation: int,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        now_ms: float,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> Replies:
        replies = Replies(member_id=member_id)
        error = self._check_member(member_id, generation, group_instance_id)
        if error is None and (
            (protocol_type is not None and protocol_type != self.protocol_type)
            or (protocol_name is not None and protocol_name != self.protocol_name)
        ):
            error = InconsistentGroupProtocolError
        if error is None and self.state is GroupState.PREPARING_REBALANCE:
            error = RebalanceInProgressError
        if error is not None:
            replies.own_sync = SyncResult(error)
            return replies
        member = self.members[member_id]
        member.last_heartbeat_ms = now_ms
        if self.state is GroupState.STABLE:
            replies.own_sync = self._sync_result(member)
            return replies
        member.awaiting_sync = True
        if member_id == self.leader:
            for other in self.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            self.state = GroupState.STABLE
            for other in self.members.values():
                if other.awaiting_sync:
                    other.awaiting_sync = False
                    other.last_heartbeat_ms = now_ms
                    replies.syncs[other.member_id] = self._sync_result(other)
        return replies

    def _sync_result(self, member: Member) -> SyncResult:
        return SyncResult(
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            assignment=member.assignment,
        )

    def _check_member(
        self, member_id: str, generation: int, group_instance_id: str | None
    ) -> ErrorType | None:
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return UnknownMemberIdError
        member = self.members.get(member_id)
        if member is None:
            if group_instance_id is not None and group_instance_id in self.static_members:
                return FencedInstanceIdError
            return UnknownMemberIdError
        if group_instance_id is not None and group_instance_id != member.group_instance_id:
            return FencedInstanceIdError
        if generation != self.generation:
            return IllegalGenerationError
        return None

    # -- Heartbeat, LeaveGroup, OffsetCommit ---------------------------------------

    def heartbeat(
        self, member_id: str, generation: int, group_instance_id: str | None, now_ms: float
    ) -> ErrorType | None:
        error = self._check_member(member_id, generation, group_instance_id)
        if error is not None:
            return error
        self.members[member_id].last_heartbeat_ms = now_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return RebalanceInProgressError
        return None

    def leave(
        self, leaving: Sequence[tuple[str, str | None]], now_ms: float
    ) -> tuple[list[ErrorType | None], Replies]:
        """Remove each (member id, group instance id); one error (or None) per entry."""
        errors: list[ErrorType | None] = []
        replies = Replies()
        for member_id, instance in leaving:
            if member_id and member_id in self.pending_members and instance is None:
                del self.pending_members[member_id]
                replies.merge(self._maybe_complete_join(now_ms))
                errors.append(None)
                continue
            if instance is not None:
                found = self.static_members.get(instance)
                if found is None:
                    errors.append(UnknownMemberIdError)
                    continue
                if member_id and member_id != found:
                    errors.append(FencedInstanceIdError)
                    continue
                member_id = found
            member = self.members.get(member_id)
            if member is None:
                errors.append(UnknownMemberIdError)
                continue
            replies.merge(self._member_gone(member, now_ms, UnknownMemberIdError))
            errors.append(None)
        return errors, replies

    def check_commit(
        self, member_id: str, generation: int, group_instance_id: str | None, now_ms: float
    ) -> ErrorType | None:
        """Whether an OffsetCommit may be stored: from a member of the current
        generation, or a simple commit (generation -1, no member id) to a group without
        members. Commits are allowed while preparing a rebalance: members commit what
        they processed before giving their partitions up."""
        if self.state is GroupState.DEAD:
            return CoordinatorNotAvailableError
        if generation < 0 and member_id == "":
            return None if not self.members else UnknownMemberIdError
        error = self._check_member(member_id, generation, group_instance_id)
        if error is not None:
            return error
        if self.state is GroupState.COMPLETING_REBALANCE:
            return RebalanceInProgressError
        self.members[member_id].last_heartbeat_ms = now_ms
        return None

    # -- time --------------------------------------------------------------------

    def tick(self, now_ms: float) -> Replies:
        """Expire sessions and unused member ids, and complete a rebalance whose wait is over."""
        replies = Replies()
        for member_id, join_deadline in list(self.pending_members.items()):
            if now_ms >= join_deadline:
                del self.pending_members[member_id]
        for member in list(self.members.values()):
            deadline = member.session_deadline_ms()
            if deadline is not None and now_ms >= deadline and member.member_id in self.members:
                replies.merge(self._member_gone(member, now_ms, UnknownMemberIdError))
        replies.merge(self._maybe_complete_join(now_ms))
        return replies

    def delete(self) -> None:
        """Mark the group Dead (DeleteGroups, once it has no members)."""
        self.pending_members.clear()
        self.state = GroupState.DEAD

    def abandon(self) -> Replies:
        """Answer every waiting request: this broker stops coordinating the group."""
        replies = Replies()
        for member in self.members.values():
            if member.awaiting_join:
                member.awaiting_join = False
                replies.joins[member.member_id] = JoinResult(member.member_id, NotCoordinatorError)
            if member.awaiting_sync:
                member.awaiting_sync = False
                replies.syncs[member.member_id] = SyncResult(NotCoordinatorError)
        return replies


def _member_from(member_id: str, request: JoinRequest, now_ms: float) -> Member:
    return Member(
        member_id=member_id,
        group_instance_id=request.group_instance_id,
        client_id=request.client_id,
        client_host=request.client_host,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple(request.protocols),
        last_heartbeat_ms=now_ms,
    )


def _update_member(member: Member, request: JoinRequest, now_ms: float) -> None:
    member.client_id = request.client_id
    member.client_host = request.client_host
    member.session_timeout_ms = request.session_timeout_ms
    member.rebalance_timeout_ms = request.rebalance_timeout_ms
    member.protocols = tuple(request.protocols)
    member.last_heartbeat_ms = now_ms
