"""The group coordinator of one broker: membership state machines driven by the loop's
clock, and committed offsets kept in ZooKeeper.

Owned by the broker's event loop: every group's `Group` (brokerd/groups/membership.py),
its waiting JoinGroup/SyncGroup futures and its timer live here and are touched only
on the loop. ZooKeeper calls run on worker threads (asyncio.to_thread); one lock per
group keeps its commits in the order they were answered.

Which groups this broker coordinates follows the metadata cache (coordinator_choice):
whenever the controller's UpdateMetadata moves a group elsewhere, the group is dropped
here and its waiting requests are answered NOT_COORDINATOR, so its members find the new
coordinator and rejoin there.

A broker serves no group until the controller's metadata names it live
(coordinator_choice.serves_groups): COORDINATOR_NOT_AVAILABLE to FindCoordinator, and to
group requests COORDINATOR_LOAD_IN_PROGRESS while it has no metadata (starting) or
NOT_COORDINATOR while the metadata leaves it out (the controller counts it dead). The
first commit of a group here claims its znode (group_store.claim_group) and every commit
is conditional on that claim: a coordinator that another broker has since loaded the
group on answers NOT_COORDINATOR and drops the group rather than writing over the
other's commits.

Offsets of empty groups expire (brokerd/groups/offset_expiry.py) in a task that looks at
the groups this broker coordinates every offsets.retention.check.interval.ms.

Committed offsets are not cached for answering: OffsetFetch reads ZooKeeper. A
coordinator that lost a group and got it back may otherwise answer offsets another
coordinator has since overwritten; fetches come once per assignment, so the read is
cheap where it matters. What a group's commits here stored is kept only for its lag
metrics (`committed_offsets`, read at scrape time, never answered to a client):
refreshed by each commit and by each expiry check, which reads the group's offsets from
ZooKeeper anyway, so a group that moved here shows its offsets after its next commit or
check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from brokerd.groups.coordinator_choice import coordinator_for, not_serving_error, serves_groups
from brokerd.groups.members import (
    ErrorType,
    GroupLimits,
    GroupState,
    JoinRequest,
    JoinResult,
    Replies,
    SyncResult,
)
from brokerd.groups.membership import Group
from brokerd.groups.offset_expiry import expired_offsets, subscribed_topics
from spark_replica.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    InvalidSessionTimeoutError,
    NonEmptyGroupError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    ZooKeeperError,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.zk import group_store
from spark_replica.zk.group_store import CommittedOffset

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from brokerd.core.context import BrokerContext

T = TypeVar("T")
logger = logging.getLogger("brokerd.groups")


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """What DescribeGroups answers: protocol and member details only once Stable."""

    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: list[MemberSummary] = field(default_factory=list)


@dataclass
class _Entry:
    group: Group
    join_waiters: dict[str, asyncio.Future[JoinResult]] = field(default_factory=dict)
    sync_waiters: dict[str, asyncio.Future[SyncResult]] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None
    commit_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The version of the group's claim this coordinator's writes check; None until the
    # group's first write here claims it (group_store.claim_group).
    fence: int | None = None
    # Wall-clock ms when the group was seen to lose its last member (None: not seen).
    empty_since_ms: int | None = None
    # The offsets last stored or read here, for the lag metrics only (see the top).
    committed_offsets: dict[TopicPartition, int] = field(default_factory=dict)


class GroupCoordinator:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._groups: dict[str, _Entry] = {}
        self._running = False
        # The metadata cache's broker map when ownership was last checked: a new map
        # means an UpdateMetadata arrived and groups may have moved.
        self._seen_brokers: object = None
        self._expiry: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Begin serving the groups this broker coordinates."""
        self._running = True
        self._expiry = asyncio.create_task(self._expire_forever(), name="offsets-expiry")

    async def stop(self) -> None:
        """Stop every group's timers; members find the next coordinator."""
        self._running = False
        if self._expiry is not None:
            self._expiry.cancel()
            await asyncio.gather(self._expiry, return_exceptions=True)
        for group_id in list(self._groups):
            self._drop(group_id)

    # -- where groups live ---------------------------------------------------------

    @property
    def _limits(self) -> GroupLimits:
        config = self.ctx.config
        return GroupLimits(
            max_size=config.group_max_size,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        )

    def _live_brokers(self) -> dict[int, BrokerInfo]:
        """Brokers a Kafka client can reach, by the controller's metadata: live, with a
        Kafka listener."""
        return {b.broker_id: b for b in self.ctx.metadata.brokers.values() if b.kafka_port >= 0}

    def _own_id(self) -> int | None:
        own = self.ctx.registration
        return None if own is None else own.broker_id

    def _ready(self) -> bool:
        return self._running and serves_groups(self._own_id(), self._live_brokers())

    def coordinator(self, group_id: str) -> BrokerInfo:
        """The broker coordinating the group; CoordinatorNotAvailable if none can, or if
        this broker's metadata does not yet name it (its view of the live set is stale)."""
        if not self._ready():
            raise CoordinatorNotAvailableError(
                "this broker has not yet the controller's metadata naming it live"
            )
        brokers = self._live_brokers()
        chosen = coordinator_for(group_id, brokers)
        if chosen is None:
            raise CoordinatorNotAvailableError(f"no broker can coordinate group {group_id!r} now")
        return brokers[chosen]

    def _is_mine(self, group_id: str) -> bool:
        return self._ready() and coordinator_for(group_id, self._live_brokers()) == self._own_id()

    def _zk(self) -> KazooClient:
        if self.ctx.zk is None:
            raise CoordinatorNotAvailableError("the coordinator has no ZooKeeper session yet")
        return self.ctx.zk

    def _check(self, group_id: str) -> None:
        """Raise unless this broker may serve the group now."""
        group_store.check_group_id(group_id)
        self._require_ready()
        if not self._is_mine(group_id):
            raise NotCoordinatorError(
                f"broker {self._own_id()} does not coordinate group {group_id!r}"
            )

    def _require_ready(self) -> None:
        """Raise unless this broker serves groups now: COORDINATOR_LOAD_IN_PROGRESS while
        it has no metadata yet (starting), NOT_COORDINATOR when the controller's metadata
        leaves it out (it counts this broker dead: others coordinate its groups now)."""
        if not self._running or self.ctx.registration is None:
            raise CoordinatorNotAvailableError("the group coordinator is not running")
        self._forget_moved_groups()
        error = not_serving_error(self._own_id(), self._live_brokers())
        if error is not None:
            raise error("the controller's metadata does not (yet) name this broker live")

    def _forget_moved_groups(self) -> None:
        brokers = self.ctx.metadata.brokers
        if brokers is self._seen_brokers:
            return
        self._seen_brokers = brokers
        for group_id in [g for g in self._groups if not self._is_mine(g)]:
            self._drop(group_id)

    def _drop(self, group_id: str) -> None:
        entry = self._groups.pop(group_id)
        if entry.timer is not None:
            entry.timer.cancel()
        self._deliver(entry, entry.group.abandon())
        for waiters in (entry.join_waiters, entry.sync_waiters):
            for future in waiters.values():
                if not future.done():
                    future.set_exception(NotCoordinatorError("the coordinator moved"))
            waiters.clear()

    def _entry(self, group_id: str, *, create: bool) -> _Entry | None:
        entry = self._groups.get(group_id)
        if entry is None and create:
            entry = self._groups[group_id] = _Entry(Group(group_id, self._limits))
        return entry

    # -- time and delivery -------------------------------------------------------------

    @staticmethod
    def _now_ms() -> float:
        return time.monotonic() * 1000.0

    def _after(self, group_id: str, entry: _Entry, replies: Replies) -> None:
        """Deliver what a call completed for other members, note when the group lost its
        last member, and re-arm the group's timer."""
        self._deliver(entry, replies)
        if entry.group.members:
            entry.empty_since_ms = None
        elif entry.empty_since_ms is None and entry.group.generation > 0:
            entry.empty_since_ms = _wall_ms()
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        deadline = entry.group.next_deadline_ms()
        if deadline is not None:
            delay = max(0.0, deadline - self._now_ms()) / 1000.0
            loop = asyncio.get_running_loop()
            entry.timer = loop.call_later(delay, self._tick, group_id)

    def _tick(self, group_id: str) -> None:
        entry = self._groups.get(group_id)
        if entry is None:
            return
        entry.timer = None
        self._after(group_id, entry, entry.group.tick(self._now_ms()))

    @staticmethod
    def _deliver(entry: _Entry, replies: Replies) -> None:
        for member_id, join in replies.joins.items():
            _resolve(entry.join_waiters.pop(member_id, None), join)
        for member_id, sync in replies.syncs.items():
            _resolve(entry.sync_waiters.pop(member_id, None), sync)

    async def _wait(
        self, waiters: dict[str, asyncio.Future[T]], member_id: str, answer: T | None, stale: T
    ) -> T:
        """The caller's answer: at once, or once another call completes it. An earlier
        request of the same member still waiting gets `stale`: the client gave it up."""
        _resolve(waiters.pop(member_id, None), stale)
        if answer is not None:
            return answer
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        waiters[member_id] = future
        return await future

    # -- membership ----------------------------------------------------------------

    async def join(self, group_id: str, request: JoinRequest) -> JoinResult:
        self._check(group_id)
        config = self.ctx.config
        if not (
            config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= config.group_max_session_timeout_ms
        ):
            raise InvalidSessionTimeoutError(
                f"session timeout {request.session_timeout_ms} ms is outside "
                f"{config.group_min_session_timeout_ms}..{config.group_max_session_timeout_ms} ms "
                "(group.min/max.session.timeout.ms)"
            )
        entry = self._entry(group_id, create=True)
        assert entry is not None
        replies = entry.group.join(request, self._now_ms())
        self._after(group_id, entry, replies)
        stale = JoinResult(replies.member_id, RebalanceInProgressError)
        return await self._wait(entry.join_waiters, replies.member_id, replies.own_join, stale)

    async def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        self._check(group_id)
        entry = self._member_entry(group_id)
        replies = entry.group.sync(
            member_id,
            generation,
            group_instance_id,
            assignments,
            self._now_ms(),
            protocol_type,
            protocol_name,
        )
        self._after(group_id, entry, replies)
        stale = SyncResult(RebalanceInProgressError)
        return await self._wait(entry.sync_waiters, member_id, replies.own_sync, stale)

    def _member_entry(self, group_id: str) -> _Entry:
        """The group's entry, for a request from a member: a group unknown here (never
        joined, or the coordinator moved) has no members to answer."""
        entry = self._entry(group_id, create=False)
        if entry is None:
            raise UnknownMemberIdError(f"group {group_id!r} has no members here; rejoin")
        return entry

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, group_instance_id: str | None
    ) -> ErrorType | None:
        self._check(group_id)
        entry = self._member_entry(group_id)
        error = entry.group.heartbeat(member_id, generation, group_instance_id, self._now_ms())
        self._after(group_id, entry, Replies())
        return error

    def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> list[ErrorType | None]:
        self._check(group_id)
        entry = self._member_entry(group_id)
        errors, replies = entry.group.leave(members, self._now_ms())
        self._after(group_id, entry, replies)
        return errors

    # -- offsets -------------------------------------------------------------------

    async def commit(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        group_instance_id: str | None,
        commits: Mapping[TopicPartition, CommittedOffset],
    ) -> dict[TopicPartition, BrokerResponseError]:
        """Store the commits in ZooKeeper before answering; raises the group's error.
        Returns the partitions refused because their topic was deleted meanwhile."""
        self._check(group_id)
        entry = self._entry(group_id, create=generation < 0 and member_id == "")
        if entry is None:
            raise UnknownMemberIdError(f"group {group_id!r} has no members here; rejoin")
        error = entry.group.check_commit(member_id, generation, group_instance_id, self._now_ms())
        self._after(group_id, entry, Replies())
        if error is not None:
            raise error(f"group {group_id!r} refused the commit of member {member_id!r}")
        if not commits:
            return {}
        async with entry.commit_lock:
            fence = await self._claim(group_id, entry)
            try:
                refused = await _off_loop(
                    group_store.write_offsets, self._zk(), group_id, commits, fence
                )
            except NotCoordinatorError:
                self._lose(group_id, entry)
                raise
        for tp, committed in commits.items():
            if tp not in refused:
                entry.committed_offsets[tp] = committed.offset
        return refused

    async def _claim(self, group_id: str, entry: _Entry) -> int:
        """The group's fence for this coordinator's writes, claiming the group first if
        this entry has not; called under the entry's commit lock."""
        if entry.fence is None:
            own = self._own_id()
            assert own is not None
            entry.fence = await _off_loop(group_store.claim_group, self._zk(), group_id, own)
        return entry.fence

    def _lose(self, group_id: str, entry: _Entry) -> None:
        """Another coordinator claimed the group: forget it here, so its members find the
        coordinator again (and a group that comes back here is claimed anew)."""
        if self._groups.get(group_id) is entry:
            logger.info("group %r was loaded by another coordinator; dropping it here", group_id)
            self._drop(group_id)

    def committed_offsets(self) -> dict[str, Mapping[TopicPartition, int]]:
        """The offsets each group coordinated here last stored or read, for its lag
        metrics; groups that moved away and are not yet dropped are left out."""
        return {
            group_id: entry.committed_offsets
            for group_id, entry in self._groups.items()
            if entry.committed_offsets and self._is_mine(group_id)
        }

    def committed_partitions(self) -> set[TopicPartition]:
        """The partitions any group coordinated here has an offset on (for lag)."""
        return {tp for offsets in self.committed_offsets().values() for tp in offsets}

    def member_counts(self) -> dict[str, int]:
        """Members of each group coordinated here that has any."""
        return {
            group_id: len(entry.group.members)
            for group_id, entry in self._groups.items()
            if entry.group.members and self._is_mine(group_id)
        }

    async def committed(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        self._check(group_id)
        return await _off_loop(group_store.read_offsets, self._zk(), group_id)

    # -- administration -------------------------------------------------------------

    async def describe(self, group_id: str) -> GroupSummary:
        self._check(group_id)
        entry = self._entry(group_id, create=False)
        if entry is None or entry.group.state is GroupState.DEAD:
            has_offsets = await _off_loop(group_store.group_exists, self._zk(), group_id)
            state = GroupState.EMPTY if has_offsets else GroupState.DEAD
            return GroupSummary(group_id, state.value, "", "")
        group = entry.group
        stable = group.state is GroupState.STABLE
        protocol = group.protocol_name or ""
        members = [
            MemberSummary(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata_for(protocol) if stable else b"",
                assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupSummary(
            group_id,
            group.state.value,
            group.protocol_type or "",
            protocol if stable else "",
            members,
        )

    async def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of the groups coordinated here: those with
        members or a state in memory, and those with offsets in ZooKeeper. A broker the
        controller's metadata leaves out coordinates none."""
        try:
            self._require_ready()
        except NotCoordinatorError:
            return []
        listed = {
            group_id: (group_id, entry.group.protocol_type or "", entry.group.state.value)
            for group_id, entry in self._groups.items()
            if entry.group.state is not GroupState.DEAD
        }
        for group_id in await _off_loop(group_store.list_groups, self._zk()):
            if group_id not in listed and group_id and self._is_mine(group_id):
                listed[group_id] = (group_id, "", GroupState.EMPTY.value)
        return sorted(listed.values())

    async def delete(self, group_id: str) -> None:
        """Delete the group's offsets; NON_EMPTY_GROUP while it has members."""
        self._check(group_id)
        entry = self._entry(group_id, create=False)
        if entry is None:
            removed = await _off_loop(group_store.delete_group, self._zk(), group_id)
            if not removed:
                raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
            return
        if not entry.group.is_empty():
            raise NonEmptyGroupError(
                f"group {group_id!r} has {len(entry.group.members)} members; stop them first"
            )
        async with entry.commit_lock:
            await _off_loop(group_store.delete_group, self._zk(), group_id)
        entry.group.delete()
        self._drop(group_id)

    # -- expiry -------------------------------------------------------------------

    async def _expire_forever(self) -> None:
        config = self.ctx.config
        while True:
            await asyncio.sleep(config.offsets_retention_check_interval_ms / 1000.0)
            if not self._ready() or self.ctx.zk is None:
                continue
            try:
                await self.expire_offsets(_wall_ms())
            except ZooKeeperError as exc:
                logger.warning("expiring committed offsets failed; next check retries: %s", exc)

    async def expire_offsets(self, now_ms: int) -> int:
        """Delete the expired offsets of the groups coordinated here (Kafka's rules,
        offset_expiry), and any left of a deleted topic; the number deleted."""
        self._forget_moved_groups()
        deleted = 0
        for group_id in await _off_loop(group_store.list_groups, self._zk()):
            if not (group_id and self._is_mine(group_id)):
                continue
            try:
                deleted += await self._expire_group(group_id, now_ms)
            except (ZooKeeperError, BrokerResponseError) as exc:
                logger.warning("expiring offsets of group %r failed: %s", group_id, exc)
        return deleted

    async def _expire_group(self, group_id: str, now_ms: int) -> int:
        entry = self._entry(group_id, create=True)
        assert entry is not None
        async with entry.commit_lock:
            offsets = await _off_loop(group_store.read_offsets, self._zk(), group_id)
            group = entry.group
            subscribed = None
            if group.state is GroupState.STABLE and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                protocol = group.protocol_name or ""
                subscribed = subscribed_topics(
                    m.metadata_for(protocol) for m in group.members.values()
                )
            entry.committed_offsets = {tp: c.offset for tp, c in offsets.items()}
            expired = expired_offsets(
                offsets,
                now_ms,
                self.ctx.config.offsets_retention_ms,
                has_members=bool(group.members),
                empty_since_ms=entry.empty_since_ms,
                subscribed_topics=subscribed,
            )
            # The controller removes a deleted topic's offsets; a controller that failed
            # half way through a deletion may leave some, which go here.
            unknown = sorted({tp.topic for tp in offsets} - set(self.ctx.metadata.topics()))
            if unknown:
                gone = await _off_loop(group_store.missing_topics, self._zk(), unknown)
                expired |= {tp for tp in offsets if tp.topic in gone}
            if not expired:
                return 0
            fence = await self._claim(group_id, entry)
            try:
                removed = await _off_loop(
                    group_store.expire_offsets,
                    self._zk(),
                    group_id,
                    offsets,
                    expired,
                    fence,
                    group.is_empty(),
                )
            except NotCoordinatorError:
                self._lose(group_id, entry)
                raise
            for tp in expired:
                entry.committed_offsets.pop(tp, None)
        logger.info("expired %d committed offsets of group %r", len(expired), group_id)
        if removed:
            self._drop(group_id)
        return len(expired)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _resolve(future: asyncio.Future[T] | None, value: T) -> None:
    if future is not None and not future.done():
        future.set_result(value)


async def _off_loop(function: Callable[..., T], *args: object) -> T:
    return await asyncio.to_thread(function, *args)
