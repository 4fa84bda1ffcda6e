"""The processes a benchmark runs against: one embedded ZooKeeper and one or more brokers.

``local_cluster()`` starts ZooKeeper and brokers 1..N in a fresh temporary directory and stops
every one of them, each by its own PID (brokers first, then ZooKeeper), when the ``with`` block
ends: normally, on an error, on Ctrl-C or on SIGTERM. While stopping, SIGINT and SIGTERM are
ignored so that a second signal cannot leave a process behind; each stop is bounded (SIGTERM,
then SIGKILL after a timeout), and a failing stop does not keep the others from running.

A benchmark may kill and restart brokers itself through ``LocalCluster.brokers``; whatever
runs at the end is stopped (a killed broker is simply skipped).

``security`` (``ssl``, ``sasl_plaintext``, ``sasl_ssl``) starts the brokers as
``replog up --security`` does, with the same files (spark_replica.tools.launcher.local_security);
``LocalCluster.security`` is then the admin super user's client settings.
"""

from __future__ import annotations

import contextlib
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from spark_replica.security.settings import SecurityConfig
from spark_replica.tools.launcher import local_security as secure_files
from spark_replica.tools.launcher.brokers import BrokerProcess, free_port
from spark_replica.tools.launcher.cluster_dir import PLAINTEXT_MODE
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper


@dataclass(frozen=True)
class LocalCluster:
    bootstrap: list[tuple[str, int]]  # every broker's address, broker 1 first
    broker_pid: int  # the PID broker 1 was started with
    brokers: list[BrokerProcess]  # brokers[i] has broker id i + 1
    zookeeper: str  # the ZooKeeper connect string
    security: SecurityConfig | None = None  # the admin's client settings (None: plaintext)


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _stop_all(brokers: list[BrokerProcess], zookeeper: EmbeddedZooKeeper) -> None:
    """Stop the brokers (last started first), then ZooKeeper, even if a stop fails."""
    with contextlib.ExitStack() as stack:
        stack.callback(zookeeper.stop)
        for broker in brokers:
            stack.callback(broker.stop)


@contextlib.contextmanager
def local_cluster(
    brokers: int = 1,
    overrides: dict[str, str] | None = None,
    security: str = PLAINTEXT_MODE,
    kafka: bool = False,
) -> Iterator[LocalCluster]:
    """Start ZooKeeper and brokers 1..``brokers`` on loopback; yield how to reach them.

    ``overrides`` are broker configs (``--override key=value``) given to every broker;
    ``kafka`` gives every broker a Kafka-protocol listener on a free port as well.
    """
    if brokers < 1:
        raise ValueError(f"a cluster needs at least one broker, not {brokers}")
    previous_sigint = signal.getsignal(signal.SIGINT)
    previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with tempfile.TemporaryDirectory(prefix="replog-bench-") as tmp:
            root = Path(tmp)
            ids = range(1, brokers + 1)
            files = None
            if security != PLAINTEXT_MODE:
                files = secure_files.prepare(root, security, ids, ["127.0.0.1"])
            zookeeper = EmbeddedZooKeeper(free_port(), root / "zookeeper")
            processes = [
                BrokerProcess(
                    broker_id,
                    free_port(),
                    root / f"broker-{broker_id}",
                    zookeeper.connect_string,
                    overrides=dict(overrides or {}),
                    config_file=None if files is None else files.broker_config_file(broker_id),
                    kafka_port=free_port() if kafka else -1,
                )
                for broker_id in ids
            ]
            try:
                zookeeper.start()
                if files is not None:
                    secure_files.prepare_zookeeper(zookeeper.connect_string, files, own_server=True)
                for broker in processes:
                    broker.start()
                assert processes[0].pid is not None
                yield LocalCluster(
                    [(broker.host, broker.port) for broker in processes],
                    processes[0].pid,
                    processes,
                    zookeeper.connect_string,
                    None if files is None else secure_files.admin_security(root),
                )
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                _stop_all(processes, zookeeper)
    finally:
        signal.signal(signal.SIGINT, previous_sigint)
        signal.signal(signal.SIGTERM, previous_sigterm)
