"""`replog up|status|down` and `replog broker run|stop|kill|start`: a local cluster.

`up` starts an embedded ZooKeeper (unless given a connect string) and N broker processes
in sessions of their own, so they outlive the command, records them in the cluster
directory (see spark_replica.tools.launcher.cluster_dir) and returns once every broker is registered
and a controller is elected. The other commands act on what the directory records, by
PID: nothing here looks for processes by name.

Every broker also serves Kafka's protocol on a port of its own (`up --no-kafka` turns
that listener off; `--kafka` turns it back on); the ports are recorded like the replog
ones, and `status` names them (`--get kafka-bootstrap`, for Kafka clients and tools).
Likewise every broker serves Prometheus metrics on a recorded port (`up --no-metrics`
turns that off), and `status --json` gives each broker's `metrics_url`.

`up --config FILE` reads broker configs in Kafka's server.properties names that every
broker shares, checked by the broker's own rules (`python -m brokerd.config.shared_check`:
the tools start brokers as processes and do not import brokerd); they are recorded with
the `--override` ones (which win over the file) for every later `up` and `broker start`.
`broker run ARGS` is `python -m brokerd ARGS`. Starting the processes is cluster_start.py.

`up --security MODE` makes the cluster secure (spark_replica.tools.launcher.local_security): TLS
and/or SCRAM on the brokers' listener, ACLs on, ZooKeeper znodes writable by the brokers
and the admin alone. The mode is recorded, so a later `up` or `broker start` runs the
same brokers with the same files.

Ports are fixed, so that addresses stay the same from one `up` to the next and the
docs' examples run as written: replog 9092+, Kafka 19092+, metrics 9404+, ZooKeeper 2181
(spark_replica/tools/launcher/port_plan.py), all moved together by `up --port-base N`.
A recorded cluster starts again on its recorded ports unless given --port-base. A taken
port stops `up` before anything starts, naming the port and --port-base
(spark_replica/tools/cli/cluster_ports.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from spark_replica.errors import ConfigError, ZooKeeperError
from spark_replica.security.settings import load_properties
from spark_replica.tools.cli import cluster_ports, hosts
from spark_replica.tools.cli import zookeeper as ensemble_cli
from spark_replica.tools.cli.cluster_start import (
    HOST,
    NO_CONTROLLER,
    broker_process,
    close,
    read_controller,
    start,
)
from spark_replica.tools.cli.output import print_table
from spark_replica.tools.cli.progress import waiting
from spark_replica.tools.launcher import cluster_dir
from spark_replica.tools.launcher.brokers import BROKER_STOP_TIMEOUT_S
from spark_replica.tools.launcher.cluster_dir import (
    PLAINTEXT_MODE,
    SECURITY_MODES,
    BrokerEntry,
    ClusterInfo,
    EmbeddedZooKeeperEntry,
)
from spark_replica.tools.launcher.ensemble import validate_node_count
from spark_replica.tools.launcher.port_plan import DEFAULT_PORT_BASE, PortPlan
from spark_replica.tools.launcher.zookeeper import PID_FILE, STOP_TIMEOUT_S
from spark_replica.topic_config import parse_assignments
from spark_replica.zk.session import connect, split_connect_string
from spark_replica.zk.topic_store import live_broker_ids

DEFAULT_BROKERS = 3
# brokerd's PROG_ENV: the name its usage line gives (the tools do not import brokerd).
BROKER_PROG_ENV = "REPLOG_BROKER_PROG"
DEFAULT_TIMEOUT_S = 60.0
# status must answer quickly even when an external ZooKeeper is gone.
STATUS_CONNECT_TIMEOUT_S = 5.0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    up = subparsers.add_parser("up", help="start ZooKeeper and N brokers in the background")
    up.add_argument("--brokers", type=int, help="how many (default 3, or as recorded in --dir)")
    up.add_argument(
        "--zookeeper",
        metavar="CONNECT",
        help="use it instead of an embedded one (default: an embedded one, or as recorded)",
    )
    up.add_argument(
        "--zookeeper-nodes",
        type=int,
        metavar="N",
        help="run an embedded ensemble of N ZooKeeper nodes (odd, 1 to 7; default 1, or as "
        "recorded in --dir)",
    )
    up.add_argument(
        "--netns",
        action="store_true",
        help="run ZooKeeper and each broker on a host of its own: a network namespace with "
        "its own address on a bridge, reached from here through the bridge, its links cut "
        "and healed with `replog net` (needs root and iproute2; default: as recorded in "
        "--dir, else every process on 127.0.0.1)",
    )
    up.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="broker configs every broker shares, in Kafka's server.properties names "
        "(no broker.id, listeners, log.dirs or security settings), recorded for later `up` "
        "and `broker start` (default: as recorded in --dir)",
    )
    up.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config of every broker, winning over --config, recorded for later `up` and "
        "`broker start` (repeatable; default: as recorded in --dir)",
    )
    up.add_argument(
        "--security",
        choices=SECURITY_MODES,
        help="the brokers' security.protocol (default plaintext, or as recorded in --dir); "
        "a secure cluster has a CA, an admin super user and ACLs, and writes "
        "admin.properties (client settings for --command-config) into --dir",
    )
    up.add_argument(
        "--kafka",
        action=argparse.BooleanOptionalAction,
        help="run the Kafka-protocol listener on every broker (default on, or as recorded "
        "in --dir)",
    )
    up.add_argument(
        "--metrics",
        action=argparse.BooleanOptionalAction,
        help="serve Prometheus metrics over HTTP from every broker (default on, or as "
        "recorded in --dir)",
    )
    up.add_argument(
        "--port-base",
        type=int,
        metavar="N",
        help=f"move every port together: broker i's replog listener on N+i-1, its Kafka "
        f"listener on N+10000+i-1, its metrics on N+312+i-1, ZooKeeper on N-6911 (default "
        f"{DEFAULT_PORT_BASE}: replog 9092+, Kafka 19092+, metrics 9404+, ZooKeeper 2181; a "
        "recorded cluster keeps its ports)",
    )
    _add_timeout_option(up, "until every broker is registered and a controller elected")
    _add_dir_option(up)
    up.set_defaults(handler=run_up)

    status = subparsers.add_parser("status", help="the cluster in --dir: who runs, who leads")
    output = status.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one JSON document (default: a table)")
    output.add_argument(
        "--get",
        choices=("bootstrap", "kafka-bootstrap", "zookeeper"),
        help="print only the bootstrap servers, the Kafka listeners' bootstrap servers or "
        "the ZooKeeper connect string, for scripts (default: everything)",
    )
    _add_dir_option(status)
    status.set_defaults(handler=run_status)

    down = subparsers.add_parser("down", help="stop every broker cleanly, then ZooKeeper")
    _add_dir_option(down)
    down.set_defaults(handler=run_down)

    broker = subparsers.add_parser("broker", help="run a broker, or stop/kill/start one")
    actions = broker.add_subparsers(dest="action", required=True)
    _add_run_parser(actions)
    for action, text in (
        ("stop", "SIGTERM: a clean shutdown of a broker of the cluster in --dir"),
        ("kill", "SIGKILL: a crash of a broker of the cluster in --dir"),
        ("start", "restart a broker of the cluster in --dir on its port and log dir"),
    ):
        parser = actions.add_parser(action, help=text)
        parser.add_argument("id", type=int, help="broker id")
        if action == "start":
            _add_timeout_option(parser, "until the broker is registered")
        _add_dir_option(parser)
        parser.set_defaults(handler=run_broker_action)


def _add_run_parser(actions: argparse._SubParsersAction) -> None:
    """`broker run ARGS` is `python -m brokerd ARGS`: the tools start brokers as processes
    and leave the broker's flags, their checks and its --help to the broker."""
    run = actions.add_parser(
        "run",
        help="run one broker in the foreground",
        description="run one broker in the foreground: every flag goes to `python -m brokerd`",
        add_help=False,
    )
    run.set_defaults(handler=run_broker, forwards_arguments=True)


