"""Starting a local cluster's processes for `replog up`: ZooKeeper (embedded or an
ensemble), the security files and credentials, the brokers, then waiting for a controller;
and the broker processes that `replog broker start` restarts.

Each process is recorded in the cluster directory as soon as it runs, and a failed start
stops what it started (spark_replica.tools.launcher.cluster_dir records, this starts).
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kazoo.client import KazooClient

from spark_replica.errors import ConfigError, ReplogError, TimeoutExpiredError, ZooKeeperError
from spark_replica.tools.cli import cluster_ports, hosts
from spark_replica.tools.cli import zookeeper as ensemble_cli
from spark_replica.tools.cli.progress import waiting
from spark_replica.tools.launcher import cluster_dir, local_security
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.cluster_dir import BrokerEntry, ClusterInfo
from spark_replica.tools.launcher.ensemble import ZooKeeperEnsemble
from spark_replica.tools.launcher.local_security import LocalSecurity
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.zk import znodes
from spark_replica.zk.kazoo_errors import read_if_present
from spark_replica.zk.session import connect

HOST = "127.0.0.1"
NO_CONTROLLER = -1


def start(directory: Path, info: ClusterInfo, timeout_s: float, fresh: bool) -> None:
    """Start ZooKeeper and the brokers, record them, wait for readiness.

    On any failure (or Ctrl-C) stop everything started here, so a failed `up` leaves
    nothing running, and no recorded cluster either when there was none before.
    """
    deadline = time.monotonic() + timeout_s
    security = _prepare_security(directory, info)
    zookeeper: EmbeddedZooKeeper | ZooKeeperEnsemble | None = None
    brokers: list[BrokerProcess] = []
    try:
        with waiting("starting the cluster") as progress:
            if info.embedded_zookeeper is not None:
                progress.update("starting ZooKeeper")
                entry = info.embedded_zookeeper
                zookeeper = cluster_ports.start_embedded_zookeeper(
                    hosts.embedded_zookeeper, info, entry, HOST, _remaining(deadline)
                )
                assert zookeeper.process is not None
                entry.pid = zookeeper.process.pid
                info.zookeeper = zookeeper.connect_string
                cluster_dir.save(directory, info)
                print(f"ZooKeeper on {info.zookeeper} (pid {entry.pid})", flush=True)
            if info.zookeeper_nodes:
                progress.update(f"starting {len(info.zookeeper_nodes)} ZooKeeper nodes")
                zookeeper = ensemble_cli.start_cluster_ensemble(info, HOST, _remaining(deadline))
                cluster_dir.save(directory, info)
                print(f"ZooKeeper ensemble on {info.zookeeper}", flush=True)
            if security is not None:
                own_server = info.embedded_zookeeper is not None or bool(info.zookeeper_nodes)
                written = local_security.prepare_zookeeper(
                    info.zookeeper, security, own_server=own_server
                )
                for login in written:
                    print(f"SCRAM credential {login} written to ZooKeeper", flush=True)
            stale_controller = _controller_czxid(info.zookeeper, _remaining(deadline))
            progress.update(f"waiting for {len(info.brokers)} brokers to register")
            brokers = [broker_process(directory, info, b) for b in info.brokers]
            with ThreadPoolExecutor(len(brokers)) as pool:
                started = [
                    pool.submit(cluster_ports.start_broker, process, entry, _remaining(deadline))
                    for process, entry in zip(brokers, info.brokers, strict=True)
                ]
                for future in started:
                    future.result()
            for broker_entry, process in zip(info.brokers, brokers, strict=True):
                broker_entry.pid = process.pid
                print(
                    f"broker {broker_entry.id} on {broker_entry.address} (pid {broker_entry.pid})",
                    flush=True,
                )
            cluster_dir.save(directory, info)
            progress.update("waiting for a controller")
            controller = _wait_for_controller(info, brokers, stale_controller, deadline, timeout_s)
        print(f"controller: broker {controller}")
    except BaseException:
        if zookeeper is not None or brokers:
            print(f"replog up: failed; stopping what it started in {directory}", file=sys.stderr)
        for process in brokers:
            process.stop()
        if zookeeper is not None:
            zookeeper.stop()
        if fresh:
            cluster_dir.forget(directory)
        else:
            for recorded in info.processes():
                recorded.pid = None
            cluster_dir.save(directory, info)
        raise


def _prepare_security(directory: Path, info: ClusterInfo) -> LocalSecurity | None:
    """The secure cluster's files, made where missing (None for a plaintext cluster)."""
    if not info.secure:
        return None
    hosts = sorted({b.host for b in info.brokers})
    return local_security.prepare(directory, info.security, [b.id for b in info.brokers], hosts)


def broker_process(directory: Path, info: ClusterInfo, entry: BrokerEntry) -> BrokerProcess:
    config_file = None
    if info.secure:
        config_file = local_security.broker_config_file(directory, entry.id)
        if not config_file.is_file():
            raise ConfigError(f"{config_file} is missing: run `replog up --dir {directory}`")
    return BrokerProcess(
        entry.id,
        entry.port,
        Path(entry.log_dir),
        info.zookeeper,
        entry.host,
        info.overrides,
        config_file,
        entry.kafka_port,
        entry.metrics_port,
        command_prefix=hosts.exec_prefix(info, entry.id),
    )


def _remaining(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.1)


def _wait_for_controller(
    info: ClusterInfo,
    brokers: list[BrokerProcess],
    stale_czxid: int | None,
    deadline: float,
    timeout_s: float,
) -> int:
    """Wait until /controller is a new znode naming one of our brokers.

    A /controller present before the brokers started is left over from an earlier life
    of the cluster (its session not yet expired), so it does not count.
    """
    ids = {b.broker_id for b in brokers}
    zk = connect(info.zookeeper, create_chroot=False)
    try:
        while True:
            for broker in brokers:
                if broker.process is not None and broker.process.poll() is not None:
                    raise ReplogError(
                        f"broker {broker.broker_id} exited with code {broker.process.returncode}"
                        f"; see {broker.log_dir / 'broker.log'}"
                    )
            controller, czxid = read_controller(zk)
            if controller in ids and czxid != stale_czxid:
                return controller
            if time.monotonic() > deadline:
                raise TimeoutExpiredError(
                    f"no controller was elected within {timeout_s:.0f} s; "
                    f"see broker.log in each log dir under {Path(info.brokers[0].log_dir).parent}"
                )
            time.sleep(0.05)
    finally:
        close(zk)


def _controller_czxid(connect_string: str, timeout_s: float) -> int | None:
    zk = connect(connect_string, connect_timeout_s=timeout_s, create_chroot=False)
    try:
        return read_controller(zk)[1]
    finally:
        close(zk)


def read_controller(zk: KazooClient) -> tuple[int, int | None]:
    """(broker id, czxid) of /controller; (-1, None) when there is none or it is unreadable."""
    found = read_if_present(zk, znodes.CONTROLLER_PATH)
    if found is None:
        return NO_CONTROLLER, None
    data, stat = found
    try:
        return znodes.ControllerRegistration.decode(data).broker_id, stat.czxid
    except ZooKeeperError:
        return NO_CONTROLLER, stat.czxid


def close(zk: KazooClient) -> None:
    zk.stop()
    zk.close()
