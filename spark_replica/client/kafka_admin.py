"""Groups, offsets and transactions through the Kafka listeners of a replog cluster, for
`replog groups` and `replog transactions`.

An operator's tool, not a data path: one KafkaConnection (kafka_connection.py) per
broker, one request at a time on it. Group requests go to the group's coordinator (and
DescribeTransactions to the transactional id's),
found with FindCoordinator and found again after NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS or a lost connection, waiting
as the client's retry policy says (retry.py), until a deadline; ListOffsets and
DescribeProducers go to each partition's leader through the client's one leader-call
layer (leader_call.py), which routes, refreshes and retries as it does for replog's
listeners. Broker errors surface as the typed errors of spark_replica.errors.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from spark_replica.errors import (
    ConfigError,
    ConnectionLostError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    LeaderNotAvailableError,
    NotCoordinatorError,
    ReplogError,
    TimeoutExpiredError,
    UnknownTopicOrPartitionError,
    error_for_code,
    raise_for_code,
)
from spark_replica.security.settings import SecurityConfig
from spark_replica.topics import TopicPartition
from spark_replica.wire.schema import Data

from .kafka_connection import Address, KafkaConnection
from .leader_call import call_leaders
from .retry import DEFAULT_RETRY_POLICY, Attempts, RetryPolicy

T = TypeVar("T")

# api key -> the version this client sends (served by the listener; not flexible where
# a lower version says all the tool needs).
METADATA = (3, 8)
OFFSET_COMMIT = (8, 7)
OFFSET_FETCH = (9, 5)
LIST_OFFSETS = (2, 5)
FIND_COORDINATOR = (10, 2)
DESCRIBE_GROUPS = (15, 4)
LIST_GROUPS = (16, 2)
DELETE_GROUPS = (42, 1)
DESCRIBE_TRANSACTIONS = (65, 0)
DESCRIBE_PRODUCERS = (61, 0)
LIST_TRANSACTIONS = (66, 1)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# ListTransactions' duration filter that filters nothing.
NO_DURATION_FILTER = -1
DEFAULT_TIMEOUT_S = 30.0
# The answers of a coordinator that moved or is loading: find it again and retry.
_COORDINATOR_ERRORS = (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One transactional id as ListTransactions names it, with the broker that did."""

    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions' answer for one transactional id, and its coordinator."""

    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProducerDescription:
    """One active producer of a partition, as its leader's DescribeProducers names it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1: no batch known (only a marker)
    last_timestamp: int
    coordinator_epoch: int  # of its latest marker; -1: none
    current_txn_start_offset: int  # where its open transaction began; -1: none


class KafkaAdminClient:
    """Metadata, groups and offsets through the Kafka listeners of a replog cluster."""

    def __init__(
        self,
        bootstrap: list[Address],
        security: SecurityConfig | None = None,
        client_id: str = "replog-cli",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    ) -> None:
        self.bootstrap = bootstrap
        self.policy = policy
        self.security = security or SecurityConfig()
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._connections: dict[Address, KafkaConnection] = {}
        self.brokers: dict[int, Address] = {}

    async def __aenter__(self) -> KafkaAdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.close()

    async def _connection(self, address: Address) -> KafkaConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = KafkaConnection(address, self.security, self.client_id, self.timeout_s)
            await connection.connect()
            self._connections[address] = connection
        return connection

    async def _call_any(self, api: tuple[int, int], body: Any) -> Data:
        """Ask the bootstrap servers (then known brokers) in turn until one answers."""
        failures = []
        for address in [*self.bootstrap, *self.brokers.values()]:
            try:
                return await (await self._connection(address)).call(api, body)
            except ConnectionLostError as exc:
                self._connections.pop(address, None)
                failures.append(str(exc))
        raise ConnectionLostError("no Kafka listener answered: " + "; ".join(failures))

    async def _call(self, broker_id: int, api: tuple[int, int], body: Any) -> Data:
        if broker_id not in self.brokers:
            await self.metadata([])
        address = self.brokers.get(broker_id)
        if address is None:
            raise ConnectionLostError(f"broker {broker_id} is not in the cluster's metadata")
        try:
            return await (await self._connection(address)).call(api, body)
        except ConnectionLostError:
            self._connections.pop(address, None)
            raise

    async def metadata(self, topics: list[str] | None) -> dict[str, dict[int, int]]:
        """Leader per partition of `topics` (None: every topic); learns the brokers."""
        requested = None if topics is None else [Data(name=t) for t in topics]
        answer = await self._call_any(
            METADATA, Data(topics=requested, allow_auto_topic_creation=False)
        )
        self.brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
        leaders: dict[str, dict[int, int]] = {}
        for topic in answer.topics:
            raise_for_answer(topic.error_code, f"topic {topic.name!r}")
            leaders[topic.name] = {p.partition_index: p.leader_id for p in topic.partitions}
        return leaders

    async def find_coordinator(self, key: str, key_type: int = GROUP_KEY_TYPE) -> int:
        """The broker coordinating group `key` (or with TRANSACTION_KEY_TYPE, the
        transactional id `key`); learns its address."""
        answer = await self._call_any(FIND_COORDINATOR, Data(key=key, key_type=key_type))
        what = "group" if key_type == GROUP_KEY_TYPE else "transactional id"
        raise_for_code(answer.error_code, answer.error_message or f"{what} {key}")
        self.brokers[answer.node_id] = (answer.host, answer.port)
        return int(answer.node_id)

    async def _with_coordinator(
        self,
        key: str,
        request: Callable[[int], Awaitable[T]],
        key_type: int = GROUP_KEY_TYPE,
    ) -> T:
        """Run `request` against the coordinator of `key`, finding it again while it
        moves or loads, until the deadline."""
        loop = asyncio.get_running_loop()
        attempts = Attempts(self.policy, loop.time() + self.timeout_s)
        what = "group" if key_type == GROUP_KEY_TYPE else "transactional id"
        while True:
            try:
                return await request(await self.find_coordinator(key, key_type))
            except (ConnectionLostError, *_COORDINATOR_ERRORS) as exc:
                delay = attempts.next_delay(exc, loop.time())
                if delay is None:
                    raise TimeoutExpiredError(
                        f"no coordinator of {what} {key!r} answered within "
                        f"{self.timeout_s:.0f} s: {exc}"
                    ) from exc
                await asyncio.sleep(delay)

    async def list_groups(self) -> list[GroupListing]:
        """Every group known to any broker: each coordinator lists only its own."""
        await self.metadata([])
        found: dict[str, GroupListing] = {}
        for broker_id in sorted(self.brokers):
            answer = await self._call(broker_id, LIST_GROUPS, Data())
            raise_for_code(answer.error_code, f"listing groups on broker {broker_id}")
            for group in answer.groups:
                found[group.group_id] = GroupListing(group.group_id, group.protocol_type)
        return [found[g] for g in sorted(found)]

    async def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = NO_DURATION_FILTER,
    ) -> list[TransactionListing]:
        """Every transactional id of any broker (each coordinator lists only its own),
        filtered by state, producer id and how long its transaction has run, as
        ListTransactions filters (none, or a negative duration: all)."""
        await self.metadata([])
        body = Data(
            state_filters=list(states),
            producer_id_filters=list(producer_ids),
            duration_filter=min_duration_ms,
        )
        found: list[TransactionListing] = []
        for broker_id in sorted(self.brokers):
            answer = await self._call(broker_id, LIST_TRANSACTIONS, body)
            raise_for_answer(answer.error_code, f"listing transactions on broker {broker_id}")
            if answer.unknown_state_filters:
                raise ConfigError(
                    f"unknown transaction states: {', '.join(answer.unknown_state_filters)}"
                )
            for state in answer.transaction_states:
                found.append(
                    TransactionListing(
                        state.transactional_id,
                        broker_id,
                        state.producer_id,
                        state.transaction_state,
                    )
                )
        return sorted(found, key=lambda listing: listing.transactional_id)

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        async def describe(coordinator: int) -> TransactionDescription:
            body = Data(transactional_ids=[transactional_id])
            answer = await self._call(coordinator, DESCRIBE_TRANSACTIONS, body)
            (state,) = answer.transaction_states
            raise_for_answer(state.error_code, f"transactional id {transactional_id!r}")
            return TransactionDescription(
                state.transactional_id,
                coordinator,
                state.transaction_state,
                state.producer_id,
                state.producer_epoch,
                state.transaction_timeout_ms,
                state.transaction_start_time_ms,
                [
                    TopicPartition(topic.name, index)
                    for topic in state.topic_partitions
                    for index in topic.partition_indexes
                ],
            )

        return await self._with_coordinator(transactional_id, describe, TRANSACTION_KEY_TYPE)

    async def describe_producers(
        self, tp: TopicPartition, broker_id: int | None = None
    ) -> list[ProducerDescription]:
        """The active producers of `tp`, as its leader knows them (DescribeProducers),
        asked again of the new leader while leadership moves, until the deadline; or as
        broker `broker_id` knows them (any replica answers, as in Kafka), asked once."""
        view = KafkaLeaders(self, await self.metadata([tp.topic]))
        if tp.partition not in view.topics.get(tp.topic, {}):
            raise UnknownTopicOrPartitionError(
                f"{tp}: topic {tp.topic!r} has no partition {tp.partition}"
            )
        body = Data(topics=[Data(name=tp.topic, partition_indexes=[tp.partition])])

        async def ask(leader: int) -> list[ProducerDescription] | ReplogError:
            answer = await self._call(leader, DESCRIBE_PRODUCERS, body)
            (topic,) = answer.topics
            (partition,) = topic.partitions
            if partition.error_code:
                return error_for_code(partition.error_code, partition.error_message or str(tp))
            return [
                ProducerDescription(
                    p.producer_id,
                    p.producer_epoch,
                    p.last_sequence,
                    p.last_timestamp,
                    p.coordinator_epoch,
                    p.current_txn_start_offset,
                )
                for p in partition.active_producers
            ]

        if broker_id is not None:
            answered = await ask(broker_id)
            if isinstance(answered, ReplogError):
                raise answered
            return answered

        async def ask_group(
            leader: int, _: list[TopicPartition]
        ) -> dict[TopicPartition, list[ProducerDescription] | ReplogError]:
            return {tp: await ask(leader)}

        found = await call_leaders(
            view, [tp], ask_group, timeout_s=self.timeout_s, purpose="producers", policy=self.policy
        )
        return found[tp]

    async def describe_group(self, group: str) -> GroupDescription:
        async def describe(coordinator: int) -> GroupDescription:
            answer = await self._call(coordinator, DESCRIBE_GROUPS, Data(groups=[group]))
            (described,) = answer.groups
            raise_for_code(described.error_code, f"group {group!r}")
            members = [
                GroupMember(m.member_id, m.client_id, m.client_host, bytes(m.member_assignment))
                for m in described.members
            ]
            return GroupDescription(
                described.group_id,
                described.group_state,
                described.protocol_type,
                described.protocol_data,
                members,
            )

        return await self._with_coordinator(group, describe)

    async def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (partitions without one are left out)."""

        async def fetch(coordinator: int) -> dict[TopicPartition, int]:
            answer = await self._call(coordinator, OFFSET_FETCH, Data(group_id=group, topics=None))
            raise_for_code(answer.error_code, f"group {group!r}")
            offsets = {}
            for topic in answer.topics:
                for p in topic.partitions:
                    raise_for_code(p.error_code, f"{topic.name}-{p.partition_index}")
                    if p.committed_offset >= 0:
                        offsets[TopicPartition(topic.name, p.partition_index)] = p.committed_offset
            return offsets

        return await self._with_coordinator(group, fetch)

    async def commit_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """Commit as an admin does: generation -1, no member id (the group must be empty)."""
        topics = [
            Data(
                name=topic,
                partitions=[
                    Data(
                        partition_index=tp.partition, committed_offset=offset, committed_metadata=""
                    )
                    for tp, offset in sorted(items)
                ],
            )
            for topic, items in _by_topic(offsets.items()).items()
        ]
        body = Data(group_id=group, generation_id=-1, member_id="", topics=topics)

        async def commit(coordinator: int) -> None:
            answer = await self._call(coordinator, OFFSET_COMMIT, body)
            errors = [
                (f"{topic.name}-{p.partition_index}", p.error_code)
                for topic in answer.topics
                for p in topic.partitions
                if p.error_code
            ]
            for where, code in errors:
                raise error_for_code(code, f"committing {where} for group {group!r}")

        await self._with_coordinator(group, commit)

    async def delete_group(self, group: str) -> None:
        async def delete(coordinator: int) -> None:
            answer = await self._call(coordinator, DELETE_GROUPS, Data(groups_names=[group]))
            for result in answer.results:
                raise_for_code(result.error_code, f"group {group!r}")

        await self._with_coordinator(group, delete)

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """The offset per partition at `timestamp` (-2 earliest, -1 latest: the high
        watermark, as consumers see it), asked of each leader; -1 where no record is at or
        after the timestamp. Partitions whose leader is unknown are left out."""
        wanted = list(partitions)
        view = KafkaLeaders(self, await self.metadata(sorted({tp.topic for tp in wanted})))
        led = [tp for tp in wanted if view.topics.get(tp.topic, {}).get(tp.partition, -1) >= 0]

        async def ask(leader: int, owned: list[TopicPartition]) -> dict[TopicPartition, Any]:
            topics = [
                Data(
                    name=topic,
                    partitions=[
                        Data(partition_index=tp.partition, timestamp=timestamp) for tp, _ in items
                    ],
                )
                for topic, items in _by_topic((tp, None) for tp in owned).items()
            ]
            body = Data(replica_id=-1, isolation_level=0, topics=topics)
            answer = await self._call(leader, LIST_OFFSETS, body)
            return {
                TopicPartition(topic.name, p.partition_index): (
                    error_for_code(p.error_code, f"{topic.name}-{p.partition_index}")
                    if p.error_code
                    else p.offset
                )
                for topic in answer.topics
                for p in topic.partitions
            }

        return await call_leaders(
            view, led, ask, timeout_s=self.timeout_s, purpose="offsets", policy=self.policy
        )


