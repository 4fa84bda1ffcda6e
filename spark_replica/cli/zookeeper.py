"""`replog zookeeper start|stop`: the embedded ZooKeeper server.

`start` runs in the foreground until interrupted (Ctrl-C or SIGTERM stops the server
cleanly), or with --detach leaves it running and records its PID in the directory, for
`stop` to find.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from spark_replica.zk.embedded import PID_FILE, STOP_TIMEOUT_S, EmbeddedZooKeeper, stop_pid

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
    stop = actions.add_parser("stop", help="stop a detached server")
    stop.add_argument(
        "--dir", type=Path, required=True, help="the data directory the server was started with"
    )
    zookeeper.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "stop":
        pid_file = args.dir / PID_FILE
        if not pid_file.exists():
            print(f"no ZooKeeper PID file in {args.dir}")
            return 1
        stop_pid(int(pid_file.read_text()), STOP_TIMEOUT_S)
        pid_file.unlink(missing_ok=True)
        print("ZooKeeper stopped.")
        return 0
    server = EmbeddedZooKeeper(args.port, args.dir.resolve())
    server.start()
    assert server.process is not None
    print(f"ZooKeeper listening on {server.connect_string} (pid {server.process.pid})", flush=True)
    if args.detach:
        return 0
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    try:
        while not stopped.wait(0.5):
            if server.process.poll() is not None:
                print("ZooKeeper exited on its own; see zookeeper.log")
                return 1
    finally:
        server.stop()
    print("ZooKeeper stopped.")
    return 0
