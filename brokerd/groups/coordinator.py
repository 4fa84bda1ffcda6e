"""The group coordinator of one broker: membership state machines driven by the loop's
clock, and the groups' offsets and metadata kept in the `__consumer_offsets` topic.

Owned by the broker's event loop: every group's `Group` (brokerd/groups/membership.py),
its waiting JoinGroup/SyncGroup futures and its timer live here and are touched only on
the loop.

Where a group lives (Kafka's design): in the offsets partition its id hashes to
(spark_replica/topics.py), and its coordinator is that partition's leader. When this broker
becomes the leader of an offsets partition (LeaderAndIsr, or noticed at the next group
request), it loads the partition (partition_loads: its records replayed into what each
group stored, offsets an earlier version kept in ZooKeeper moved over), and restores each
group's membership (group_records), so that a
coordinator failover keeps generations and static members. Until the load is done its
groups are answered COORDINATOR_LOAD_IN_PROGRESS (retry here). When it stops leading the
partition, its groups are dropped and their waiting requests answered NOT_COORDINATOR,
so their members look the coordinator up again. A broker starting or stopping moves only
the groups of the partitions it led.

Every write is an acks=all append by the partition's leader (offsets_topic), answered
once committed: a commit acknowledged here survives the coordinator's failover, and a
deposed coordinator cannot write (its append fails NOT_COORDINATOR), which is the whole
fencing. OffsetFetch is answered from memory, which holds what the partition's log says.

A group's membership record is stored after each completed rebalance (Stable with a new
generation or assignment) and when it empties; between rebalances heartbeats change
nothing worth storing. The store runs beside the answers (it does not hold up SyncGroup):
a failover in the moment between a rebalance and its record costs the members one
rebalance, never an offset.

Offsets committed in a transaction (TxnOffsetCommit) are appended as the producer's
transactional records and wait, not visible to OffsetFetch, until the transaction's
marker on the partition (txn_offsets.py): the core tells the coordinator of each marker
it appends as leader (`on_marker`; one that lands while the partition loads is applied
once the load is ready), and a load replays them at their marker.

Offsets of empty groups expire (offset_expiry) in a task that looks at the groups loaded
here every offsets.retention.check.interval.ms, which also removes the offsets of topics
that no longer exist; expiring is appending tombstones, which compaction then removes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from brokerd.coordination.internal_topic import TxnProducer, append_to
from brokerd.coordination.partition_loads import Load, PartitionLoads
from brokerd.groups import offsets_topic
from brokerd.groups.group_records import group_value, restore_group
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
from brokerd.groups.stored_groups import Change, GroupChange, OffsetChange, StoredGroups
from brokerd.groups.zookeeper_migration import migrate_partition
from spark_replica.errors import (
    BrokerResponseError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    NonEmptyGroupError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from spark_replica.records import ControlType
from spark_replica.topics import OFFSETS_TOPIC, TopicPartition, offsets_partition_for
from spark_replica.wire.kafka.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from spark_replica.wire.kafka.offsets_records import (
    OffsetValue,
)
from spark_replica.wire.native.metadata import BrokerInfo

if TYPE_CHECKING:
    from brokerd.core.context import BrokerContext
    from brokerd.replication.partition import TxnMarker

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
    index: int  # the offsets partition the group lives in
    join_waiters: dict[str, asyncio.Future[JoinResult]] = field(default_factory=dict)
    sync_waiters: dict[str, asyncio.Future[SyncResult]] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None
    # Serialises the group's appends, so they reach the log in the order they were asked.
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Wall-clock ms when the group was seen to lose its last member (None: not seen).
    empty_since_ms: int | None = None
    # What the group's last membership record said (see _membership_mark).
    stored_mark: tuple[object, ...] | None = None


class GroupCoordinator:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._groups: dict[str, _Entry] = {}
        self._loads = PartitionLoads(
            ctx,
            offsets_topic.offsets_topic(ctx.config),
            StoredGroups,
            self._restore_groups,
            self._drop_groups_of,
            after_replay=partial(migrate_partition, ctx),
            open_at_end=StoredGroups.replay_open,
        )
        # Transactions ended (producer id, committed) on partitions still loading.
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}
        self._running = False
        self._expiry: asyncio.Task[None] | None = None
        self._creating: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[object]] = set()
        self._known_topics: frozenset[str] = frozenset()

    async def start(self) -> None:
        """Begin serving the groups of the offsets partitions this broker leads."""
        self._running = True
        self.ctx.role_listeners.append(self.follow_roles)
        self.ctx.marker_listeners.append(self.on_marker)
        self._expiry = asyncio.create_task(self._expire_forever(), name="offsets-expiry")

    async def stop(self) -> None:
        """Stop every group's timers and loads; members find the next coordinator."""
        self._running = False
        if self.follow_roles in self.ctx.role_listeners:
            self.ctx.role_listeners.remove(self.follow_roles)
        if self.on_marker in self.ctx.marker_listeners:
            self.ctx.marker_listeners.remove(self.on_marker)
        tasks: list[asyncio.Task[Any]] = [
            t for t in (self._expiry, self._creating) if t is not None
        ]
        tasks += list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._loads.stop()

    # -- where groups live ---------------------------------------------------------

    @property
    def _limits(self) -> GroupLimits:
        config = self.ctx.config
        return GroupLimits(
            max_size=config.group_max_size,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        )

    def _partition_count(self) -> int:
        """The offsets topic's partitions; asks for the topic to be created (and raises
        COORDINATOR_NOT_AVAILABLE, retriable) while the metadata has none."""
        if not self._running or self.ctx.registration is None:
            raise CoordinatorNotAvailableError("the group coordinator is not running yet")
        count = offsets_topic.partition_count(self.ctx)
        if count == 0:
            if self._creating is None or self._creating.done():
                self._creating = asyncio.create_task(
                    offsets_topic.ensure_topic(self.ctx), name="offsets-topic-create"
                )
            raise CoordinatorNotAvailableError(f"{OFFSETS_TOPIC} is being created; retry")
        return count

    def offsets_partition(self, group_id: str) -> int:
        """The offsets partition holding `group_id` (for tools that name it)."""
        return offsets_partition_for(group_id, self._partition_count())

    def coordinator(self, group_id: str) -> BrokerInfo:
        """The broker coordinating the group, by the controller's metadata: the leader of
        its offsets partition. COORDINATOR_NOT_AVAILABLE while there is none."""
        index = self.offsets_partition(group_id)
        state = self.ctx.metadata.partitions.get(offsets_topic.offsets_partition(index))
        broker = None if state is None else self.ctx.metadata.brokers.get(state.leader)
        if broker is None or broker.kafka_port < 0:
            raise CoordinatorNotAvailableError(
                f"{OFFSETS_TOPIC}-{index}, which holds group {group_id!r}, has no live leader"
            )
        return broker

    def _place(self, group_id: str) -> Load[StoredGroups]:
        """The loaded partition holding the group, if this broker may serve it now."""
        if not group_id:
            raise InvalidGroupIdError("the group id is empty")
        index = self.offsets_partition(group_id)
        load = self._loads.follow(index)
        if load is None:
            raise NotCoordinatorError(
                f"broker {self._own_id()} does not lead {OFFSETS_TOPIC}-{index}, "
                f"which holds group {group_id!r}"
            )
        if not load.ready:
            raise CoordinatorLoadInProgressError(
                f"{OFFSETS_TOPIC}-{index}, which holds group {group_id!r}, is loading"
            )
        return load

    def _own_id(self) -> int | None:
        own = self.ctx.registration
        return None if own is None else own.broker_id

    def follow_roles(self) -> None:
        """Load the offsets partitions this broker newly leads and drop those it no longer
        does, and remove deleted topics' offsets: called after each controller request."""
        if not self._running:
            return
        self._loads.follow_all()
        topics = frozenset(self.ctx.metadata.topics())
        deleted = self._known_topics - topics
        if deleted:
            # Their offsets go now, not at the next expiry check, and even if the topic
            # is created again meanwhile: a new topic starts with no committed offsets.
            self._background(self.expire_offsets(_wall_ms(), deleted), "deleted-topics-offsets")
        self._known_topics = topics

    def _restore_groups(self, load: Load[StoredGroups]) -> None:
        """A partition is loaded: its groups' membership as their records left it, and
        the transactions that ended on it while it loaded."""
        for producer_id, committed in self._markers_while_loading.pop(load.index, []):
            load.stored.complete_transaction(producer_id, committed)
        now = self._now_ms()
        for group_id, group in load.stored.groups.items():
            if group.metadata is not None and group_id not in self._groups:
                restored = restore_group(group_id, group.metadata, self._limits, now)
                entry = self._groups[group_id] = _Entry(restored, load.index)
                entry.stored_mark = _membership_mark(restored)
                self._after(group_id, entry, Replies())

    def _drop_groups_of(self, index: int) -> None:
        self._markers_while_loading.pop(index, None)
        for group_id in [g for g, e in self._groups.items() if e.index == index]:
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

    def _entry(self, group_id: str, load: Load[StoredGroups], *, create: bool) -> _Entry | None:
        entry = self._groups.get(group_id)
        if entry is None and create:
            entry = self._groups[group_id] = _Entry(Group(group_id, self._limits), load.index)
        return entry

    # -- time and delivery -------------------------------------------------------------

    @staticmethod
    def _now_ms() -> float:
        return time.monotonic() * 1000.0

    def _after(self, group_id: str, entry: _Entry, replies: Replies) -> None:
        """Deliver what a call completed for other members, note when the group lost its
        last member, store its membership if a rebalance completed, re-arm its timer."""
        self._deliver(entry, replies)
        if entry.group.members:
            entry.empty_since_ms = None
        elif entry.empty_since_ms is None and entry.group.generation > 0:
            entry.empty_since_ms = _wall_ms()
        self._maybe_store_membership(group_id, entry)
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
        load = self._place(group_id)
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
        entry = self._entry(group_id, load, create=True)
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
        try:
            entry = self._member_entry(group_id)
        except CoordinatorLoadInProgressError:
            # As Kafka answers: the rebalance this sync belongs to was lost with the old
            # coordinator; REBALANCE_IN_PROGRESS sends the member to JoinGroup here.
            return SyncResult(RebalanceInProgressError)
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
        load = self._place(group_id)
        entry = self._entry(group_id, load, create=False)
        if entry is None:
            raise UnknownMemberIdError(f"group {group_id!r} has no members here; rejoin")
        return entry

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, group_instance_id: str | None
    ) -> ErrorType | None:
        try:
            entry = self._member_entry(group_id)
        except CoordinatorLoadInProgressError:
            # As Kafka answers: no error while the group is loading. Clients do not all
            # retry COORDINATOR_LOAD_IN_PROGRESS on a heartbeat (aiokafka's heartbeat task
            # dies of it); the session restarts when the load restores the group.
            return None
        error = entry.group.heartbeat(member_id, generation, group_instance_id, self._now_ms())
        self._after(group_id, entry, Replies())
        return error

    def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> list[ErrorType | None]:
        entry = self._member_entry(group_id)
        errors, replies = entry.group.leave(members, self._now_ms())
        self._after(group_id, entry, replies)
        return errors

    def _maybe_store_membership(self, group_id: str, entry: _Entry) -> None:
        """Store the group's membership if a rebalance completed since the last record."""
        group = entry.group
        if group.state not in (GroupState.STABLE, GroupState.EMPTY) or group.generation == 0:
            return
        mark = _membership_mark(group)
        if mark == entry.stored_mark:
            return
        load = self._loads.get(entry.index)
        if load is None or not load.ready:
            return
        entry.stored_mark = mark
        value = group_value(group, _wall_ms())
        change = GroupChange(group_id, value)
        self._background(self._store(load, entry, [change]), f"group-store-{group_id}")

    def _background(self, work: Coroutine[object, object, object], name: str) -> None:
        """Run `work` beside the requests; stop() cancels it, a failure is logged."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)

    async def _store(
        self, load: Load[StoredGroups], entry: _Entry, changes: Sequence[Change]
    ) -> None:
        """Append the group's changes under its write lock, in the order asked (with
        other groups' changes of the same turn: coalesced_appends), and apply them to
        what is loaded once committed."""
        async with entry.write_lock:
            try:
                await load.appends.append([c.record() for c in changes])
            except NotCoordinatorError:
                self._loads.lost(load)
                raise
            for change in changes:
                load.stored.change(change)

    # -- offsets -------------------------------------------------------------------

    async def commit(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        group_instance_id: str | None,
        commits: Mapping[TopicPartition, OffsetValue],
    ) -> None:
        """Store the commits (acks=all) before answering; raises the group's error."""
        load = self._place(group_id)
        entry = self._committing(load, group_id, member_id, generation, group_instance_id)
        if commits:
            changes = [OffsetChange(group_id, tp, value) for tp, value in commits.items()]
            await self._store(load, entry, changes)

    async def commit_in_transaction(
        self,
        group_id: str,
        producer: TxnProducer,
        member_id: str,
        generation: int,
        group_instance_id: str | None,
        commits: Mapping[TopicPartition, OffsetValue],
    ) -> None:
        """TxnOffsetCommit: store the commits as `producer`'s transactional records
        (acks=all), pending until the transaction's marker; raises the group's error,
        INVALID_PRODUCER_EPOCH for a producer epoch older than the partition's."""
        load = self._place(group_id)
        entry = self._committing(load, group_id, member_id, generation, group_instance_id)
        if not commits:
            return
        records = [OffsetChange(group_id, tp, value).record() for tp, value in commits.items()]
        async with entry.write_lock:
            try:
                await append_to(self.ctx, self._loads.topic, load.index, records, producer)
            except NotCoordinatorError:
                self._loads.lost(load)
                raise
            load.stored.pending.add(producer.producer_id, group_id, commits)

    def _committing(
        self,
        load: Load[StoredGroups],
        group_id: str,
        member_id: str,
        generation: int,
        group_instance_id: str | None,
    ) -> _Entry:
        """The group a commit is for, once its member and generation are checked (a
        commit without either, generation -1, is a simple consumer's)."""
        entry = self._entry(group_id, load, create=generation < 0 and member_id == "")
        if entry is None:
            raise UnknownMemberIdError(f"group {group_id!r} has no members here; rejoin")
        error = entry.group.check_commit(member_id, generation, group_instance_id, self._now_ms())
        self._after(group_id, entry, Replies())
        if error is not None:
            raise error(f"group {group_id!r} refused the commit of member {member_id!r}")
        return entry

    def on_marker(self, tp: TopicPartition, marker: TxnMarker, offset: int) -> None:
        """A transaction marker this broker appended as leader is committed: on an
        offsets partition, the producer's pending offsets there apply or go."""
        if tp.topic != OFFSETS_TOPIC:
            return
        load = self._loads.get(tp.partition)
        if load is None:
            return
        committed = marker.control_type is ControlType.COMMIT
        if load.ready:
            load.stored.complete_transaction(marker.producer_id, committed)
        else:
            ended = self._markers_while_loading.setdefault(tp.partition, [])
            ended.append((marker.producer_id, committed))

    def has_unstable_offset(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset of the group's partition (what
        OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for)."""
        return self._place(group_id).stored.pending.is_pending(group_id, tp)

    def committed_offsets(self) -> dict[str, Mapping[TopicPartition, int]]:
        """Each loaded group's committed offsets, for its lag metrics."""
        found: dict[str, Mapping[TopicPartition, int]] = {}
        for load in self._loads.ready():
            for group_id, group in load.stored.groups.items():
                if group.offsets:
                    found[group_id] = {tp: v.offset for tp, v in group.offsets.items()}
        return found

    def committed_partitions(self) -> set[TopicPartition]:
        """The partitions any group coordinated here has an offset on (for lag)."""
        return {tp for offsets in self.committed_offsets().values() for tp in offsets}

    def member_counts(self) -> dict[str, int]:
        """Members of each group coordinated here that has any."""
        return {
            group_id: len(entry.group.members)
            for group_id, entry in self._groups.items()
            if entry.group.members
        }

    async def committed(self, group_id: str) -> dict[TopicPartition, OffsetValue]:
        return self._place(group_id).stored.offsets_of(group_id)

    # -- administration -------------------------------------------------------------

    async def describe(self, group_id: str) -> GroupSummary:
        load = self._place(group_id)
        entry = self._entry(group_id, load, create=False)
        if entry is None or entry.group.state is GroupState.DEAD:
            state = GroupState.EMPTY if group_id in load.stored.groups else GroupState.DEAD
            metadata = load.stored.metadata_of(group_id)
            protocol_type = "" if metadata is None else metadata.protocol_type
            return GroupSummary(group_id, state.value, protocol_type, "")
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
        """(group id, protocol type, state) of the groups of the offsets partitions
        loaded here: those with members or a state in memory, and those with stored
        offsets or metadata."""
        self.follow_roles()
        listed = {
            group_id: (group_id, entry.group.protocol_type or "", entry.group.state.value)
            for group_id, entry in self._groups.items()
            if entry.group.state is not GroupState.DEAD
        }
        for load in self._loads.ready():
            for group_id, stored in load.stored.groups.items():
                if group_id not in listed:
                    protocol_type = "" if stored.metadata is None else stored.metadata.protocol_type
                    listed[group_id] = (group_id, protocol_type, GroupState.EMPTY.value)
        return sorted(listed.values())

    async def delete(self, group_id: str) -> None:
        """Delete the group's offsets and record; NON_EMPTY_GROUP while it has members."""
        load = self._place(group_id)
        entry = self._entry(group_id, load, create=False)
        if entry is None and group_id not in load.stored.groups:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        if entry is not None and not entry.group.is_empty():
            raise NonEmptyGroupError(
                f"group {group_id!r} has {len(entry.group.members)} members; stop them first"
            )
        if entry is None:
            entry = self._entry(group_id, load, create=True)
            assert entry is not None
        changes: list[Change] = [
            OffsetChange(group_id, tp, None) for tp in load.stored.offsets_of(group_id)
        ]
        changes.append(GroupChange(group_id, None))
        await self._store(load, entry, changes)
        entry.group.delete()
        if self._groups.get(group_id) is entry:
            self._drop(group_id)

    # -- expiry -------------------------------------------------------------------

    async def _expire_forever(self) -> None:
        config = self.ctx.config
        while True:
            await asyncio.sleep(config.offsets_retention_check_interval_ms / 1000.0)
            try:
                await self.expire_offsets(_wall_ms())
            except BrokerResponseError as exc:
                logger.warning("expiring committed offsets failed; next check retries: %s", exc)

    async def expire_offsets(self, now_ms: int, deleted: frozenset[str] = frozenset()) -> int:
        """Delete the expired offsets of the groups loaded here (Kafka's rules,
        offset_expiry), and those of topics that no longer exist or are `deleted`; the
        number deleted."""
        self.follow_roles()
        removed = 0
        for load in self._loads.ready():
            for group_id in list(load.stored.groups):
                try:
                    removed += await self._expire_group(load, group_id, now_ms, deleted)
                except BrokerResponseError as exc:
                    logger.warning("expiring offsets of group %r failed: %s", group_id, exc)
                if self._loads.get(load.index) is not load:
                    break
        return removed

    async def _expire_group(
        self, load: Load[StoredGroups], group_id: str, now_ms: int, deleted: frozenset[str]
    ) -> int:
        entry = self._entry(group_id, load, create=True)
        assert entry is not None
        group = entry.group
        offsets = load.stored.offsets_of(group_id)
        subscribed = None
        if group.state is GroupState.STABLE and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            protocol = group.protocol_name or ""
            subscribed = subscribed_topics(m.metadata_for(protocol) for m in group.members.values())
        expired = expired_offsets(
            offsets,
            now_ms,
            self.ctx.config.offsets_retention_ms,
            has_members=bool(group.members),
            empty_since_ms=entry.empty_since_ms,
            subscribed_topics=subscribed,
        )
        existing = set(self.ctx.metadata.topics())
        expired |= {tp for tp in offsets if tp.topic not in existing or tp.topic in deleted}
        changes: list[Change] = [OffsetChange(group_id, tp, None) for tp in sorted(expired)]
        gone = group.is_empty() and expired == set(offsets)
        if gone and load.stored.metadata_of(group_id) is not None:
            changes.append(GroupChange(group_id, None))
        if changes:
            await self._store(load, entry, changes)
        if expired:
            logger.info("expired %d committed offsets of group %r", len(expired), group_id)
        gone_here = group_id not in load.stored.groups and self._groups.get(group_id) is entry
        if group.is_empty() and gone_here:
            self._drop(group_id)
        return len(expired)


def _membership_mark(group: Group) -> tuple[object, ...]:
    """What a group's membership record says that a rebalance can change."""
    return (
        group.generation,
        group.state,
        group.leader,
        tuple((m.member_id, m.group_instance_id, m.assignment) for m in group.members.values()),
    )


def _log_failure(task: asyncio.Task[object]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        logger.warning("%s failed: %s", task.get_name(), error)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _resolve(future: asyncio.Future[T] | None, value: T) -> None:
    if future is not None and not future.done():
        future.set_result(value)
