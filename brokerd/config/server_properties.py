"""Kafka's `server.properties`, read into what a replog broker takes (pure: no file I/O).

An operator's Kafka file should work with as few edits as possible, and no setting may
pass unread by mistake. So every key falls in exactly one of these groups:

- identity: `broker.id`, `log.dirs` (or `log.dir`; one directory), `zookeeper.connect`,
  `listeners`, `advertised.listeners`, and replog's `metrics.port` (Kafka has no such key;
  -1 off, 0 any port; `METRICS://host:port` in listeners says the same with a host);
- Kafka's broker configs that replog implements (brokerd.config.broker.BROKER_CONFIG_KEYS), plus
  `log.retention.hours|minutes` and `log.roll.hours`, turned into their `.ms` key with
  Kafka's precedence (ms, then minutes, then hours);
- the broker's own log: `broker.log.*` (brokerd.logging_setup);
- Kafka keys replog knows but has no use for (thread pools, socket buffers, the internal
  topics' settings...): accepted, and the broker logs one warning line for each;
- Kafka keys whose meaning replog cannot honour: a ConfigError saying what to do instead;
- anything else, a typo most likely: a ConfigError naming the key.

Listeners (brokerd.listeners). replog serves two protocols: its own (which replog's
client and Spark use) and Kafka's, and metrics over HTTP. In `listeners`,
`REPLOG://host:port` is the first, `KAFKA://host:port` the second, `METRICS://host:port`
the third; each binds its own host. A listener named after a security protocol, as in
Kafka's own file (`PLAINTEXT://:9092`, `SSL://...`, `SASL_SSL://...`), keeps Kafka's
meaning: Kafka clients connect there. It is the Kafka listener, and its name sets
`listener.security.protocol`, which both protocols' listeners share. An empty host means
the broker's `--host` (default 127.0.0.1). `advertised.listeners` takes the same names
and says what the broker registers and clients connect to.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from brokerd.config.broker import BROKER_CONFIG_KEYS, BrokerConfig
from brokerd.config.listeners import KAFKA, METRICS, REPLOG, Endpoint, parse_listener_list
from brokerd.config.security import KEYS as SECURITY_KEYS
from brokerd.logging_setup import PROPERTY_PREFIX as LOG_PREFIX
from brokerd.logging_setup import LogSettings
from spark_replica.errors import ConfigError
from spark_replica.zk.session import split_connect_string

METRICS_PORT_KEY = "metrics.port"
LISTENERS_KEY = "listeners"
ADVERTISED_LISTENERS_KEY = "advertised.listeners"
IDENTITY_KEYS = (
    "broker.id",
    "log.dirs",
    "log.dir",
    "zookeeper.connect",
    LISTENERS_KEY,
    ADVERTISED_LISTENERS_KEY,
)
SECURITY_PROTOCOL_KEY = "listener.security.protocol"

# Kafka's time keys in coarser units: (key, milliseconds per unit), finest first.
_TIME_SYNONYMS = {
    "log.retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "log.roll.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
}
_COARSE_TIME_KEYS = frozenset(
    key for synonyms in _TIME_SYNONYMS.values() for key, unit in synonyms if unit > 1
)

IGNORED_KEYS = frozenset(
    {
        "auto.create.topics.enable",
        "background.threads",
        "broker.id.generation.enable",
        "broker.rack",
        "delete.topic.enable",
        "inter.broker.protocol.version",
        "log.index.size.max.bytes",
        "log.message.format.version",
        "log.preallocate",
        "log.segment.delete.delay.ms",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "num.replica.fetchers",
        "queued.max.requests",
        "replica.fetch.max.bytes",
        "replica.fetch.wait.max.ms",
        "replica.socket.receive.buffer.bytes",
        "replica.socket.timeout.ms",
        "reserved.broker.max.id",
        "socket.receive.buffer.bytes",
        "socket.send.buffer.bytes",
        "zookeeper.connection.timeout.ms",
    }
)

_LISTENER_ADVICE = (
    "replog's listeners share one security protocol: name it with "
    f"{SECURITY_PROTOCOL_KEY} or by a listener named after it (SSL://host:port)"
)
REFUSED_KEYS = {
    "listener.security.protocol.map": _LISTENER_ADVICE,
    "inter.broker.listener.name": "brokers talk to each other on the REPLOG listener",
    "security.inter.broker.protocol": _LISTENER_ADVICE,
    "unclean.leader.election.enable": "set it per topic: replog configs alter",
    "port": "Kafka removed it in 3.0: use listeners",
    "host.name": "Kafka removed it in 3.0: use listeners",
}


@dataclass(frozen=True)
class ServerProperties:
    """A properties file's settings by group; None where the file is silent."""

    broker_id: int | None = None
    log_dir: Path | None = None
    zookeeper: str | None = None
    host: str | None = None  # of the REPLOG listener
    port: int | None = None
    kafka_host: str | None = None
    kafka_port: int | None = None
    metrics_host: str | None = None
    metrics_port: int | None = None
    advertised_listeners: dict[str, Endpoint] = field(default_factory=dict)
    broker_configs: dict[str, str] = field(default_factory=dict)
    log_settings: dict[str, str] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()

    @property
    def identity_keys(self) -> list[str]:
        """Which identity settings the file gave (for refusing them where N brokers share it)."""
        given = {
            "broker.id": self.broker_id,
            "log.dirs": self.log_dir,
            "zookeeper.connect": self.zookeeper,
            LISTENERS_KEY: self.port if self.port is not None else self.kafka_port,
            METRICS_PORT_KEY: self.metrics_port,
            ADVERTISED_LISTENERS_KEY: self.advertised_listeners or None,
        }
        return [key for key, value in given.items() if value is not None]


