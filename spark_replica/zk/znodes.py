"""The ZooKeeper layout of replog: one small codec per znode, with its path.

The layout is Kafka's from its ZooKeeper era so that operators recognise it. Decoders
raise ZooKeeperError naming the path when the data is not what the layout says; nothing
else in replog parses znode bytes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from spark_replica.errors import ZooKeeperError

BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
TOPIC_CONFIG_PATH = "/config/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
DELETE_TOPICS_PATH = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
# Kafka's reassignment file layout; see spark_replica.reassignment for its codec.
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
VERSION = 1
# The names at the top of a cluster's tree (as Kafka's SecureRootPaths): the znodes
# `replog zookeeper lock-znodes` locks in an ensemble the cluster shares without a chroot
# of its own (with one, it locks the whole chroot).
CLUSTER_ROOTS = frozenset(
    {
        "admin",
        "brokers",
        "config",
        "consumers",
        "controller",
        "controller_epoch",
        "isr_change_notification",
        "kafka-acl",
        "kafka-acl-changes",
        "kafka-acl-extended",
        "kafka-acl-extended-changes",
        "latest_producer_id_block",
        "replog",
    }
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    """`/admin/delete_topics/T`: a request to delete T, removed when the deletion is done."""
    return f"{DELETE_TOPICS_PATH}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIG_PATH}/{topic}"


def _load(data: bytes, path: str) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZooKeeperError(f"{path} does not hold JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ZooKeeperError(f"{path} holds {type(value).__name__}, expected an object")
    return value


# One encoder for every znode: json.dumps with non-default arguments builds an encoder per
# call, a third of the cost of writing 10,000 partition states.
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def _dump(value: dict[str, Any]) -> bytes:
    return _ENCODER.encode(value).encode("utf-8")


def _encode_partition_list(partitions: list[tuple[str, int]]) -> bytes:
    return _dump(
        {"version": VERSION, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


def _decode_partition_list(path: str, data: bytes) -> list[tuple[str, int]]:
    """The {"partitions": [{"topic", "partition"}]} layout of several admin znodes."""
    value = _load(data, path)
    try:
        return [(str(e["topic"]), int(e["partition"])) for e in value["partitions"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ZooKeeperError(f"{path} lacks a valid {exc}") from exc


def _timestamp() -> str:
    return str(int(time.time() * 1000))


# The listener names in a registration's `endpoints`, as Kafka names its listeners.
REPLOG_LISTENER = "REPLOG"
KAFKA_LISTENER = "KAFKA"
# Kafka's registration layout with endpoints and the listener -> security protocol map.
BROKER_REGISTRATION_VERSION = 4


def _endpoint(listener: str, host: str, port: int) -> str:
    return f"{listener}://[{host}]:{port}" if ":" in host else f"{listener}://{host}:{port}"


def _parse_endpoint(path: str, endpoint: str) -> tuple[str, str, int]:
    """`NAME://host:port` -> (NAME, host, port); Kafka brackets IPv6 hosts."""
    listener, separator, address = endpoint.partition("://")
    host, colon, port = address.rpartition(":")
    if not separator or not colon:
        raise ZooKeeperError(f"{path} holds the malformed endpoint {endpoint!r}")
    try:
        return listener, host.removeprefix("[").removesuffix("]"), int(port)
    except ValueError:
        raise ZooKeeperError(f"{path} holds the malformed endpoint {endpoint!r}") from None


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """`/brokers/ids/N` (ephemeral): where clients and other brokers reach a live broker.

    Every address is an advertised one (brokerd.listeners), never a wildcard. Written in
    Kafka's layout (version 4: `endpoints`, one `NAME://host:port` per listener with its
    own host, and `listener_security_protocol_map`) so that Kafka's tools reading
    ZooKeeper find the Kafka listener; `host`/`port` stay the replog listener, which is
    what replog's own readers use. A registration without endpoints (written before the
    Kafka listener existed) decodes with kafka_port -1: no Kafka listener. `metrics_port`
    (and `metrics_host`) say where the broker serves Prometheus text: top-level fields
    beside Kafka's `jmx_port`, for tools that find brokers in ZooKeeper, kept out of
    `endpoints`, where Kafka's tools would take them for a Kafka listener. Older
    registrations decode with -1: off. A listener's host left empty here is `host`.
    """

    broker_id: int
    host: str
    port: int
    timestamp: str = field(default_factory=_timestamp)
    kafka_port: int = -1  # -1: no Kafka-protocol listener
    security_protocol: str = "PLAINTEXT"  # of both listeners: they share one security config
    metrics_port: int = -1  # -1: no metrics over HTTP
    kafka_host: str = ""
    metrics_host: str = ""

    def __post_init__(self) -> None:
        for name in ("kafka_host", "metrics_host"):
            if not getattr(self, name):
                object.__setattr__(self, name, self.host)

    @property
    def listeners(self) -> dict[str, tuple[str, int]]:
        """The listeners in `endpoints`: name -> (host, port)."""
        addresses = {REPLOG_LISTENER: (self.host, self.port)}
        if self.kafka_port >= 0:
            addresses[KAFKA_LISTENER] = (self.kafka_host, self.kafka_port)
        return addresses

    def encode(self) -> bytes:
        return _dump(
            {
                "version": BROKER_REGISTRATION_VERSION,
                "host": self.host,
                "port": self.port,
                "jmx_port": -1,
                "metrics_port": self.metrics_port,
                "metrics_host": self.metrics_host,
                "timestamp": self.timestamp,
                "endpoints": [
                    _endpoint(name, host, port) for name, (host, port) in self.listeners.items()
                ],
                "listener_security_protocol_map": {
                    name: self.security_protocol for name in self.listeners
                },
            }
        )

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        path = broker_path(broker_id)
        value = _load(data, path)
        try:
            endpoints = [str(e) for e in value.get("endpoints", [])]
            protocols = dict(value.get("listener_security_protocol_map", {}))
            addresses = {
                name: (h, p) for name, h, p in (_parse_endpoint(path, e) for e in endpoints)
            }
            host = str(value["host"])
            kafka_host, kafka_port = addresses.get(KAFKA_LISTENER, (host, -1))
            return cls(
                broker_id,
                host,
                int(value["port"]),
                str(value["timestamp"]),
                kafka_port=kafka_port,
                security_protocol=str(protocols.get(REPLOG_LISTENER, "PLAINTEXT")),
                metrics_port=int(value.get("metrics_port", -1)),
                kafka_host=kafka_host,
                metrics_host=str(value.get("metrics_host", host)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ZooKeeperError(f"{path} lacks a valid {exc}") from exc


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """`/brokers/topics/T`: the replicas of each partition, the first one preferred."""

    topic: str
    partitions: dict[int, list[int]]

    def encode(self) -> bytes:
        return _dump(
            {
                "version": VERSION,
                "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
            }
        )

    @classmethod
    def decode(cls, topic: str, data: bytes) -> TopicAssignment:
        path = topic_path(topic)
        value = _load(data, path)
        try:
            partitions = {int(p): [int(b) for b in r] for p, r in value["partitions"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ZooKeeperError(f"{path} holds no valid partitions map: {exc}") from exc
        return cls(topic, partitions)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """`/brokers/topics/T/partitions/P/state`: the leaderAndISR path."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int

    def encode(self) -> bytes:
        return _dump(
            {
                "version": VERSION,
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
                "controller_epoch": self.controller_epoch,
            }
        )

    @classmethod
    def decode(cls, path: str, data: bytes) -> PartitionState:
        value = _load(data, path)
        try:
            return cls(
                int(value["leader"]),
                int(value["leader_epoch"]),
                [int(b) for b in value["isr"]],
                int(value["controller_epoch"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ZooKeeperError(f"{path} lacks a valid {exc}") from exc


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """`/config/topics/T`: per-topic overrides of the broker's defaults (Kafka names)."""

    topic: str
    config: dict[str, str]

    def encode(self) -> bytes:
        return _dump({"version": VERSION, "config": dict(sorted(self.config.items()))})

    @classmethod
    def decode(cls, topic: str, data: bytes) -> TopicConfig:
        path = topic_config_path(topic)
        value = _load(data, path)
        config = value.get("config", {})
        if not isinstance(config, dict):
            raise ZooKeeperError(f"{path} has a config that is not an object")
        return cls(topic, {str(k): str(v) for k, v in config.items()})


ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = f"{ISR_CHANGE_NOTIFICATION_PATH}/isr_change_"


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """`/controller` (ephemeral): which broker is the controller now."""

    broker_id: int
    timestamp: str = field(default_factory=_timestamp)

    def encode(self) -> bytes:
        return _dump({"version": VERSION, "brokerid": self.broker_id, "timestamp": self.timestamp})

    @classmethod
    def decode(cls, data: bytes) -> ControllerRegistration:
        value = _load(data, CONTROLLER_PATH)
        try:
            return cls(int(value["brokerid"]), str(value.get("timestamp", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ZooKeeperError(f"{CONTROLLER_PATH} lacks a valid {exc}") from exc


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """`/admin/preferred_replica_election`: partitions to move back to their preferred
    replica (the first of their assignment); the controller removes it when done."""

    partitions: list[tuple[str, int]]

    def encode(self) -> bytes:
        return _encode_partition_list(self.partitions)

    @classmethod
    def decode(cls, data: bytes) -> PreferredReplicaElection:
        return cls(_decode_partition_list(PREFERRED_REPLICA_ELECTION_PATH, data))


def encode_controller_epoch(epoch: int) -> bytes:
    """`/controller_epoch` holds the epoch as a plain integer, as in Kafka."""
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZooKeeperError(f"{CONTROLLER_EPOCH_PATH} does not hold an integer") from exc


@dataclass(frozen=True, slots=True)
class IsrChangeNotification:
    """`/isr_change_notification/isr_change_N` (sequential): partitions whose ISR a leader
    changed, so that the controller re-reads them and tells every broker.

    `leader_stepped_down` marks partitions whose leader found the znode written by someone
    else and stopped leading: the controller elects again (an extra key, absent in Kafka's
    notifications, which therefore read as ordinary ISR changes).
    """

    partitions: list[tuple[str, int]]
    leader_stepped_down: bool = False

    def encode(self) -> bytes:
        value: dict[str, Any] = {
            "version": VERSION,
            "partitions": [{"topic": t, "partition": p} for t, p in self.partitions],
        }
        if self.leader_stepped_down:
            value["leader_stepped_down"] = True
        return _dump(value)

    @classmethod
    def decode(cls, path: str, data: bytes) -> IsrChangeNotification:
        stepped_down = _load(data, path).get("leader_stepped_down") is True
        return cls(_decode_partition_list(path, data), stepped_down)


CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = f"{CONFIG_CHANGES_PATH}/config_change_"
CONFIG_CHANGE_VERSION = 2
TOPIC_ENTITY_PREFIX = "topics/"


def config_change_path(child: str) -> str:
    return f"{CONFIG_CHANGES_PATH}/{child}"


@dataclass(frozen=True, slots=True)
class ConfigChangeNotification:
    """`/config/changes/config_change_N` (sequential): an entity whose config was altered,
    so that every broker re-reads it. Kafka's version 2 layout names it by path
    (``topics/T``); the config itself stays in `/config/topics/T`."""

    entity_path: str

    @classmethod
    def for_topic(cls, topic: str) -> ConfigChangeNotification:
        return cls(f"{TOPIC_ENTITY_PREFIX}{topic}")

    @property
    def topic(self) -> str | None:
        """The topic named, or None for an entity replog does not configure (e.g. brokers)."""
        kind, slash, name = self.entity_path.partition("/")
        return name if slash and kind == TOPIC_ENTITY_PREFIX.rstrip("/") and name else None

    def encode(self) -> bytes:
        return _dump({"version": CONFIG_CHANGE_VERSION, "entity_path": self.entity_path})

    @classmethod
    def decode(cls, path: str, data: bytes) -> ConfigChangeNotification:
        value = _load(data, path)
        entity_path = value.get("entity_path")
        if value.get("version") != CONFIG_CHANGE_VERSION or not isinstance(entity_path, str):
            raise ZooKeeperError(f"{path} is not a version 2 config change with an entity_path")
        return cls(entity_path)
