"""What request handlers may touch: the broker's state as the serving core sees it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kazoo.client import KazooClient

from brokerd.config.broker import BrokerConfig
from brokerd.core.metadata_cache import MetadataCache
from brokerd.replication.isr_writer import IsrWriter
from brokerd.replication.partition import TxnMarker
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes

# Told of each transaction marker this broker appended as leader, once committed: the
# partition, the marker, its offset (brokerd/core/txn_markers.py).
MarkerListener = Callable[[TopicPartition, TxnMarker, int], None]

if TYPE_CHECKING:
    from brokerd.controller.controller import Controller
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
    # Called after each LeaderAndIsr, StopReplica and UpdateMetadata is applied: what
    # follows leadership and topics (the group coordinator, loading the offsets
    # partitions it leads and removing deleted topics' offsets) looks again.
    role_listeners: list[Callable[[], None]] = field(default_factory=list)
    # Told of the markers this broker appends as leader (the group coordinator commits or
    # drops transactional offsets at them).
    marker_listeners: list[MarkerListener] = field(default_factory=list)