def parse_server_properties(properties: Mapping[str, str]) -> ServerProperties:
    """Sort and check every key; ConfigError on the first bad or unknown one."""
    broker_configs: dict[str, str] = {}
    log_settings: dict[str, str] = {}
    ignored: list[str] = []
    for key, value in properties.items():
        if key in IDENTITY_KEYS or key == METRICS_PORT_KEY or key in _COARSE_TIME_KEYS:
            continue
        if key in BROKER_CONFIG_KEYS:
            broker_configs[key] = value
        elif key.startswith(LOG_PREFIX):
            log_settings[key] = value
        elif key in IGNORED_KEYS:
            ignored.append(key)
        elif key in REFUSED_KEYS:
            raise ConfigError(f"{key} is not supported: {REFUSED_KEYS[key]}")
        else:
            raise ConfigError(_unknown(key))
    for target, synonyms in _TIME_SYNONYMS.items():
        for key, unit in synonyms:
            if key in properties:
                broker_configs[target] = _in_ms(key, properties[key], unit)
                break
    bound = parse_listener_list(LISTENERS_KEY, properties.get(LISTENERS_KEY, ""))
    advertised = parse_listener_list(
        ADVERTISED_LISTENERS_KEY, properties.get(ADVERTISED_LISTENERS_KEY, "")
    )
    for entry in [*bound, *advertised]:
        if entry.security_protocol is not None:
            _agree_on_protocol(broker_configs, entry.security_protocol)
    endpoints = {e.listener: e.endpoint for e in bound}
    metrics_port = _optional_int(properties, METRICS_PORT_KEY)
    if METRICS in endpoints:
        if metrics_port not in (None, endpoints[METRICS].port):
            raise ConfigError(
                f"{METRICS_PORT_KEY}={metrics_port} and listeners' METRICS://"
                f"{endpoints[METRICS]} disagree: give the metrics port once"
            )
        metrics_port = endpoints[METRICS].port
    zookeeper = properties.get("zookeeper.connect")
    if zookeeper is not None:
        split_connect_string(zookeeper)
    return ServerProperties(
        broker_id=_optional_int(properties, "broker.id"),
        log_dir=_log_dir(properties),
        zookeeper=zookeeper,
        host=_host(endpoints.get(REPLOG)),
        port=_port(endpoints.get(REPLOG)),
        kafka_host=_host(endpoints.get(KAFKA)),
        kafka_port=_port(endpoints.get(KAFKA)),
        metrics_host=_host(endpoints.get(METRICS)),
        metrics_port=metrics_port,
        advertised_listeners={e.listener: e.endpoint for e in advertised},
        broker_configs=broker_configs,
        log_settings=log_settings,
        ignored=tuple(ignored),
    )