class KafkaLeaders:
    """The partitions' leaders as the Kafka listeners' metadata names them, for
    leader_call (its `Leaders`); a connection is the leader's broker id, which the
    admin client calls."""

    def __init__(self, admin: KafkaAdminClient, topics: dict[str, dict[int, int]]) -> None:
        self.admin = admin
        self.topics = topics

    async def refresh(self, topics: list[str]) -> dict[str, dict[int, int]]:
        found = await self.admin.metadata(topics)
        self.topics.update(found)
        return found

    def leader_for(self, tp: TopicPartition) -> int:
        leader = self.topics.get(tp.topic, {}).get(tp.partition, -1)
        if leader < 0:
            raise LeaderNotAvailableError(f"{tp} has no leader")
        return leader

    async def connection(self, broker_id: int, purpose: str) -> int:
        return broker_id


def raise_for_answer(code: int, subject: str) -> None:
    """Raise the typed error of a non-zero code, naming its subject and what the code
    means, on one line: these answers carry no message of their own, and an operator
    reading `transactional id 'x'` alone would not know what went wrong."""
    if code:
        error = error_for_code(code)
        raise type(error)(f"{subject}: {' '.join(str(error).split())}")


def _by_topic(items: Iterable[tuple[TopicPartition, Any]]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = defaultdict(list)
    for tp, value in items:
        grouped[tp.topic].append((tp, value))
    return grouped
