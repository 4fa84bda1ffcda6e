"""A real ZooKeeper ensemble: N QuorumPeerMain processes from the jars in the pyspark wheel.

Each node is a process of its own with a directory of its own (``node-<myid>``): the
generated ``zoo.cfg`` naming every member (``server.N=host:quorumPort:electionPort``),
``data/myid``, ``zookeeper.log`` and ``zookeeper.pid``. Nodes are started, stopped and
killed one by one by their own PIDs, so tests can take a quorum away and give it back.

The configuration is pure (``plan_ensemble``, ``render_config``, ``connect_string``,
``parse_mode``) and separate from the processes. A node counts as serving when it
answers the ``srvr`` four-letter word with a mode (leader, follower, or standalone for a
one-node ensemble); a node without a quorum answers that it is not serving.

Leader election gives up waiting for silent peers after at most two seconds (ZooKeeper's
default grows to a minute), so a node left alone notices returning peers quickly.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_replica.errors import ConfigError, ZooKeeperError
from spark_replica.tools.launcher.brokers import free_port
from spark_replica.tools.launcher.zookeeper import (
    LOG_FILE,
    PID_FILE,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    spawn_server,
    stop_pid,
)

QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
CONFIG_FILE = "zoo.cfg"
MYID_FILE = "myid"
MAX_NODES = 7
DEFAULT_TICK_MS = 500
SERVING_MODES = ("leader", "follower", "standalone")
MAX_NOTIFICATION_INTERVAL_MS = 2000
FOUR_LETTER_TIMEOUT_S = 1.0


def validate_node_count(count: int, option: str = "--zookeeper-nodes") -> None:
    """An ensemble has an odd number of nodes (an even one tolerates no more failures than
    the odd one below it), at most MAX_NODES."""
    if not 1 <= count <= MAX_NODES or count % 2 == 0:
        raise ConfigError(
            f"{option} must be an odd number from 1 to {MAX_NODES} (a majority must "
            f"survive failures), not {count}"
        )


@dataclass(frozen=True)
class EnsembleNode:
    myid: int
    host: str
    client_port: int
    quorum_port: int
    election_port: int
    dir: Path

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def config_path(self) -> Path:
        return self.dir / CONFIG_FILE

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"


def plan_ensemble(root: Path, host: str, ports: Sequence[int]) -> list[EnsembleNode]:
    """Nodes 1..N under `root`, each taking three of `ports` (client, quorum, election)."""
    if len(ports) % 3 != 0 or len(set(ports)) != len(ports):
        raise ConfigError(f"an ensemble needs three distinct ports per node, got {list(ports)}")
    count = len(ports) // 3
    validate_node_count(count)
    return [
        EnsembleNode(
            myid,
            host,
            ports[3 * (myid - 1)],
            ports[3 * (myid - 1) + 1],
            ports[3 * (myid - 1) + 2],
            root / f"node-{myid}",
        )
        for myid in range(1, count + 1)
    ]


def connect_string(nodes: Sequence[EnsembleNode]) -> str:
    """Every member, so a client reaches whichever nodes still serve."""
    return ",".join(node.address for node in nodes)


def render_config(
    node: EnsembleNode, nodes: Sequence[EnsembleNode], tick_ms: int = DEFAULT_TICK_MS
) -> str:
    """The zoo.cfg of `node`: its own client port and data dir, and every member.

    Session timeouts are allowed from two ticks up to a minute, so tests can use
    short ones; the admin HTTP server is off (it would take port 8080 on every node).
    """
    lines = [
        f"tickTime={tick_ms}",
        "initLimit=10",
        "syncLimit=5",
        f"dataDir={node.data_dir}",
        f"clientPort={node.client_port}",
        f"clientPortAddress={node.host}",
        "admin.enableServer=false",
        "4lw.commands.whitelist=ruok,srvr,mntr,stat",
        "maxClientCnxns=0",
        f"minSessionTimeout={2 * tick_ms}",
        "maxSessionTimeout=60000",
        *(
            f"server.{member.myid}={member.host}:{member.quorum_port}:{member.election_port}"
            for member in nodes
        ),
    ]
    return "\n".join(lines) + "\n"


def parse_mode(srvr_reply: str) -> str | None:
    """The `Mode:` of a `srvr` reply; None for a node that is not serving."""
    for line in srvr_reply.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() == "Mode":
            return value.strip()
    return None


def four_letter(host: str, port: int, word: str, timeout_s: float = FOUR_LETTER_TIMEOUT_S) -> str:
    """The reply to a four-letter word; empty when the node cannot be reached."""
    chunks = []
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(word.encode())
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        pass
    return b"".join(chunks).decode("utf-8", "replace")


def node_mode(node: EnsembleNode) -> str | None:
    """leader, follower or standalone; None when the node is down or has no quorum."""
    return parse_mode(four_letter(node.host, node.client_port, "srvr"))


class NodeProcess:
    """One member's process: started without waiting, stopped or killed by its PID."""

    def __init__(self, node: EnsembleNode, nodes: Sequence[EnsembleNode], tick_ms: int) -> None:
        self.node = node
        self.nodes = list(nodes)
        self.tick_ms = tick_ms
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        if self.running():
            raise ZooKeeperError(f"ZooKeeper node {self.node.myid} is already running")
        node = self.node
        node.data_dir.mkdir(parents=True, exist_ok=True)
        (node.data_dir / MYID_FILE).write_text(f"{node.myid}\n")
        node.config_path.write_text(render_config(node, self.nodes, self.tick_ms))
        self.process = spawn_server(
            QUORUM_MAIN_CLASS,
            node.config_path,
            node.dir,
            jvm_flags=[
                f"-Dzookeeper.fastleader.maxNotificationInterval={MAX_NOTIFICATION_INTERVAL_MS}"
            ],
        )

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (SIGKILL after `timeout_s`); a no-op when it is not running."""
        if self.process is not None:
            stop_pid(self.process.pid, timeout_s, self.process)
            self.process = None
        (self.node.dir / PID_FILE).unlink(missing_ok=True)

    def kill(self) -> None:
        """SIGKILL: a crash, as a test wants it."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT_S)
            self.process = None
        (self.node.dir / PID_FILE).unlink(missing_ok=True)


