"""The cluster directory: where `replog up` records the local cluster it started.

`cluster.json` in the directory names the ZooKeeper connect string, the embedded
ZooKeeper (if `up` started one; or each node of the ensemble it started), every broker
with its address, Kafka-listener port (-1: off; a file from before the Kafka listener has
none, and its next `up` picks them), metrics port (likewise), PID and log dir, and the
security mode (`security.protocol` in lower case; a file without one is plaintext, as
every cluster was before there was a choice).
A cluster made with `up --netns` also records its network: the hosts' addresses and
namespaces, and the cuts `replog net` made.
Every other command reads it to find the cluster, so it is written atomically (a
temporary file renamed over the old one): a reader never sees half a file.

A recorded PID is only trusted while the process behind it is still the one that was
recorded: on Linux its command line must still name the broker id (or ZooKeeper's main
class), so a PID reused by an unrelated process is never signalled or reported alive.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spark_replica.errors import ConfigError, ReplogError
from spark_replica.tools.launcher.ensemble import CONFIG_FILE, QUORUM_MAIN_CLASS
from spark_replica.tools.launcher.zookeeper import MAIN_CLASS
from spark_replica.tools.netns.topology import Topology

DEFAULT_DIR = Path(".replog")
CLUSTER_FILE = "cluster.json"
LOCK_FILE = "cluster.lock"
# A secure cluster's client settings for its admin (spark_replica.tools.launcher.local_security).
ADMIN_PROPERTIES = "admin.properties"
PLAINTEXT_MODE = "plaintext"
SECURITY_MODES = (PLAINTEXT_MODE, "ssl", "sasl_plaintext", "sasl_ssl")


@dataclass
class EmbeddedZooKeeperEntry:
    port: int
    dir: str
    pid: int | None

    def running(self) -> bool:
        return self.pid is not None and process_running(self.pid, [MAIN_CLASS])


@dataclass
class BrokerEntry:
    id: int
    host: str
    port: int
    pid: int | None
    log_dir: str
    kafka_port: int = -1
    metrics_port: int = -1

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def kafka_address(self) -> str | None:
        return None if self.kafka_port < 0 else f"{self.host}:{self.kafka_port}"

    @property
    def metrics_url(self) -> str | None:
        """Where the broker serves Prometheus text, None when metrics are off."""
        return None if self.metrics_port < 0 else f"http://{self.host}:{self.metrics_port}/metrics"

    def running(self) -> bool:
        return self.pid is not None and process_running(
            self.pid, ["brokerd", "--broker-id", str(self.id)]
        )


@dataclass
class NetworkEntry:
    """The network of hosts of a cluster made with `up --netns`: its plan as
    Topology.to_json gives it (None until `up` first made it), and the cuts in force, each
    [source, target], so that `replog net` shows and heals them and `down` removes it."""

    topology: dict[str, Any] | None = None
    cuts: list[list[str]] = field(default_factory=list)

    def plan(self) -> Topology | None:
        return None if self.topology is None else Topology.from_json(self.topology)


@dataclass
class ZooKeeperNodeEntry:
    """One node of the ensemble `up --zookeeper-nodes N` runs (N > 1)."""

    id: int
    port: int
    quorum_port: int
    election_port: int
    dir: str
    pid: int | None

    def running(self) -> bool:
        config = str(Path(self.dir) / CONFIG_FILE)
        return self.pid is not None and process_running(self.pid, [QUORUM_MAIN_CLASS, config])


RecordedProcess = BrokerEntry | EmbeddedZooKeeperEntry | ZooKeeperNodeEntry


@dataclass
class ClusterInfo:
    zookeeper: str
    embedded_zookeeper: EmbeddedZooKeeperEntry | None
    brokers: list[BrokerEntry]
    overrides: dict[str, str] = field(default_factory=dict)
    security: str = PLAINTEXT_MODE
    kafka: bool = True  # whether the brokers run the Kafka-protocol listener
    metrics: bool = True  # whether the brokers serve Prometheus metrics
    network: NetworkEntry | None = None  # hosts of their own (`up --netns`)
    zookeeper_nodes: list[ZooKeeperNodeEntry] = field(default_factory=list)  # an ensemble's

    @property
    def secure(self) -> bool:
        return self.security != PLAINTEXT_MODE

    def broker(self, broker_id: int, directory: Path) -> BrokerEntry:
        for broker in self.brokers:
            if broker.id == broker_id:
                return broker
        known = ", ".join(str(b.id) for b in self.brokers)
        raise ConfigError(f"no broker {broker_id} in the cluster in {directory} (brokers: {known})")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in sorted(self.brokers, key=lambda b: b.id))

    @property
    def kafka_bootstrap_servers(self) -> str | None:
        """The Kafka listeners' addresses, None when the cluster runs without them."""
        addresses = [b.kafka_address for b in sorted(self.brokers, key=lambda b: b.id)]
        if not self.kafka or None in addresses:
            return None
        return ",".join(a for a in addresses if a is not None)

    def processes(self) -> list[RecordedProcess]:
        zk = self.embedded_zookeeper
        return [*self.brokers, *([] if zk is None else [zk]), *self.zookeeper_nodes]

    def running_processes(self) -> list[str]:
        """What of this cluster still runs, in words, for refusing to start it twice."""
        running = [f"broker {b.id} (pid {b.pid})" for b in self.brokers if b.running()]
        zk = self.embedded_zookeeper
        if zk is not None and zk.running():
            running.append(f"ZooKeeper (pid {zk.pid})")
        running += [
            f"ZooKeeper node {n.id} (pid {n.pid})" for n in self.zookeeper_nodes if n.running()
        ]
        return running


