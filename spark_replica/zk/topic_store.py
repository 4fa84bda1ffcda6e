"""Topics in ZooKeeper: create, delete, list and read them, in all-or-nothing writes.

Creating a topic writes its assignment and config in one kazoo transaction, so a failure
leaves no half-written topic behind. The controller notices the new topic and writes
each partition's first leaderAndISR state.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Mapping
from typing import NamedTuple

from kazoo.client import KazooClient

from spark_replica import reassignment
from spark_replica.errors import (
    ConfigError,
    ElectionInProgressError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    ReassignmentInProgressError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    ZnodeExistsError,
    ZnodeMissingError,
    ZnodeVersionError,
    ZooKeeperError,
)
from spark_replica.reassignment import PartitionMove, assign_replicas
from spark_replica.topic_config import TOPIC_CONFIG_PARSERS, parse_topic_configs
from spark_replica.topics import TopicPartition, is_internal, validate_topic_name
from spark_replica.zk import znodes
from spark_replica.zk.kazoo_errors import (
    children_if_present,
    failures,
    read_if_present,
    translated,
)

MAX_PARTITIONS = 100_000
# Read-modify-write attempts of alter_topic_config before giving up on a busy config.
ALTER_ATTEMPTS = 20
# Read-modify-write attempts of add_partitions before giving up on a busy assignment.
ADD_PARTITIONS_ATTEMPTS = 5


def live_broker_ids(zk: KazooClient) -> list[int]:
    children = children_if_present(zk, znodes.BROKER_IDS_PATH)
    return sorted(int(c) for c in children if c.isdigit())


def read_brokers(zk: KazooClient) -> list[znodes.BrokerRegistration]:
    brokers = []
    for broker_id in live_broker_ids(zk):
        found = read_if_present(zk, znodes.broker_path(broker_id))
        if found is not None:
            brokers.append(znodes.BrokerRegistration.decode(broker_id, found[0]))
    return brokers


def create_topic(
    zk: KazooClient,
    topic: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str] | None = None,
) -> znodes.TopicAssignment:
    """Validate, assign and write a new topic; raises a typed error if it cannot be made."""
    validate_topic_name(topic)
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise InvalidPartitionsError(
            f"partitions must be between 1 and {MAX_PARTITIONS}, not {partitions}"
        )
    if replication_factor < 1:
        raise InvalidReplicationFactorError(
            f"replication factor must be at least 1, not {replication_factor}"
        )
    configs = dict(configs or {})
    parse_topic_configs(configs)
    with translated():
        exists = zk.exists(znodes.topic_path(topic))
    if exists:
        raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
    brokers = live_broker_ids(zk)
    if not brokers:
        raise InvalidReplicationFactorError("no broker is registered in ZooKeeper")
    assignment = znodes.TopicAssignment(
        topic,
        assign_replicas(brokers, partitions, replication_factor, start=zlib.crc32(topic.encode())),
    )
    with translated():
        zk.ensure_path(znodes.TOPICS_PATH)
        zk.ensure_path(znodes.TOPIC_CONFIG_PATH)
        transaction = zk.transaction()
        transaction.create(
            znodes.topic_config_path(topic), znodes.TopicConfig(topic, configs).encode()
        )
        transaction.create(znodes.topic_path(topic), assignment.encode())
        errors = [e for e in failures(transaction.commit()) if e is not None]
    if any(isinstance(e, ZnodeExistsError) for e in errors):
        raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
    if errors:
        raise ZooKeeperError(f"creating topic {topic!r} failed: {errors[0]}")
    return assignment


def delete_topic(zk: KazooClient, topic: str) -> None:
    """Ask the controller to delete a topic (`/admin/delete_topics/T`); asking twice is fine.

    The controller stops every replica, has them delete their logs, then removes the
    topic's znodes and the request.
    """
    validate_topic_name(topic)
    if is_internal(topic):
        raise InvalidTopicError(f"{topic} is the brokers' own topic; it cannot be deleted")
    with translated():
        exists = zk.exists(znodes.topic_path(topic))
    if not exists:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    with contextlib.suppress(ZnodeExistsError), translated():
        zk.ensure_path(znodes.DELETE_TOPICS_PATH)
        zk.create(znodes.delete_topic_path(topic), b"")


def request_preferred_election(zk: KazooClient, partitions: list[tuple[str, int]]) -> None:
    """Ask the controller to move `partitions` back to their preferred replicas."""
    election = znodes.PreferredReplicaElection(partitions)
    try:
        with translated():
            zk.ensure_path("/admin")
            zk.create(znodes.PREFERRED_REPLICA_ELECTION_PATH, election.encode())
    except ZnodeExistsError:
        raise ElectionInProgressError(
            "a preferred replica election is already in progress; try again when it is done"
        ) from None


def topics_to_delete(zk: KazooClient) -> list[str]:
    return sorted(children_if_present(zk, znodes.DELETE_TOPICS_PATH))


def remove_topic_znodes(zk: KazooClient, topic: str) -> None:
    """The last step of a deletion: the topic, its config, then the deletion request."""
    for path in (znodes.topic_path(topic), znodes.topic_config_path(topic)):
        with contextlib.suppress(ZnodeMissingError), translated():
            zk.delete(path, recursive=True)
    with contextlib.suppress(ZnodeMissingError), translated():
        zk.delete(znodes.delete_topic_path(topic))


def add_partitions(zk: KazooClient, topic: str, count: int) -> znodes.TopicAssignment:
    """Grow a topic to `count` partitions; the new ones get replicas like a new topic's.

    Only growth is allowed (shrinking would drop data and break key partitioning). The
    assignment is rewritten conditionally on its zkVersion, so a concurrent change is
    never overwritten: it is read again and the growth decided again (a topic grown past
    `count` meanwhile is then an invalid request, one deleted meanwhile an unknown
    topic). The controller notices the new partitions and elects their leaders.
    """
    validate_topic_name(topic)
    for _ in range(ADD_PARTITIONS_ATTEMPTS):
        with translated():
            if zk.exists(znodes.delete_topic_path(topic)):
                raise InvalidTopicError(f"topic {topic!r} is queued for deletion")
        try:
            with translated():
                data, stat = zk.get(znodes.topic_path(topic))
        except ZnodeMissingError:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist") from None
        grown = _grown(zk, znodes.TopicAssignment.decode(topic, data), count)
        try:
            with translated():
                zk.set(znodes.topic_path(topic), grown.encode(), version=stat.version)
        except ZnodeMissingError:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} was deleted meanwhile") from None
        except ZnodeVersionError:
            continue
        return grown
    raise RequestTimedOutError(
        f"the assignment of topic {topic!r} kept changing under us; gave up after "
        f"{ADD_PARTITIONS_ATTEMPTS} attempts, try again"
    )


def _grown(
    zk: KazooClient, assignment: znodes.TopicAssignment, count: int
) -> znodes.TopicAssignment:
    """`assignment` grown to `count` partitions, the new ones spread over live brokers."""
    topic = assignment.topic
    current = len(assignment.partitions)
    if count <= current:
        raise InvalidPartitionsError(
            f"topic {topic!r} has {current} partitions; it can only grow, not to {count}"
        )
    if count > MAX_PARTITIONS:
        raise InvalidPartitionsError(f"partitions must be at most {MAX_PARTITIONS}, not {count}")
    replication = len(next(iter(assignment.partitions.values())))
    with translated():
        brokers = live_broker_ids(zk)
    added = assign_replicas(
        brokers, count - current, replication, start=zlib.crc32(topic.encode()) + current
    )
    partitions = dict(assignment.partitions)
    partitions.update({current + p: replicas for p, replicas in added.items()})
    return znodes.TopicAssignment(topic, partitions)


def list_topics(zk: KazooClient) -> list[str]:
    return sorted(children_if_present(zk, znodes.TOPICS_PATH))


def read_assignment(zk: KazooClient, topic: str) -> znodes.TopicAssignment | None:
    found = read_if_present(zk, znodes.topic_path(topic))
    return None if found is None else znodes.TopicAssignment.decode(topic, found[0])


class StoredPartitionState(NamedTuple):
    """A leaderAndISR state as read, with its znode's zkVersion (for conditional writes)
    and mzxid: the zxid of the write that made it, which tells brokers registered after
    it (restarted since) from those it was decided about."""

    state: znodes.PartitionState
    zk_version: int
    mzxid: int


def read_partition_state(
    zk: KazooClient, topic: str, partition: int
) -> StoredPartitionState | None:
    """The leaderAndISR state with its zkVersion and mzxid, or None if not written yet."""
    path = znodes.partition_state_path(topic, partition)
    found = read_if_present(zk, path)
    if found is None:
        return None
    data, stat = found
    return StoredPartitionState(znodes.PartitionState.decode(path, data), stat.version, stat.mzxid)


def read_topic_config(zk: KazooClient, topic: str) -> dict[str, str]:
    found = read_if_present(zk, znodes.topic_config_path(topic))
    return {} if found is None else znodes.TopicConfig.decode(topic, found[0]).config


def merge_topic_config(
    current: Mapping[str, str], set: Mapping[str, str], delete: list[str]
) -> dict[str, str]:
    """The config after an alteration, checked before anything is written.

    Every key to set must be known with a valid value, every key to delete must be
    known (a typo would otherwise silently delete nothing), and no key may be both set
    and deleted. Deleting a key that is not set is a no-op, as in Kafka.
    """
    if not set and not delete:
        raise ConfigError("nothing to alter: give configs to add or to delete")
    parse_topic_configs(set)
    for key in delete:
        if key not in TOPIC_CONFIG_PARSERS:
            known = ", ".join(sorted(TOPIC_CONFIG_PARSERS))
            raise ConfigError(f"cannot delete unknown topic config {key!r}; known keys: {known}")
    both = sorted(set.keys() & frozenset(delete))
    if both:
        raise ConfigError(f"config {', '.join(both)} is both added and deleted")
    merged = {k: v for k, v in current.items() if k not in delete}
    merged.update(set)
    return merged


def alter_topic_config(
    zk: KazooClient, topic: str, set: Mapping[str, str], delete: list[str]
) -> dict[str, str]:
    """Change a topic's config and tell every broker, all or nothing; return the new config.

    The config znode and a `/config/changes` notification are written in one transaction
    that also checks the topic still exists and the config is the version we read, so a
    concurrent alteration is never lost (we re-read and retry) and a failure writes
    neither znode.
    """
    validate_topic_name(topic)
    merge_topic_config({}, set, delete)
    with translated():
        zk.ensure_path(znodes.TOPIC_CONFIG_PATH)
        zk.ensure_path(znodes.CONFIG_CHANGES_PATH)
    config_path = znodes.topic_config_path(topic)
    for _ in range(ALTER_ATTEMPTS):
        with translated():
            exists = zk.exists(znodes.topic_path(topic))
        if not exists:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        found = read_if_present(zk, config_path)
        current = {} if found is None else znodes.TopicConfig.decode(topic, found[0]).config
        merged = merge_topic_config(current, set, delete)
        encoded = znodes.TopicConfig(topic, merged).encode()
        with translated():
            transaction = zk.transaction()
            transaction.check(znodes.topic_path(topic), -1)
            if found is None:
                transaction.create(config_path, encoded)
            else:
                transaction.set_data(config_path, encoded, version=found[1].version)
            transaction.create(
                znodes.CONFIG_CHANGE_PREFIX,
                znodes.ConfigChangeNotification.for_topic(topic).encode(),
                sequence=True,
            )
            errors = [e for e in failures(transaction.commit()) if e is not None]
        if not errors:
            return merged
        if any(isinstance(e, (ZnodeVersionError, ZnodeExistsError)) for e in errors):
            continue  # someone else altered the config between our read and write
        if any(isinstance(e, ZnodeMissingError) for e in errors):
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        raise ZooKeeperError(f"altering the config of topic {topic!r} failed: {errors[0]}")
    raise ZooKeeperError(
        f"the config of topic {topic!r} kept changing under us; gave up after "
        f"{ALTER_ATTEMPTS} attempts"
    )


def read_all_assignments(zk: KazooClient) -> dict[TopicPartition, list[int]]:
    assignments: dict[TopicPartition, list[int]] = {}
    for topic in list_topics(zk):
        assignment = read_assignment(zk, topic)
        if assignment is not None:
            for partition, replicas in assignment.partitions.items():
                assignments[TopicPartition(topic, partition)] = replicas
    return assignments


def request_reassignment(zk: KazooClient, moves: list[PartitionMove]) -> None:
    """Check a plan against the cluster and hand it to the controller in one create.

    Like Kafka's ZooKeeper-era tool, one reassignment runs at a time: the znode is created,
    never overwritten, so a plan cannot silently replace one that is still running.
    """
    with translated():
        running = zk.exists(znodes.REASSIGN_PARTITIONS_PATH)
    if running:
        raise ReassignmentInProgressError(
            "a reassignment is still running (see `replog reassign --status`)"
        )
    assignments = read_all_assignments(zk)
    min_insync = {}
    for topic in {m.tp.topic for m in moves if m.tp in assignments}:
        value = read_topic_config(zk, topic).get("min.insync.replicas")
        min_insync[topic] = int(value) if value else 1
    reassignment.check_plan(moves, assignments, live_broker_ids(zk), min_insync)
    try:
        with translated():
            zk.ensure_path("/admin")
            zk.create(znodes.REASSIGN_PARTITIONS_PATH, reassignment.plan_to_json(moves).encode())
    except ZnodeExistsError:
        raise ReassignmentInProgressError("a reassignment was started meanwhile") from None


def read_reassignment(zk: KazooClient) -> list[PartitionMove]:
    """The partitions still being reassigned; empty when none is."""
    found = read_if_present(zk, znodes.REASSIGN_PARTITIONS_PATH)
    if found is None:
        return []
    try:
        return reassignment.parse_plan(found[0].decode("utf-8", "replace"))
    except InvalidReplicaAssignmentError as exc:
        raise ZooKeeperError(f"{znodes.REASSIGN_PARTITIONS_PATH}: {exc}") from exc
