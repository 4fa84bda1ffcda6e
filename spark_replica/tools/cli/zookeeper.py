"""`replog zookeeper start|stop`: the embedded ZooKeeper server, or an ensemble of them.

`start` runs in the foreground until interrupted (Ctrl-C or SIGTERM stops the server
cleanly), or with --detach leaves it running and records its PID in the directory, for
`stop` to find. `start --ensemble N` runs N QuorumPeerMain nodes on free ports instead,
each in `node-<myid>` under the directory with its own PID file, and prints the connect
string naming them all; `stop` stops every node it finds there.

`lock-znodes` locks what a cluster made before zookeeper.set.acl was on
(spark_replica/zk/acl_lock.py), as Kafka's zookeeper-security-migration does.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from spark_replica.tools.cli.common import add_connection_options, zookeeper_session
from spark_replica.tools.launcher.cluster_dir import ClusterInfo, ZooKeeperNodeEntry
from spark_replica.tools.launcher.ensemble import (
    EnsembleNode,
    ZooKeeperEnsemble,
    node_mode,
    plan_ensemble,
    validate_node_count,
)
from spark_replica.tools.launcher.zookeeper import (
    PID_FILE,
    STOP_TIMEOUT_S,
    EmbeddedZooKeeper,
    stop_pid,
)
from spark_replica.zk.acl_lock import lock_cluster_znodes

DEFAULT_PORT = 2181


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    zookeeper = subparsers.add_parser("zookeeper", help="run the embedded ZooKeeper server")
    actions = zookeeper.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start a ZooKeeper server from pyspark's jars")
    start.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"client port (default {DEFAULT_PORT})"
    )
    start.add_argument("--dir", type=Path, required=True, help="data directory")
    start.add_argument("--detach", action="store_true", help="leave it running and return")
    start.add_argument(
        "--ensemble",
        type=int,
        metavar="N",
        help="run an ensemble of N nodes (odd, 1 to 7) on free ports instead of one server "
        "on --port (default: one server)",
    )
    stop = actions.add_parser("stop", help="stop a detached server")
    stop.add_argument(
        "--dir", type=Path, required=True, help="the data directory the server was started with"
    )
    lock = actions.add_parser(
        "lock-znodes",
        help="give every znode of the cluster that anyone may change the ACL "
        "zookeeper.set.acl gives new ones (run after the brokers restarted with it)",
    )
    add_connection_options(lock)
    zookeeper.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "lock-znodes":
        return _lock_znodes(args)
    if args.action == "stop":
        pid_files = [args.dir / PID_FILE, *sorted(args.dir.glob(f"node-*/{PID_FILE}"))]
        found = [pid_file for pid_file in pid_files if pid_file.exists()]
        if not found:
            print(f"no ZooKeeper PID file in {args.dir}")
            return 1
        for pid_file in found:
            stop_pid(int(pid_file.read_text()), STOP_TIMEOUT_S)
            pid_file.unlink(missing_ok=True)
        print("ZooKeeper stopped.")
        return 0
    if args.ensemble is not None:
        return _run_ensemble(args)
    server = EmbeddedZooKeeper(args.port, args.dir.resolve())
    server.start()
    assert server.process is not None
    print(f"ZooKeeper listening on {server.connect_string} (pid {server.process.pid})", flush=True)
    if args.detach:
        return 0
    process = server.process
    return _serve_until_signal(
        lambda: None if process.poll() is None else "ZooKeeper exited on its own",
        server.stop,
    )


def _lock_znodes(args: argparse.Namespace) -> int:
    with zookeeper_session(args, "locking znodes") as zk:
        outcome = lock_cluster_znodes(zk)
    locked = len(outcome.locked)
    print(f"Locked {locked} znode(s): only the cluster's ZooKeeper login may change them.")
    for path in outcome.refused:
        print(
            f"replog: {path}: anyone may change it, but not its ACL with this login",
            file=sys.stderr,
        )
    return 1 if outcome.refused else 0


def _run_ensemble(args: argparse.Namespace) -> int:
    validate_node_count(args.ensemble, "--ensemble")
    ensemble = ZooKeeperEnsemble.on_free_ports(args.dir.resolve(), args.ensemble)
    ensemble.start()
    for myid, mode in ensemble.modes().items():
        process = ensemble.processes[myid]
        print(f"node {myid} on {process.node.address} (pid {process.pid}, {mode})", flush=True)
    print(f"ZooKeeper ensemble: {ensemble.connect_string}", flush=True)
    if args.detach:
        return 0

    def exited() -> str | None:
        gone = [myid for myid, p in ensemble.processes.items() if not p.running()]
        return f"ZooKeeper node(s) {gone} exited on their own" if gone else None

    return _serve_until_signal(exited, ensemble.stop)


def _serve_until_signal(exited: Callable[[], str | None], stop: Callable[[], None]) -> int:
    """Run in the foreground until SIGINT/SIGTERM (exit 0) or until the server dies on its
    own (exit 1); the server is stopped either way."""
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    try:
        while not stopped.wait(0.5):
            if (why := exited()) is not None:
                print(f"{why}; see zookeeper.log")
                return 1
    finally:
        stop()
    print("ZooKeeper stopped.")
    return 0


# `replog up --zookeeper-nodes N`: the cluster's ensemble, recorded in cluster.json.


def plan_cluster_nodes(root: Path, host: str, ports: list[int]) -> list[ZooKeeperNodeEntry]:
    """The nodes of a new cluster's ensemble, under `root/zookeeper`, each taking three of
    `ports` (client, quorum, election)."""
    return [
        ZooKeeperNodeEntry(n.myid, n.client_port, n.quorum_port, n.election_port, str(n.dir), None)
        for n in plan_ensemble(root / "zookeeper", host, ports)
    ]


def cluster_ensemble(info: ClusterInfo, host: str) -> ZooKeeperEnsemble:
    return ZooKeeperEnsemble(
        [
            EnsembleNode(n.id, host, n.port, n.quorum_port, n.election_port, Path(n.dir))
            for n in info.zookeeper_nodes
        ]
    )


def start_cluster_ensemble(info: ClusterInfo, host: str, timeout_s: float) -> ZooKeeperEnsemble:
    """Start the recorded nodes together (each zoo.cfg is written anew from the recorded
    ports), wait for a quorum, record their PIDs and the connect string."""
    ensemble = cluster_ensemble(info, host)
    ensemble.start(timeout_s)
    for entry in info.zookeeper_nodes:
        entry.pid = ensemble.processes[entry.id].pid
    info.zookeeper = ensemble.connect_string
    return ensemble


def cluster_node_modes(info: ClusterInfo, host: str) -> list[dict[str, object]]:
    """Each node's pid, whether it runs, and its mode (leader/follower; None: not serving);
    none for a cluster without an ensemble."""
    if not info.zookeeper_nodes:
        return []
    ensemble = cluster_ensemble(info, host)
    return [
        {
            "id": entry.id,
            "address": f"{host}:{entry.port}",
            "pid": entry.pid,
            "running": entry.running(),
            "mode": node_mode(ensemble.node(entry.id)) if entry.running() else None,
        }
        for entry in info.zookeeper_nodes
    ]


def print_cluster_nodes(connect: str, nodes: list[dict[str, object]]) -> None:
    print(f"ZooKeeper:  {connect} (embedded ensemble)")
    for node in nodes:
        state = f"pid {node['pid']}, {node['mode'] or 'not serving'}"
        print(f"  node {node['id']}: {node['address']} ({state if node['running'] else 'stopped'})")