def run_broker(args: argparse.Namespace) -> int:
    """The broker replaces this process, so its PID and the signals sent to it are the
    broker's own; its usage line names this command (BROKER_PROG_ENV)."""
    environment = {**os.environ, BROKER_PROG_ENV: "replog broker run"}
    os.execve(sys.executable, [sys.executable, "-m", "brokerd", *args.forwarded], environment)


def _add_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=cluster_dir.DEFAULT_DIR,
        help="the cluster directory (default ./.replog)",
    )


def _add_timeout_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds to wait {what} (default {DEFAULT_TIMEOUT_S:.0f})",
    )


def _seconds(text: str) -> float:
    with contextlib.suppress(ValueError):
        if (value := float(text)) > 0:
            return value
    raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")


def run_up(args: argparse.Namespace) -> int:
    if args.brokers is not None and args.brokers < 1:
        raise ConfigError(f"--brokers must be at least 1, not {args.brokers}")
    if args.zookeeper is not None:
        split_connect_string(args.zookeeper)
    if args.zookeeper_nodes is not None:
        validate_node_count(args.zookeeper_nodes)
        if args.zookeeper is not None:
            raise ConfigError("--zookeeper-nodes starts an ensemble; --zookeeper uses another")
    if args.netns:
        hosts.check_flags(args)
    args.dir.mkdir(parents=True, exist_ok=True)
    with cluster_dir.locked(args.dir):
        fresh = not cluster_dir.exists(args.dir)
        info = _plan(args)
        hosts.plan(info, args.netns, args.dir, fresh)
        if info.network is None:
            cluster_ports.require_free(info, HOST)
        with hosts.network_for(info):
            start(args.dir, info, args.timeout, fresh)
    print(f"Cluster ready: bootstrap servers {info.bootstrap_servers}")
    if info.kafka_bootstrap_servers is not None:
        print(f"Kafka clients: bootstrap.servers={info.kafka_bootstrap_servers}")
    if info.secure:
        admin = args.dir / cluster_dir.ADMIN_PROPERTIES
        print(f"Security: {info.security}; admin client properties in {admin}")
    return 0