def _agree_on_protocol(broker_configs: dict[str, str], protocol: str) -> None:
    """A listener named after a security protocol sets it; every such name must agree."""
    configured = broker_configs.get(SECURITY_PROTOCOL_KEY, protocol).strip().upper()
    if configured != protocol:
        raise ConfigError(
            f"a listener is named {protocol} but the security protocol is {configured} "
            f"({SECURITY_PROTOCOL_KEY} or another listener's name): replog's listeners share "
            "one security protocol"
        )
    broker_configs[SECURITY_PROTOCOL_KEY] = protocol


def _host(endpoint: Endpoint | None) -> str | None:
    """None where the file gives no host: the broker's --host (or default) applies."""
    if endpoint is None or not endpoint.host:
        return None
    return endpoint.host


def _port(endpoint: Endpoint | None) -> int | None:
    return None if endpoint is None else endpoint.port


def cluster_configs(properties: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """The settings every broker of a local cluster shares, checked, and the ignored keys.

    `replog up` gives each broker its identity and ports, and `up --security` writes the
    security settings, so shared settings naming any of them are refused. Values are
    checked here, so that a bad one stops `up` before it starts anything.
    """
    parsed = parse_server_properties(properties)
    identity = parsed.identity_keys
    if identity:
        raise ConfigError(
            f"{', '.join(identity)} cannot be shared by every broker: `replog up` gives each "
            "broker its id, log dir, ZooKeeper and ports; leave them out of --config"
        )
    security = sorted(k for k in parsed.broker_configs if k in SECURITY_KEYS)
    if security:
        raise ConfigError(
            f"{', '.join(security)}: `replog up --security MODE` sets up the cluster's "
            "security; leave security settings out of --config"
        )
    BrokerConfig(0, Path("."), "localhost:2181").with_overrides(parsed.broker_configs)
    LogSettings().with_properties(parsed.log_settings)
    kept = {k: v for k, v in properties.items() if k not in parsed.ignored}
    return kept, parsed.ignored


def _unknown(key: str) -> str:
    known = [*IDENTITY_KEYS, METRICS_PORT_KEY, *BROKER_CONFIG_KEYS, *_COARSE_TIME_KEYS]
    known += [*IGNORED_KEYS, *REFUSED_KEYS]
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown broker config {key!r}{hint}"


def _optional_int(properties: Mapping[str, str], key: str) -> int | None:
    raw = properties.get(key)
    return None if raw is None else _int(key, raw)


def _int(key: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"{key}={raw!r}: not an integer") from None


def _in_ms(key: str, raw: str, unit: int) -> str:
    """Kafka's -1 (no limit) stays -1 in every unit."""
    value = _int(key, raw)
    return str(value if value < 0 else value * unit)


def _log_dir(properties: Mapping[str, str]) -> Path | None:
    key = "log.dirs" if "log.dirs" in properties else "log.dir"
    raw = properties.get(key)
    if raw is None:
        return None
    dirs = [d.strip() for d in raw.split(",") if d.strip()]
    if len(dirs) != 1:
        raise ConfigError(f"{key}={raw!r}: a replog broker keeps its logs in one directory")
    return Path(dirs[0])