def exists(directory: Path) -> bool:
    return (directory / CLUSTER_FILE).is_file()


def load(directory: Path) -> ClusterInfo:
    """Read the cluster file; ConfigError saying what to do when there is none."""
    path = directory / CLUSTER_FILE
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise _no_cluster(directory) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is not a readable replog cluster file: {exc}") from exc
    try:
        return _decode(document)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{path} is not a valid replog cluster file: {exc!r}") from exc


def _no_cluster(directory: Path) -> ConfigError:
    return ConfigError(
        f"no cluster in {directory}: run `replog up --dir {directory}` first "
        "or pass --bootstrap/--zookeeper"
    )


def _decode(document: dict[str, Any]) -> ClusterInfo:
    zk = document["embedded_zookeeper"]
    security = str(document.get("security", PLAINTEXT_MODE))
    if security not in SECURITY_MODES:
        raise ValueError(f"unknown security mode {security!r}")
    return ClusterInfo(
        zookeeper=str(document["zookeeper"]),
        embedded_zookeeper=None
        if zk is None
        else EmbeddedZooKeeperEntry(int(zk["port"]), str(zk["dir"]), _pid(zk["pid"])),
        brokers=[
            BrokerEntry(
                int(b["id"]),
                str(b["host"]),
                int(b["port"]),
                _pid(b["pid"]),
                str(b["log_dir"]),
                int(b.get("kafka_port", -1)),
                int(b.get("metrics_port", -1)),
            )
            for b in document["brokers"]
        ],
        overrides={str(k): str(v) for k, v in document.get("overrides", {}).items()},
        security=security,
        kafka=bool(document.get("kafka", True)),
        metrics=bool(document.get("metrics", True)),
        network=_network(document.get("network")),
        zookeeper_nodes=[
            ZooKeeperNodeEntry(
                int(n["id"]),
                int(n["port"]),
                int(n["quorum_port"]),
                int(n["election_port"]),
                str(n["dir"]),
                _pid(n["pid"]),
            )
            for n in document.get("zookeeper_nodes", [])
        ],
    )


def _network(document: Any) -> NetworkEntry | None:
    if document is None:
        return None
    topology = document["topology"]
    cuts = [[str(source), str(target)] for source, target in document["cuts"]]
    return NetworkEntry(None if topology is None else dict(topology), cuts)


def _pid(value: Any) -> int | None:
    return None if value is None else int(value)


def save(directory: Path, info: ClusterInfo) -> None:
    """Write the cluster file atomically: a temporary file, flushed, renamed over it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CLUSTER_FILE
    tmp = path.with_name(f".{CLUSTER_FILE}.{os.getpid()}.tmp")
    with tmp.open("w") as out:
        json.dump(asdict(info), out, indent=2)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def forget(directory: Path) -> None:
    """Remove the cluster file (the data in the directory stays for a later `up`)."""
    (directory / CLUSTER_FILE).unlink(missing_ok=True)


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold the directory's lock, so two commands never change the cluster file at once.

    The directory must exist: only `up` creates one, the other commands report its absence.
    """
    if not directory.is_dir():
        raise _no_cluster(directory)
    with (directory / LOCK_FILE).open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"another replog command is changing the cluster in {directory}; try again"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def running_bootstrap(directory: Path) -> list[tuple[str, int]]:
    """The addresses of the cluster's running brokers: where commands without flags go."""
    info = load(directory)
    running = [(b.host, b.port) for b in sorted(info.brokers, key=lambda b: b.id) if b.running()]
    if not running:
        raise ConfigError(
            f"the cluster in {directory} is not running: run `replog up --dir {directory}`"
        )
    return running


def running_kafka_bootstrap(directory: Path) -> str:
    """The Kafka listeners of the cluster's running brokers, as `host:port,host:port`."""
    info = load(directory)
    if info.kafka_bootstrap_servers is None:
        raise ConfigError(
            f"the brokers of the cluster in {directory} run no Kafka listener: "
            f"run `replog down --dir {directory}` and `replog up --dir {directory} --kafka`"
        )
    running = [
        b.kafka_address
        for b in sorted(info.brokers, key=lambda b: b.id)
        if b.kafka_address is not None and b.running()
    ]
    if not running:
        raise ConfigError(
            f"the cluster in {directory} is not running: run `replog up --dir {directory}`"
        )
    return ",".join(running)


def process_running(pid: int, argv_marker: Sequence[str]) -> bool:
    """True when `pid` is a live (not zombie) process whose argv holds `argv_marker` in a row.

    Without /proc (not Linux) only liveness can be checked.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    proc = Path("/proc") / str(pid)
    try:
        stat = (proc / "stat").read_text()
        cmdline = (proc / "cmdline").read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return True
    if stat.rpartition(")")[2].split()[:1] == ["Z"]:
        return False
    needle = "\0" + "\0".join(argv_marker) + "\0"
    return needle in "\0" + cmdline


def stop_processes(processes: Sequence[RecordedProcess], signum: int, timeout_s: float) -> None:
    """Signal every process at once, wait until each is gone (SIGKILL after the timeout),
    and forget its PID. They are not our children, so liveness is polled, not waited for."""
    for process in processes:
        _send(process, signum)
    deadline = time.monotonic() + timeout_s
    while any(p.running() for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    for process in processes:
        if process.running():
            _send(process, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while any(p.running() for p in processes):
        if time.monotonic() > deadline:
            still = ", ".join(str(p.pid) for p in processes if p.running())
            raise ReplogError(f"process(es) {still} did not exit even after SIGKILL")
        time.sleep(0.05)
    for process in processes:
        process.pid = None


def _send(process: RecordedProcess, signum: int) -> None:
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signum)