def _plan(args: argparse.Namespace) -> ClusterInfo:
    """The cluster to start: the recorded one (fresh processes, same data) or a new one."""
    directory: Path = args.dir
    overrides = _shared_configs(args)
    if not cluster_dir.exists(directory):
        count = DEFAULT_BROKERS if args.brokers is None else args.brokers
        nodes = args.zookeeper_nodes or 1
        plan = PortPlan(_port_base(args), count, nodes)
        root = directory.resolve()
        embedded = None
        if args.zookeeper is None and nodes == 1:
            embedded = EmbeddedZooKeeperEntry(plan.zookeeper(), str(root / "zookeeper"), None)
        kafka = args.kafka is not False
        metrics = args.metrics is not False
        brokers = [
            BrokerEntry(
                i,
                HOST,
                plan.replog(i),
                None,
                str(root / f"broker-{i}"),
                plan.kafka(i) if kafka else -1,
                plan.metrics(i) if metrics else -1,
            )
            for i in range(1, count + 1)
        ]
        security = PLAINTEXT_MODE if args.security is None else args.security
        info = ClusterInfo(
            args.zookeeper or "", embedded, brokers, overrides or {}, security, kafka, metrics
        )
        if nodes > 1:
            info.zookeeper_nodes = ensemble_cli.plan_cluster_nodes(
                root, HOST, plan.ensemble_ports()
            )
        return info
    info = cluster_dir.load(directory)
    running = info.running_processes()
    if running:
        raise ConfigError(
            f"the cluster in {directory} is still running ({', '.join(running)}): "
            f"run `replog down --dir {directory}` first"
        )
    if args.brokers is not None and args.brokers != len(info.brokers):
        raise ConfigError(
            f"{directory} holds a cluster of {len(info.brokers)} brokers, not {args.brokers}: "
            "leave out --brokers or use another --dir"
        )
    if args.zookeeper is not None and (
        info.embedded_zookeeper is not None or args.zookeeper != info.zookeeper
    ):
        where = "an embedded ZooKeeper" if info.embedded_zookeeper else info.zookeeper
        raise ConfigError(
            f"the cluster in {directory} uses {where}: leave out --zookeeper or use another --dir"
        )
    recorded_nodes = len(info.zookeeper_nodes) or 1
    if args.zookeeper_nodes is not None and args.zookeeper_nodes != recorded_nodes:
        raise ConfigError(
            f"the cluster in {directory} runs {recorded_nodes} ZooKeeper node(s), not "
            f"{args.zookeeper_nodes}: leave out --zookeeper-nodes or use another --dir"
        )
    if args.security is not None and args.security != info.security:
        raise ConfigError(
            f"the cluster in {directory} was set up with --security {info.security}: "
            "leave out --security or use another --dir"
        )
    if overrides is not None:
        info.overrides = overrides
    if args.kafka is not None:
        info.kafka = args.kafka
    if args.metrics is not None:
        info.metrics = args.metrics
    plan = PortPlan(_port_base(args), len(info.brokers), len(info.zookeeper_nodes) or 1)
    if args.port_base is not None:
        cluster_ports.planned(info, plan)
    for broker in info.brokers:
        if not info.kafka:
            broker.kafka_port = -1
        elif broker.kafka_port <= 0:
            broker.kafka_port = plan.kafka(broker.id)
        if not info.metrics:
            broker.metrics_port = -1
        elif broker.metrics_port <= 0:
            broker.metrics_port = plan.metrics(broker.id)
    return info


