"""What request handlers may touch, and the loop over partitions they share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient

from brokerd.config.broker import BrokerConfig
from brokerd.core.metadata_cache import MetadataCache
from brokerd.replication.isr_writer import IsrWriter
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.errors import BrokerResponseError, ProtocolError, code_of, wire_message
from spark_replica.topics import TopicPartition, validate_topic_name
from spark_replica.zk import znodes

if TYPE_CHECKING:
    from brokerd.controller.controller import Controller
    from brokerd.groups.coordinator import GroupCoordinator
    from spark_replica.security.acl import Authorizer


@dataclass
class BrokerContext:
    """The broker's state as its request handlers see it; owned by the event loop.

    `controller_epoch` is the highest controller epoch seen in a controller request;
    `broker_epoch` is the czxid of this incarnation's registration (-1 until registered).
    """

    config: BrokerConfig
    replicas: ReplicaManager
    fetchers: ReplicaFetcherManager
    registration: znodes.BrokerRegistration | None = None
    zk: KazooClient | None = None
    isr_writer: IsrWriter | None = None
    metadata: MetadataCache = field(default_factory=MetadataCache)
    controller_epoch: int = -1
    broker_epoch: int = -1
    controller: Controller | None = None
    # The ACLs every request is checked against; None when no authorizer is configured.
    authorizer: Authorizer | None = None
    # The consumer groups this broker coordinates; None while the Kafka listener is off.
    groups: GroupCoordinator | None = None


def answer_each_partition(
    topics: Iterable[Any],
    make_topic_result: Callable[[str], Any],
    make_partition_result: Callable[[int], Any],
    serve: Callable[[TopicPartition, Any, Any], None],
) -> list[Any]:
    """Serve every (topic, partition) entry of a request into its own result.

    The topic name is validated first; a typed error raised while serving one partition
    becomes that partition's error code and message and never affects the others.
    """
    answered = []
    for topic in topics:
        topic_result = make_topic_result(topic.topic)
        for entry in topic.partitions:
            result = make_partition_result(entry.partition)
            try:
                validate_topic_name(topic.topic)
                serve(TopicPartition(topic.topic, entry.partition), entry, result)
            except (BrokerResponseError, ProtocolError) as exc:
                result.error_code = code_of(exc)
                result.error_message = wire_message(exc)
            topic_result.partitions.append(result)
        answered.append(topic_result)
    return answered
