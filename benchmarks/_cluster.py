"""The processes a benchmark runs against: one embedded ZooKeeper and one broker.

``local_cluster()`` starts both in a fresh temporary directory and stops both, each by its own
PID (broker first, then ZooKeeper), when the ``with`` block ends: normally, on an error, on
Ctrl-C or on SIGTERM. While stopping, SIGINT and SIGTERM are ignored so that a second signal
cannot leave a process behind; each stop is bounded (SIGTERM, then SIGKILL after a timeout).
"""

from __future__ import annotations

import contextlib
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from spark_replica.launcher import BrokerProcess, free_port
from spark_replica.zk.embedded import EmbeddedZooKeeper

BROKER_ID = 1


@dataclass(frozen=True)
class LocalCluster:
    bootstrap: list[tuple[str, int]]
    broker_pid: int


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def local_cluster() -> Iterator[LocalCluster]:
    """Start ZooKeeper and broker 1 on loopback; yield how to reach the broker."""
    previous_sigint = signal.getsignal(signal.SIGINT)
    previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with tempfile.TemporaryDirectory(prefix="replog-bench-") as tmp:
            root = Path(tmp)
            zookeeper = EmbeddedZooKeeper(free_port(), root / "zookeeper")
            broker = BrokerProcess(
                BROKER_ID, free_port(), root / "broker", zookeeper.connect_string
            )
            try:
                zookeeper.start()
                broker.start()
                assert broker.pid is not None
                yield LocalCluster([(broker.host, broker.port)], broker.pid)
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                try:
                    broker.stop()
                finally:
                    zookeeper.stop()
    finally:
        signal.signal(signal.SIGINT, previous_sigint)
        signal.signal(signal.SIGTERM, previous_sigterm)
