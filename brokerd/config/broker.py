"""The broker's configuration: identity, listeners, storage and the defaults for topics.

Names follow Kafka's broker configs where one exists (``log.segment.bytes``,
``log.retention.ms``, ``replica.high.watermark.checkpoint.interval.ms``...), so that
``--override key=value`` reads familiarly. Every value is checked when the broker
starts; a bad one stops it with a ConfigError naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from brokerd.config.cleaner import KEYS as CLEANER_KEYS
from brokerd.config.cleaner import CleanerConfig
from brokerd.config.listeners import (
    KAFKA,
    METRICS,
    REPLOG,
    Endpoint,
    check_advertised,
    check_shared_ports,
    is_wildcard,
)
from brokerd.config.security import KEYS as SECURITY_KEYS
from brokerd.config.security import BrokerSecurity
from brokerd.config.transactions import KEYS as TRANSACTION_KEYS
from brokerd.config.transactions import TransactionConfig
from brokerd.log import LogConfig
from brokerd.metrics.access import KEYS as METRICS_ACCESS_KEYS
from brokerd.metrics.access import MetricsAccess
from spark_replica.errors import ConfigError
from spark_replica.topic_config import (
    DEFAULT_COMPRESSION_TYPE,
    TOPIC_CONFIG_PARSERS,
    parse_cleanup_policy,
    parse_compression_type,
    parse_ratio,
    parse_topic_configs,
)
from spark_replica.wire.native.frames import DEFAULT_MAX_FRAME_BYTES

# broker override key -> LogConfig field
_LOG_DEFAULT_KEYS = {
    "log.segment.bytes": "segment_bytes",
    "log.roll.ms": "segment_ms",
    "log.retention.bytes": "retention_bytes",
    "log.retention.ms": "retention_ms",
    "log.index.interval.bytes": "index_interval_bytes",
    "log.flush.interval.messages": "flush_messages",
    "log.flush.interval.ms": "flush_ms",
    "message.max.bytes": "max_batch_bytes",
    "log.cleanup.policy": "cleanup_policy",
    "log.cleaner.delete.retention.ms": "delete_retention_ms",
    "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
    "log.cleaner.max.compaction.lag.ms": "max_compaction_lag_ms",
    "log.cleaner.min.cleanable.ratio": "min_cleanable_dirty_ratio",
}
# The broker defaults above that are not integers, with their parsers.
_LOG_DEFAULT_PARSERS = {
    "log.cleanup.policy": parse_cleanup_policy,
    "log.cleaner.min.cleanable.ratio": parse_ratio,
}

# topic config key -> the LogConfig field holding its effective value
TOPIC_LOG_FIELDS = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.bytes": "retention_bytes",
    "retention.ms": "retention_ms",
    "index.interval.bytes": "index_interval_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_batch_bytes",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
}

_INTERVAL_KEYS = {
    "replica.high.watermark.checkpoint.interval.ms": "hw_checkpoint_interval_ms",
    "log.retention.check.interval.ms": "retention_check_interval_ms",
    "log.flush.scheduler.interval.ms": "flush_check_interval_ms",
    "socket.request.max.bytes": "max_frame_bytes",
    "zookeeper.session.timeout.ms": "zookeeper_session_timeout_ms",
    "replica.lag.time.max.ms": "replica_lag_time_max_ms",
    "leader.imbalance.check.interval.seconds": "leader_imbalance_check_interval_seconds",
    "leader.imbalance.per.broker.percentage": "leader_imbalance_per_broker_percentage",
    "controlled.shutdown.max.retries": "controlled_shutdown_max_retries",
    "controlled.shutdown.retry.backoff.ms": "controlled_shutdown_retry_backoff_ms",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
    "producer.id.expiration.check.interval.ms": "producer_id_expiration_check_interval_ms",
    "max.connections": "max_connections",
    "max.connections.per.ip": "max_connections_per_ip",
    "queued.max.request.bytes": "queued_max_request_bytes",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "socket.request.read.timeout.ms": "socket_request_read_timeout_ms",
    "sasl.server.max.receive.size": "sasl_server_max_receive_size",
    "sasl.server.authentication.timeout.ms": "sasl_server_authentication_timeout_ms",
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.retention.ms": "offsets_retention_ms",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offsets.topic.replication.factor": "offsets_topic_replication_factor",
    "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
    "offsets.commit.timeout.ms": "offsets_commit_timeout_ms",
    "offsets.load.buffer.size": "offsets_load_buffer_size",
    "max.partitions.per.topic": "max_partitions_per_topic",
}
# Kafka's offsets.retention.minutes, in offsets_retention_ms; replog's offsets.retention.ms
# (no Kafka key) says it finer and wins when both are given.
OFFSETS_RETENTION_MINUTES_KEY = "offsets.retention.minutes"

_BOOLEAN_KEYS = {
    "auto.leader.rebalance.enable": "auto_leader_rebalance_enable",
    "controlled.shutdown.enable": "controlled_shutdown_enable",
}

# Every key `with_overrides` takes.
# What a topic created without them gets (Kafka's CreateTopics with -1, KIP-464).
_TOPIC_DEFAULT_KEYS = {
    "num.partitions": "num_partitions",
    "default.replication.factor": "default_replication_factor",
}
BROKER_CONFIG_KEYS = frozenset(
    [
        *_LOG_DEFAULT_KEYS,
        *_INTERVAL_KEYS,
        "min.insync.replicas",
        "compression.type",
        *_TOPIC_DEFAULT_KEYS,
        *_BOOLEAN_KEYS,
        *SECURITY_KEYS,
        *METRICS_ACCESS_KEYS,
        *CLEANER_KEYS,
        *TRANSACTION_KEYS,
        OFFSETS_RETENTION_MINUTES_KEY,
    ]
)


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int
    log_dir: Path
    zookeeper: str
    host: str = "127.0.0.1"
    port: int = 9092
    kafka_port: int = -1  # the Kafka-protocol listener: -1 off, 0 any free port
    metrics_port: int = -1  # Prometheus metrics over HTTP: -1 off, 0 any free port
    # Bind hosts of the Kafka and metrics listeners where they differ from `host`.
    kafka_host: str | None = None
    metrics_host: str | None = None
    # What is registered and given to clients (brokerd.listeners): the listeners named
    # (port 0: the port bound), or every listener at `advertised_host`, which wins.
    advertised_listeners: Mapping[str, Endpoint] = field(default_factory=dict)
    advertised_host: str | None = None
    log_defaults: LogConfig = field(default_factory=LogConfig)
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    hw_checkpoint_interval_ms: int = 5_000
    retention_check_interval_ms: int = 300_000
    flush_check_interval_ms: int = 1_000
    zookeeper_session_timeout_ms: int = 10_000
    replica_lag_time_max_ms: int = 30_000
    auto_leader_rebalance_enable: bool = True
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 1000
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    min_insync_replicas: int = 1
    # The codec of batches fetched on the Kafka listener, for topics that set none.
    compression_type: str = DEFAULT_COMPRESSION_TYPE
    num_partitions: int = 1  # Kafka's defaults for a topic created without them
    default_replication_factor: int = 1
    # replog's own (Kafka has none): the most partitions CreateTopics or CreatePartitions
    # may ask of one topic, refused before anything is built. The control plane is
    # measured at 10,000 (benchmarks/controller_scale.py), and such an assignment stays
    # far below ZooKeeper's 1 MiB znode limit.
    max_partitions_per_topic: int = 10_000
    producer_id_expiration_ms: int = 86_400_000  # Kafka's default: one day
    producer_id_expiration_check_interval_ms: int = 600_000
    # Kafka's default is unlimited; each connection that has sent bytes holds a 256 KiB
    # receive buffer, so this bounds that memory at about 1 GiB.
    max_connections: int = 4096
    max_connections_per_ip: int = 4096
    # Kafka's default is unlimited. Bytes of requests read and not yet answered, over all
    # connections; at least socket.request.max.bytes, so that the largest request fits.
    queued_max_request_bytes: int = 512 * 1024 * 1024
    connections_max_idle_ms: int = 600_000  # Kafka's default: ten minutes
    # replog's own (Kafka has none): how long a request's bytes may take to arrive once
    # its first byte has, so that a sender trickling bytes cannot hold a connection.
    socket_request_read_timeout_ms: int = 30_000
    # Before login (brokerd/serving/connection_state.py): the largest frame read (Kafka's name and
    # default), and how long a connection may take to log in (replog's own).
    sasl_server_max_receive_size: int = 524_288
    sasl_server_authentication_timeout_ms: int = 10_000
    # Consumer groups, with Kafka's defaults except the initial rebalance delay (Kafka's
    # is 3 s): a new group waits this long for more members before its first generation.
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 300
    group_max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    # Kafka's: an empty group's offsets go a week after it emptied, checked every 10 min.
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    # The internal __consumer_offsets topic (brokerd/groups/offsets_topic.py), Kafka's
    # names and defaults: created on first use with this many partitions and copies
    # (capped by the live brokers then), commits waiting for every in-sync copy at most
    # offsets.commit.timeout.ms, loads reading this many bytes at a time.
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104_857_600
    offsets_commit_timeout_ms: int = 5_000
    offsets_load_buffer_size: int = 5_242_880
    security: BrokerSecurity = field(default_factory=BrokerSecurity)
    # Who may read /metrics: TLS and basic authentication (metrics.* configs).
    metrics_access: MetricsAccess = field(default_factory=MetricsAccess)
    # How much of the broker the log cleaner may use (log.cleaner.* configs).
    cleaner: CleanerConfig = field(default_factory=CleanerConfig)
    # The transaction coordinator and its __transaction_state topic (transaction.* configs).
    transactions: TransactionConfig = field(default_factory=TransactionConfig)

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ConfigError(f"broker.id must be 0 or more, not {self.broker_id}")
        if not 0 <= self.port < 65536:
            raise ConfigError(f"port must be between 0 and 65535, not {self.port}")
        if not -1 <= self.kafka_port < 65536:
            raise ConfigError(
                f"kafka port must be -1 (off), 0 (any free port) or a port up to 65535, "
                f"not {self.kafka_port}"
            )
        if not -1 <= self.metrics_port < 65536:
            raise ConfigError(
                f"metrics port must be -1 (off), 0 (any free port) or a port up to 65535, "
                f"not {self.metrics_port}"
            )
        endpoints = self.bind_endpoints()
        check_shared_ports(endpoints)
        check_advertised(self.advertised_listeners, endpoints)
        if self.advertised_host is not None and (
            not self.advertised_host.strip() or is_wildcard(self.advertised_host)
        ):
            raise ConfigError(
                f"cannot advertise {self.advertised_host!r}: clients need the host's name or "
                "an address they can connect to"
            )
        for name in (
            "hw_checkpoint_interval_ms",
            "retention_check_interval_ms",
            "flush_check_interval_ms",
            "max_frame_bytes",
            "zookeeper_session_timeout_ms",
            "replica_lag_time_max_ms",
            "leader_imbalance_check_interval_seconds",
            "controlled_shutdown_max_retries",
            "controlled_shutdown_retry_backoff_ms",
            "min_insync_replicas",
            "num_partitions",
            "default_replication_factor",
            "max_partitions_per_topic",
            "producer_id_expiration_ms",
            "producer_id_expiration_check_interval_ms",
            "max_connections",
            "max_connections_per_ip",
            "queued_max_request_bytes",
            "connections_max_idle_ms",
            "socket_request_read_timeout_ms",
            "sasl_server_max_receive_size",
            "sasl_server_authentication_timeout_ms",
            "group_min_session_timeout_ms",
            "group_max_size",
            "offset_metadata_max_bytes",
            "offsets_retention_ms",
            "offsets_retention_check_interval_ms",
            "offsets_topic_num_partitions",
            "offsets_topic_replication_factor",
            "offsets_topic_segment_bytes",
            "offsets_commit_timeout_ms",
            "offsets_load_buffer_size",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if self.num_partitions > self.max_partitions_per_topic:
            raise ConfigError(
                f"num.partitions={self.num_partitions} is over "
                f"max.partitions.per.topic={self.max_partitions_per_topic}"
            )
        if self.queued_max_request_bytes < self.max_frame_bytes:
            raise ConfigError(
                f"queued.max.request.bytes={self.queued_max_request_bytes} must be at least "
                f"socket.request.max.bytes={self.max_frame_bytes}, or the largest request "
                "could never be read"
            )
        if not 0 <= self.group_initial_rebalance_delay_ms <= self.group_max_session_timeout_ms:
            raise ConfigError(
                "group.initial.rebalance.delay.ms must be between 0 and "
                f"group.max.session.timeout.ms, not {self.group_initial_rebalance_delay_ms}"
            )
        if self.group_max_session_timeout_ms < self.group_min_session_timeout_ms:
            raise ConfigError(
                f"group.max.session.timeout.ms={self.group_max_session_timeout_ms} must be at "
                f"least group.min.session.timeout.ms={self.group_min_session_timeout_ms}"
            )
        if not 0 <= self.leader_imbalance_per_broker_percentage <= 100:
            raise ConfigError(
                "leader.imbalance.per.broker.percentage must be between 0 and 100, not "
                f"{self.leader_imbalance_per_broker_percentage}"
            )

    def bind_endpoints(self) -> dict[str, Endpoint]:
        """Where each listener that is on binds (port 0: any free port)."""
        endpoints = {REPLOG: Endpoint(self.host, self.port)}
        if self.kafka_port != -1:
            endpoints[KAFKA] = Endpoint(self.kafka_host or self.host, self.kafka_port)
        if self.metrics_port != -1:
            endpoints[METRICS] = Endpoint(self.metrics_host or self.host, self.metrics_port)
        return endpoints

    @property
    def log_file(self) -> Path:
        return self.log_dir / "broker.log"

    def with_overrides(self, overrides: Mapping[str, str]) -> BrokerConfig:
        """Apply Kafka-named `key=value` overrides; an unknown key is a ConfigError."""
        # Values of several field types, each parsed for its key above.
        log_fields: dict[str, Any] = {}
        broker_fields: dict[str, Any] = {}
        security_settings: dict[str, str] = {}
        metrics_settings: dict[str, str] = {}
        cleaner_settings: dict[str, str] = {}
        transaction_settings: dict[str, str] = {}
        for key, raw in overrides.items():
            if key in CLEANER_KEYS:
                cleaner_settings[key] = raw
            elif key in TRANSACTION_KEYS:
                transaction_settings[key] = raw
            elif key in SECURITY_KEYS:
                security_settings[key] = raw
            elif key in METRICS_ACCESS_KEYS:
                metrics_settings[key] = raw
            elif key in _LOG_DEFAULT_KEYS:
                parse = _LOG_DEFAULT_PARSERS.get(key, _parse_int)
                log_fields[_LOG_DEFAULT_KEYS[key]] = parse(key, raw)
            elif key in _INTERVAL_KEYS:
                broker_fields[_INTERVAL_KEYS[key]] = _parse_int(key, raw)
            elif key == "min.insync.replicas":
                broker_fields["min_insync_replicas"] = _parse_int(key, raw)
            elif key == "compression.type":
                broker_fields["compression_type"] = parse_compression_type(key, raw)
            elif key in _TOPIC_DEFAULT_KEYS:
                broker_fields[_TOPIC_DEFAULT_KEYS[key]] = _parse_int(key, raw)
            elif key in _BOOLEAN_KEYS:
                broker_fields[_BOOLEAN_KEYS[key]] = _parse_bool(key, raw)
            elif key == OFFSETS_RETENTION_MINUTES_KEY:
                if "offsets.retention.ms" not in overrides:
                    broker_fields["offsets_retention_ms"] = _parse_int(key, raw) * 60_000
            else:
                known = ", ".join(sorted(BROKER_CONFIG_KEYS))
                raise ConfigError(f"unknown broker config {key!r}; known: {known}")
        log_defaults = replace(self.log_defaults, **log_fields)
        if security_settings:
            broker_fields["security"] = self.security.with_settings(security_settings)
        if metrics_settings:
            broker_fields["metrics_access"] = self.metrics_access.with_settings(metrics_settings)
        if cleaner_settings:
            broker_fields["cleaner"] = self.cleaner.with_settings(cleaner_settings)
        if transaction_settings:
            broker_fields["transactions"] = self.transactions.with_settings(transaction_settings)
        return replace(self, log_defaults=log_defaults, **broker_fields)

    def log_config_for(self, topic_configs: Mapping[str, str]) -> LogConfig:
        """The LogConfig of a topic: broker defaults with the topic's overrides applied."""
        parsed = parse_topic_configs(topic_configs)
        # Values of the log's keys, each parsed to its field's type.
        fields: dict[str, Any] = {
            TOPIC_LOG_FIELDS[k]: v for k, v in parsed.items() if k in TOPIC_LOG_FIELDS
        }
        return replace(self.log_defaults, **fields)

    def min_insync_for(self, topic_configs: Mapping[str, str]) -> int:
        raw = topic_configs.get("min.insync.replicas")
        if raw is None:
            return self.min_insync_replicas
        return int(TOPIC_CONFIG_PARSERS["min.insync.replicas"]("min.insync.replicas", raw))

    def compression_type_for(self, topic_configs: Mapping[str, str]) -> str:
        raw = topic_configs.get("compression.type")
        if raw is None:
            return self.compression_type
        return parse_compression_type("compression.type", raw)


def _parse_bool(key: str, raw: str) -> bool:
    if raw.strip().lower() not in ("true", "false"):
        raise ConfigError(f"broker config {key}={raw!r}: use true or false")
    return raw.strip().lower() == "true"


def _parse_int(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"broker config {key}={raw!r}: not an integer") from None
