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
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.primitives import Reader, Writer


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


def _write_state(w: Writer, p: PartitionLeaderState) -> None:
    w.int32(p.partition)
    w.int32(p.leader)
    w.int32(p.leader_epoch)
    w.int32_array(p.isr)
    w.int32(p.zk_version)
    w.int32_array(p.replicas)


def _read_state(r: Reader) -> PartitionLeaderState:
    partition, leader, epoch = r.int32(), r.int32(), r.int32()
    isr = r.int32_array()
    zk_version = r.int32()
    return PartitionLeaderState(partition, leader, epoch, isr, zk_version, r.int32_array())


def _write_broker(w: Writer, b: BrokerInfo) -> None:
    w.int32(b.broker_id)
    w.string(b.host)
    w.int32(b.port)
    w.int32(b.kafka_port)
    w.string(b.kafka_host)


def _read_broker(r: Reader) -> BrokerInfo:
    return BrokerInfo(r.int32(), r.required_string(), r.int32(), r.int32(), r.required_string())


@dataclass(slots=True)
class ControllerHeader:
    controller_id: int
    controller_epoch: int
    broker_epoch: int

    def write(self, w: Writer) -> None:
        w.int32(self.controller_id)
        w.int32(self.controller_epoch)
        w.int64(self.broker_epoch)

    @classmethod
    def read(cls, r: Reader) -> ControllerHeader:
        return cls(r.int32(), r.int32(), r.int64())


@dataclass(slots=True)
class LeaderAndIsrRequest:
    API_KEY = ApiKey.LEADER_AND_ISR
    header: ControllerHeader
    is_init: bool
    topics: list[TopicLeaderStates]
    leaders: list[BrokerInfo] = field(default_factory=list)

    def write(self, w: Writer) -> None:
        self.header.write(w)
        w.boolean(self.is_init)
        w.topics(self.topics, lambda p: _write_state(w, p))
        w.array(self.leaders, lambda b: _write_broker(w, b))

    @classmethod
    def read(cls, r: Reader) -> LeaderAndIsrRequest:
        header = ControllerHeader.read(r)
        is_init = r.boolean()
        topics = r.topics(TopicLeaderStates, lambda: _read_state(r))
        return cls(header, is_init, topics, r.required_array(lambda: _read_broker(r)))


@dataclass(slots=True)
class PartitionError:
    partition: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class TopicErrors:
    topic: str
    partitions: list[PartitionError] = field(default_factory=list)


@dataclass(slots=True)
class LeaderAndIsrResponse:
    topics: list[TopicErrors]

    def write(self, w: Writer) -> None:
        def write_partition(p: PartitionError) -> None:
            w.int32(p.partition)
            w.int16(p.error_code)
            w.string(p.error_message)

        w.topics(self.topics, write_partition)

    @classmethod
    def read(cls, r: Reader) -> LeaderAndIsrResponse:
        return cls(r.topics(TopicErrors, lambda: PartitionError(r.int32(), r.int16(), r.string())))


@dataclass(slots=True)
class UpdateMetadataRequest:
    API_KEY = ApiKey.UPDATE_METADATA
    header: ControllerHeader
    brokers: list[BrokerInfo]
    topics: list[TopicLeaderStates]

    def write(self, w: Writer) -> None:
        self.header.write(w)
        w.array(self.brokers, lambda b: _write_broker(w, b))
        w.topics(self.topics, lambda p: _write_state(w, p))

    @classmethod
    def read(cls, r: Reader) -> UpdateMetadataRequest:
        header = ControllerHeader.read(r)
        brokers = r.required_array(lambda: _read_broker(r))
        return cls(header, brokers, r.topics(TopicLeaderStates, lambda: _read_state(r)))


@dataclass(slots=True)
class EmptyResponse:
    """The answer of requests whose only outcome is their top-level error code."""

    def write(self, w: Writer) -> None:
        pass

    @classmethod
    def read(cls, r: Reader) -> EmptyResponse:
        return cls()


@dataclass(slots=True)
class StopReplicaTopic:
    topic: str
    partitions: list[int]


@dataclass(slots=True)
class StopReplicaRequest:
    API_KEY = ApiKey.STOP_REPLICA
    header: ControllerHeader
    delete_partitions: bool
    topics: list[StopReplicaTopic]

    def write(self, w: Writer) -> None:
        self.header.write(w)
        w.boolean(self.delete_partitions)
        w.topics(self.topics, w.int32)

    @classmethod
    def read(cls, r: Reader) -> StopReplicaRequest:
        header = ControllerHeader.read(r)
        delete = r.boolean()
        return cls(header, delete, r.topics(StopReplicaTopic, r.int32))