def _port_base(args: argparse.Namespace) -> int:
    return DEFAULT_PORT_BASE if args.port_base is None else int(args.port_base)


def _shared_configs(args: argparse.Namespace) -> dict[str, str] | None:
    """`--config` with `--override` on top, checked; None when neither is given (the
    recorded ones stay)."""
    if args.config is None and not args.override:
        return None
    from_file = {} if args.config is None else load_properties(args.config)
    configs, ignored = _checked_by_broker(from_file | parse_assignments(args.override))
    for key in ignored:
        print(
            f"replog up: {key} is a Kafka broker config replog does not use; ignored",
            file=sys.stderr,
        )
    return configs


def _checked_by_broker(properties: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The shared settings kept and the Kafka keys ignored, by the broker's own rules (a
    `python -m brokerd.config.shared_check` process), so a bad value stops `up` before it
    starts anything."""
    check = subprocess.run(
        [sys.executable, "-m", "brokerd.config.shared_check"],
        input=json.dumps(properties),
        capture_output=True,
        text=True,
        check=False,
    )
    if check.returncode != 0:
        raise ConfigError(
            check.stderr.strip() or f"the broker's config check failed ({check.returncode})"
        )
    answer = json.loads(check.stdout)
    return answer["configs"], answer["ignored"]


def run_status(args: argparse.Namespace) -> int:
    info = cluster_dir.load(args.dir)
    if args.get == "kafka-bootstrap":
        if info.kafka_bootstrap_servers is None:
            raise ConfigError(f"the brokers of the cluster in {args.dir} run no Kafka listener")
        print(info.kafka_bootstrap_servers)
        return 0
    if args.get is not None:
        print(info.bootstrap_servers if args.get == "bootstrap" else info.zookeeper)
        return 0
    registered, controller = _zookeeper_view(info)
    nodes = ensemble_cli.cluster_node_modes(info, HOST)
    brokers = [
        {
            "id": b.id,
            "host": b.host,
            "port": b.port,
            "kafka_port": b.kafka_port,
            "metrics_url": b.metrics_url,
            "pid": b.pid,
            "alive": b.id in registered and b.running(),
        }
        for b in sorted(info.brokers, key=lambda b: b.id)
    ]
    if args.json:
        document = {
            "zookeeper": info.zookeeper,
            "bootstrap_servers": info.bootstrap_servers,
            "kafka_bootstrap_servers": info.kafka_bootstrap_servers,
            "controller": controller,
            "brokers": brokers,
            **({"zookeeper_nodes": nodes} if nodes else {}),
            **({"network": network} if (network := hosts.network_view(info)) else {}),
        }
        print(json.dumps(document))
        return 0
    zk = info.embedded_zookeeper
    if nodes:
        ensemble_cli.print_cluster_nodes(info.zookeeper, nodes)
    elif zk is None:
        print(f"ZooKeeper:  {info.zookeeper} (external)")
    else:
        state = f"pid {zk.pid}, running" if zk.running() else "stopped"
        print(f"ZooKeeper:  {info.zookeeper} (embedded, {state})")
    print(f"Controller: {controller}")
    print(f"Bootstrap:  {info.bootstrap_servers}")
    print(f"Kafka:      {info.kafka_bootstrap_servers or 'off'}")
    print(f"Security:   {info.security}")
    if (view := hosts.network_view(info)) is not None:
        print(f"Network:    {hosts.network_line(view)}")
    print_table(
        ["ID", "ADDRESS", "KAFKA", "PID", "ALIVE", "METRICS"],
        [
            [
                b["id"],
                f"{b['host']}:{b['port']}",
                "off" if b["kafka_port"] == -1 else b["kafka_port"],
                b["pid"],
                "yes" if b["alive"] else "no",
                b["metrics_url"] or "off",
            ]
            for b in brokers
        ],
        highlight=[not b["alive"] for b in brokers],
    )
    return 0


def _zookeeper_view(info: ClusterInfo) -> tuple[set[int], int]:
    """(registered broker ids, controller id) as ZooKeeper sees them, or nothing when it is
    down: status reports a stopped cluster rather than failing on it."""
    embedded = info.embedded_zookeeper
    if embedded is not None and not embedded.running():
        return set(), NO_CONTROLLER
    if info.zookeeper_nodes and not any(n.running() for n in info.zookeeper_nodes):
        return set(), NO_CONTROLLER
    try:
        zk = connect(
            info.zookeeper, connect_timeout_s=STATUS_CONNECT_TIMEOUT_S, create_chroot=False
        )
    except ZooKeeperError as exc:
        print(f"replog: {exc}; showing the recorded processes only", file=sys.stderr)
        return set(), NO_CONTROLLER
    try:
        return set(live_broker_ids(zk)), read_controller(zk)[0]
    finally:
        close(zk)


def run_down(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    with cluster_dir.locked(directory):
        info = cluster_dir.load(directory)
        hosts.heal_for_shutdown(info)
        brokers = [b for b in info.brokers if b.running()]
        with waiting(f"stopping {len(brokers)} brokers") as progress:
            cluster_dir.stop_processes(brokers, signal.SIGTERM, BROKER_STOP_TIMEOUT_S)
            stopped = [f"broker {b.id}" for b in brokers]
            zk = info.embedded_zookeeper
            if zk is not None:
                if zk.running():
                    progress.update("stopping ZooKeeper")
                    cluster_dir.stop_processes([zk], signal.SIGTERM, STOP_TIMEOUT_S)
                    stopped.append("ZooKeeper")
                (Path(zk.dir) / PID_FILE).unlink(missing_ok=True)
            nodes = [n for n in info.zookeeper_nodes if n.running()]
            if nodes:
                progress.update(f"stopping {len(nodes)} ZooKeeper nodes")
                cluster_dir.stop_processes(nodes, signal.SIGTERM, STOP_TIMEOUT_S)
                stopped.append(f"{len(nodes)} ZooKeeper nodes")
            for node in info.zookeeper_nodes:
                (Path(node.dir) / PID_FILE).unlink(missing_ok=True)
        for recorded in info.processes():
            recorded.pid = None
        removed = hosts.remove_network(info)
        cluster_dir.save(directory, info)
    print(f"Stopped {', '.join(stopped)}." if stopped else f"Nothing was running in {directory}.")
    if removed is not None:
        print(removed)
    return 0


def run_broker_action(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    with cluster_dir.locked(directory):
        info = cluster_dir.load(directory)
        entry = info.broker(args.id, directory)
        if args.action == "start":
            _restart(directory, info, entry, args.timeout)
            print(f"Broker {entry.id} started on {entry.address} (pid {entry.pid}).")
            return 0
        if not entry.running():
            raise ConfigError(f"broker {entry.id} of the cluster in {directory} is not running")
        signum = signal.SIGTERM if args.action == "stop" else signal.SIGKILL
        with waiting(f"waiting for broker {entry.id} to exit"):
            cluster_dir.stop_processes([entry], signum, BROKER_STOP_TIMEOUT_S)
        cluster_dir.save(directory, info)
    print(f"Broker {args.id} {'stopped' if args.action == 'stop' else 'killed'}.")
    return 0


def _restart(directory: Path, info: ClusterInfo, entry: BrokerEntry, timeout_s: float) -> None:
    if entry.running():
        raise ConfigError(
            f"broker {entry.id} of the cluster in {directory} is already running (pid {entry.pid})"
        )
    zk = info.embedded_zookeeper
    if zk is not None and not zk.running():
        raise ConfigError(
            f"the ZooKeeper of the cluster in {directory} is not running: "
            f"run `replog up --dir {directory}`"
        )
    process = broker_process(directory, info, entry)
    try:
        with waiting(f"waiting for broker {entry.id} to register"):
            process.start(timeout_s)
    except BaseException:
        process.stop()
        raise
    entry.pid = process.pid
    cluster_dir.save(directory, info)
