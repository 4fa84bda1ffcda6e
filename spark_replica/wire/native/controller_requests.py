"""The controller's requests to brokers: LeaderAndIsr and UpdateMetadata.

Both carry the controller's id and epoch, so a broker can refuse a deposed controller
(STALE_CONTROLLER_EPOCH), and the epoch of the broker incarnation they are meant for
(the czxid of its registration), so a broker restarted a moment ago refuses requests
meant for its previous life (STALE_BROKER_EPOCH).

LeaderAndIsr: per partition the leader, leader epoch, ISR, the zkVersion of its state
znode (the leader's ISR writes are conditional on it) and the replicas; plus the
addresses of the leaders named (a broker entry: id, host, replog port, Kafka port or -1,
Kafka host: the advertised addresses),
so followers know where to fetch from, and the INIT flag a new controller sets on its
first round. Answer: an error code per partition.

UpdateMetadata: the live brokers and the state of every partition; it replaces the
broker's metadata cache whole. Answer: an empty body (or a top-level error).

StopReplica: partitions this broker must stop replicating, and whether to delete their
logs (topic deletion). Answer: an error code per partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.metadata import BROKER_ADDRESS, BrokerInfo
from spark_replica.wire.native.table import (
    ERROR,
    per_topic,
    per_topic_partition_ids,
    struct,
    struct_array,
    wire_field,
)
from spark_replica.wire.schema import Field, Tabled, tabled


@dataclass(slots=True)
class PartitionLeaderState:
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]


@dataclass(slots=True)
class TopicLeaderStates:
    topic: str
    partitions: list[PartitionLeaderState]


LEADER_STATES = per_topic(
    "topics",
    TopicLeaderStates,
    PartitionLeaderState,
    wire_field("partition", "int32"),
    wire_field("leader", "int32"),
    wire_field("leader_epoch", "int32"),
    wire_field("isr", "[]int32"),
    wire_field("zk_version", "int32"),
    wire_field("replicas", "[]int32"),
)


def broker_entries(name: str) -> Field:
    """Broker entries with both listeners' advertised addresses."""
    return struct_array(
        name,
        BrokerInfo,
        *BROKER_ADDRESS,
        wire_field("kafka_port", "int32"),
        wire_field("kafka_host", "string"),
    )


CONTROLLER_HEADER_FIELDS = (
    wire_field("controller_id", "int32"),
    wire_field("controller_epoch", "int32"),
    wire_field("broker_epoch", "int64"),
)


@tabled(*CONTROLLER_HEADER_FIELDS)
@dataclass(slots=True)
class ControllerHeader(Tabled):
    controller_id: int
    controller_epoch: int
    broker_epoch: int


CONTROLLER_HEADER = struct("header", ControllerHeader, *CONTROLLER_HEADER_FIELDS)


@tabled(
    CONTROLLER_HEADER,
    wire_field("is_init", "bool"),
    LEADER_STATES,
    broker_entries("leaders"),
)
@dataclass(slots=True)
class LeaderAndIsrRequest(Tabled):
    API_KEY = ApiKey.LEADER_AND_ISR
    header: ControllerHeader
    is_init: bool
    topics: list[TopicLeaderStates]
    leaders: list[BrokerInfo] = field(default_factory=list)


@dataclass(slots=True)
class PartitionError:
    partition: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class TopicErrors:
    topic: str
    partitions: list[PartitionError] = field(default_factory=list)


@tabled(per_topic("topics", TopicErrors, PartitionError, wire_field("partition", "int32"), *ERROR))
@dataclass(slots=True)
class LeaderAndIsrResponse(Tabled):
    topics: list[TopicErrors]


@tabled(CONTROLLER_HEADER, broker_entries("brokers"), LEADER_STATES)
@dataclass(slots=True)
class UpdateMetadataRequest(Tabled):
    API_KEY = ApiKey.UPDATE_METADATA
    header: ControllerHeader
    brokers: list[BrokerInfo]
    topics: list[TopicLeaderStates]


@tabled()
@dataclass(slots=True)
class EmptyResponse(Tabled):
    """The answer of requests whose only outcome is their top-level error code."""


@dataclass(slots=True)
class StopReplicaTopic:
    topic: str
    partitions: list[int]


@tabled(
    CONTROLLER_HEADER,
    wire_field("delete_partitions", "bool"),
    per_topic_partition_ids("topics", StopReplicaTopic),
)
@dataclass(slots=True)
class StopReplicaRequest(Tabled):
    API_KEY = ApiKey.STOP_REPLICA
    header: ControllerHeader
    delete_partitions: bool
    topics: list[StopReplicaTopic]
