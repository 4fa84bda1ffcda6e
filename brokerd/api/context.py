"""What request handlers may touch: the broker's config, partitions and cluster view."""

from __future__ import annotations

from dataclasses import dataclass, field

from kazoo.client import KazooClient

from brokerd.cluster_view import ClusterView
from brokerd.config import BrokerConfig
from brokerd.replica_manager import ReplicaManager


@dataclass
class BrokerContext:
    config: BrokerConfig
    replicas: ReplicaManager
    zk: KazooClient | None = None
    view: ClusterView = field(default_factory=ClusterView)