class ZooKeeperEnsemble:
    """The members of one ensemble; start() returns once a quorum serves."""

    def __init__(self, nodes: Sequence[EnsembleNode], tick_ms: int = DEFAULT_TICK_MS) -> None:
        validate_node_count(len(nodes))
        self.nodes = list(nodes)
        self.processes = {n.myid: NodeProcess(n, nodes, tick_ms) for n in nodes}

    @classmethod
    def on_free_ports(
        cls, root: Path, count: int, host: str = "127.0.0.1", tick_ms: int = DEFAULT_TICK_MS
    ) -> ZooKeeperEnsemble:
        validate_node_count(count, "an ensemble's node count")
        ports: set[int] = set()
        while len(ports) < 3 * count:
            ports.add(free_port(host))
        return cls(plan_ensemble(root, host, sorted(ports)), tick_ms)

    @property
    def connect_string(self) -> str:
        return connect_string(self.nodes)

    def node(self, myid: int) -> EnsembleNode:
        return self.processes[myid].node

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start every node and wait for a quorum; stop them all if it does not come."""
        try:
            for process in self.processes.values():
                process.start()
            self.wait_for_quorum(timeout_s)
        except BaseException:
            self.stop()
            raise

    def start_node(self, myid: int) -> None:
        self.processes[myid].start()

    def stop_node(self, myid: int) -> None:
        self.processes[myid].stop()

    def kill_node(self, myid: int) -> None:
        self.processes[myid].kill()

    def modes(self) -> dict[int, str | None]:
        return {myid: node_mode(p.node) for myid, p in self.processes.items()}

    def leader(self) -> int | None:
        """The myid of the node that says it leads (or serves alone), if any."""
        for myid, mode in self.modes().items():
            if mode in ("leader", "standalone"):
                return myid
        return None

    def wait_for_quorum(self, timeout_s: float = START_TIMEOUT_S) -> dict[int, str | None]:
        """Wait until every running node serves (one leader among them); return the modes.

        A node that exits on its own while waited for is an error naming its log.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            for myid, process in self.processes.items():
                if process.process is not None and process.process.poll() is not None:
                    raise ZooKeeperError(
                        f"ZooKeeper node {myid} exited with code {process.process.returncode}; "
                        f"see {process.node.dir / LOG_FILE}"
                    )
            modes = self.modes()
            running = [myid for myid, p in self.processes.items() if p.running()]
            serving = [modes[myid] for myid in running if modes[myid] in SERVING_MODES]
            if (
                running
                and len(serving) == len(running)
                and serving.count("follower") < len(serving)
            ):
                return modes
            if time.monotonic() > deadline:
                raise ZooKeeperError(
                    f"the ZooKeeper ensemble {self.connect_string} had no quorum within "
                    f"{timeout_s:.0f} s (modes {modes})"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        for process in self.processes.values():
            process.stop()

    def __enter__(self) -> ZooKeeperEnsemble:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
