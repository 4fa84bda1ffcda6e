"""Topics in ZooKeeper: create, delete, list and read them, in all-or-nothing writes.

Creating a topic writes its assignment and config in one kazoo transaction, so a failure
leaves no half-written topic behind. The controller notices the new topic and writes
each partition's first leaderAndISR state.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from spark_replica.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    ZooKeeperError,
)
from spark_replica.topic_config import parse_topic_configs
from spark_replica.topics import validate_topic_name
from spark_replica.zk import znodes

MAX_PARTITIONS = 100_000


def live_broker_ids(zk: KazooClient) -> list[int]:
    try:
        children = zk.get_children(znodes.BROKER_IDS_PATH)
    except NoNodeError:
        return []
    return sorted(int(c) for c in children if c.isdigit())


def read_brokers(zk: KazooClient) -> list[znodes.BrokerRegistration]:
    brokers = []
    for broker_id in live_broker_ids(zk):
        try:
            data, _ = zk.get(znodes.broker_path(broker_id))
        except NoNodeError:
            continue
        brokers.append(znodes.BrokerRegistration.decode(broker_id, data))
    return brokers


def assign_replicas(
    brokers: list[int], partitions: int, replication_factor: int, start: int = 0
) -> dict[int, list[int]]:
    """Round-robin replicas so that leaders (first replicas) and followers spread evenly.

    Partition p's preferred replica is broker (start + p) mod n. Follower j sits
    1 + (shift + j - 1) mod (n - 1) places after it, where the shift grows by one every
    n partitions: followers are always distinct from each other and from the leader,
    and the same pairs of brokers are not always together.
    """
    count = len(brokers)
    if replication_factor > count:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {count} live broker(s)"
        )
    assignment: dict[int, list[int]] = {}
    for p in range(partitions):
        first = (start + p) % count
        shift = p // count
        replicas = [brokers[first]]
        for j in range(1, replication_factor):
            distance = 1 + (shift + j - 1) % (count - 1)
            replicas.append(brokers[(first + distance) % count])
        assignment[p] = replicas
    return assignment


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
    if zk.exists(znodes.topic_path(topic)):
        raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
    brokers = live_broker_ids(zk)
    if not brokers:
        raise InvalidReplicationFactorError("no broker is registered in ZooKeeper")
    assignment = znodes.TopicAssignment(
        topic,
        assign_replicas(brokers, partitions, replication_factor, start=zlib.crc32(topic.encode())),
    )
    zk.ensure_path(znodes.TOPICS_PATH)
    zk.ensure_path(znodes.TOPIC_CONFIG_PATH)
    transaction = zk.transaction()
    transaction.create(znodes.topic_config_path(topic), znodes.TopicConfig(topic, configs).encode())
    transaction.create(znodes.topic_path(topic), assignment.encode())
    results = transaction.commit()
    failures = [r for r in results if isinstance(r, Exception)]
    if any(isinstance(r, NodeExistsError) for r in failures):
        raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
    if failures:
        raise ZooKeeperError(f"creating topic {topic!r} failed: {failures[0]!r}")
    return assignment


def delete_topic(zk: KazooClient, topic: str) -> None:
    """Remove a topic's znodes; brokers notice and delete their local logs."""
    validate_topic_name(topic)
    if not zk.exists(znodes.topic_path(topic)):
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    zk.delete(znodes.topic_path(topic), recursive=True)
    with contextlib.suppress(NoNodeError):
        zk.delete(znodes.topic_config_path(topic))


def list_topics(zk: KazooClient) -> list[str]:
    try:
        return sorted(zk.get_children(znodes.TOPICS_PATH))
    except NoNodeError:
        return []


def read_assignment(zk: KazooClient, topic: str) -> znodes.TopicAssignment | None:
    try:
        data, _ = zk.get(znodes.topic_path(topic))
    except NoNodeError:
        return None
    return znodes.TopicAssignment.decode(topic, data)


def read_partition_state(
    zk: KazooClient, topic: str, partition: int
) -> tuple[znodes.PartitionState, int] | None:
    """The leaderAndISR state and its zkVersion, or None if it is not written yet."""
    path = znodes.partition_state_path(topic, partition)
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return None
    return znodes.PartitionState.decode(path, data), stat.version


def read_topic_config(zk: KazooClient, topic: str) -> dict[str, str]:
    try:
        data, _ = zk.get(znodes.topic_config_path(topic))
    except NoNodeError:
        return {}
    return znodes.TopicConfig.decode(topic, data).config
