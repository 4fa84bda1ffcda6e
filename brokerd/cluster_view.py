"""What this broker knows of the cluster: brokers, topics, assignments, leaderAndISR states.

A ClusterView is an immutable snapshot read from ZooKeeper in one pass; the broker swaps
in a new one on every change it is told about, and answers Metadata requests from the
current one. Reading is done off the event loop (kazoo blocks); applying is done on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kazoo.client import KazooClient

from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store, znodes


@dataclass(frozen=True)
class ClusterView:
    brokers: dict[int, znodes.BrokerRegistration] = field(default_factory=dict)
    assignments: dict[str, znodes.TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, znodes.PartitionState] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    controller_id: int = -1

    def partitions_of(self, broker_id: int) -> dict[TopicPartition, list[int]]:
        """The partitions with a replica on `broker_id`, with their replica lists."""
        owned = {}
        for topic, assignment in self.assignments.items():
            for partition, replicas in assignment.partitions.items():
                if broker_id in replicas:
                    owned[TopicPartition(topic, partition)] = replicas
        return owned


def read_cluster_view(zk: KazooClient) -> ClusterView:
    """One consistent-enough pass over the znodes; blocks, so call it from a thread."""
    brokers = {b.broker_id: b for b in topic_store.read_brokers(zk)}
    assignments: dict[str, znodes.TopicAssignment] = {}
    states: dict[TopicPartition, znodes.PartitionState] = {}
    configs: dict[str, dict[str, str]] = {}
    for topic in topic_store.list_topics(zk):
        assignment = topic_store.read_assignment(zk, topic)
        if assignment is None:
            continue
        assignments[topic] = assignment
        configs[topic] = topic_store.read_topic_config(zk, topic)
        for partition in assignment.partitions:
            found = topic_store.read_partition_state(zk, topic, partition)
            if found is not None:
                states[TopicPartition(topic, partition)] = found[0]
    return ClusterView(brokers, assignments, states, configs)
