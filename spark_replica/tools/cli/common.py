"""What every CLI command shares: how to find and log in to the cluster, how to report errors.

Security settings come from `--command-config FILE`, a Kafka client properties file (Java
or librdkafka names, see spark_replica.security.settings); without it, a command that
finds its cluster through `--dir` uses the directory's `admin.properties`, which
`replog up --security ...` writes. `zookeeper.digest=USER:PASSWORD` in the same file is
the login for the commands that write to ZooKeeper themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

from kazoo.client import KazooClient

from spark_replica.client import Cluster, bootstrap_from_zookeeper, listener_probe, parse_bootstrap
from spark_replica.errors import ConfigError, ReplogError
from spark_replica.security.settings import SecurityConfig, load_properties
from spark_replica.tools.cli import exit_codes
from spark_replica.tools.launcher import cluster_dir
from spark_replica.zk.session import connect
from spark_replica.zk.topic_store import read_brokers

T = TypeVar("T")

CLIENT_ID = "replog-cli"
ZOOKEEPER_DIGEST = "zookeeper.digest"
# What the commands on the Kafka listeners wait for a broker or a coordinator by default.
KAFKA_TIMEOUT_S = 30.0


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        dest="bootstrap",
        metavar="HOST:PORT[,HOST:PORT]",
        help="the brokers' replog listener addresses (--bootstrap-server is the same, as in "
        "Kafka's tools; a Kafka listener's address is refused in one line naming the key of "
        "`replog status --get` that prints the right ones)",
    )
    group.add_argument(
        "--zookeeper", metavar="CONNECT", help="ZooKeeper connect string (host:port[/chroot])"
    )
    group.add_argument(
        "--dir",
        type=Path,
        default=cluster_dir.DEFAULT_DIR,
        help="the cluster directory of `replog up`, used when neither of the above is given "
        "(default ./.replog)",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="client properties (security.protocol, sasl.*, ssl.*, zookeeper.digest); "
        "default with --dir: its admin.properties when present",
    )


def client_properties(args: argparse.Namespace) -> dict[str, str]:
    """The properties of --command-config, else of the cluster directory's admin.properties
    (only when the cluster is found through --dir), else none."""
    if args.command_config is not None:
        return load_properties(args.command_config)
    if args.bootstrap or args.zookeeper:
        return {}
    admin = args.dir / cluster_dir.ADMIN_PROPERTIES
    return load_properties(admin) if admin.is_file() else {}


def client_security(args: argparse.Namespace) -> SecurityConfig:
    return SecurityConfig.from_properties(client_properties(args))


def open_cluster(args: argparse.Namespace) -> Cluster:
    """Connect where the flags say, else to the running brokers recorded in --dir."""
    security = client_security(args)
    if args.bootstrap:
        bootstrap = parse_bootstrap(args.bootstrap)
    elif args.zookeeper:
        bootstrap = bootstrap_from_zookeeper(args.zookeeper)
    else:
        bootstrap = cluster_dir.running_bootstrap(args.dir)
    return Cluster(bootstrap, client_id=CLIENT_ID, security=security)


@contextlib.contextmanager
def zookeeper_session(args: argparse.Namespace, needed_for: str) -> Iterator[KazooClient]:
    """A ZooKeeper session from --zookeeper or the cluster directory, closed afterwards.

    Some commands write straight to ZooKeeper, as Kafka's `--zookeeper` tools did; with
    only --bootstrap they cannot, and say so. On a cluster whose znodes carry ACLs the
    session logs in with the properties' zookeeper.digest.
    """
    if args.bootstrap:
        raise ConfigError(
            f"{needed_for} need ZooKeeper: pass --zookeeper or --dir instead of --bootstrap"
        )
    digest = client_properties(args).get(ZOOKEEPER_DIGEST)
    zk = connect(args.zookeeper or cluster_dir.load(args.dir).zookeeper, digest=digest)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def add_kafka_listener_options(parser: argparse.ArgumentParser) -> None:
    """Where the Kafka listeners are, the client settings, and how long to wait: the
    options of the commands that speak Kafka's protocol (groups, transactions)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--bootstrap-server",
        "--bootstrap",
        dest="bootstrap",
        metavar="HOST:PORT[,HOST:PORT]",
        help="Kafka listener addresses (--bootstrap is the same)",
    )
    where.add_argument(
        "--zookeeper",
        metavar="CONNECT",
        help="find the Kafka listeners the brokers registered in ZooKeeper",
    )
    where.add_argument(
        "--dir",
        type=Path,
        default=cluster_dir.DEFAULT_DIR,
        help="the cluster directory of `replog up`, used when neither of the above is given "
        "(default ./.replog)",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="client properties (security.protocol, sasl.*, ssl.*); "
        "default with --dir: its admin.properties when present",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=KAFKA_TIMEOUT_S,
        help=f"seconds to wait for a broker or a coordinator (default {KAFKA_TIMEOUT_S:g})",
    )


def kafka_bootstrap(args: argparse.Namespace) -> list[tuple[str, int]]:
    """The Kafka listeners: --bootstrap (as given), the registrations in --zookeeper, or
    the running brokers of --dir."""
    if args.bootstrap:
        return parse_bootstrap(args.bootstrap)
    if args.zookeeper:
        with zookeeper_session(args, "the Kafka listeners") as zk:
            registrations = read_brokers(zk)
        addresses = [(r.kafka_host, r.kafka_port) for r in registrations if r.kafka_port >= 0]
        if not addresses:
            raise ConfigError(f"no broker registered in {args.zookeeper} runs a Kafka listener")
        return addresses
    return parse_bootstrap(cluster_dir.running_kafka_bootstrap(args.dir))


def run_with_cluster(args: argparse.Namespace, work: Callable[[Cluster], Awaitable[T]]) -> T:
    """Open the cluster, run `work` on an event loop, close the cluster whatever happens."""

    async def main() -> T:
        if args.bootstrap:
            await require_listener(
                parse_bootstrap(args.bootstrap), listener_probe.REPLOG, args, client_security(args)
            )
        cluster = open_cluster(args)
        try:
            return await work(cluster)
        finally:
            await cluster.close()

    return asyncio.run(main())


# Where each protocol's addresses are found, for the message naming the right one.
STATUS_KEYS = {listener_probe.REPLOG: "bootstrap", listener_probe.KAFKA: "kafka-bootstrap"}
LISTENER_NAMES = {listener_probe.REPLOG: "replog", listener_probe.KAFKA: "Kafka"}


async def require_listener(
    bootstrap: list[tuple[str, int]],
    wanted: str,
    args: argparse.Namespace,
    security: SecurityConfig,
) -> None:
    """Refuse in one line a --bootstrap-server that answers the other listener's protocol
    (a broker's Kafka port given to a replog command, or the other way round), naming
    the `replog status --get` key that prints the right addresses. An address that
    answers neither, or not at all, is left to the command to report."""
    host, port = bootstrap[0]
    found = await listener_probe.probe_listener(host, port, security)
    if found in (wanted, listener_probe.UNKNOWN):
        return
    raise ConfigError(
        f"{host}:{port} is a {LISTENER_NAMES[found]} listener, but `replog {args.command}` "
        f"speaks the {LISTENER_NAMES[wanted]} protocol: give {LISTENER_NAMES[wanted]} listener "
        f"addresses (`replog status --get {STATUS_KEYS[wanted]}`)"
    )


def fail(message: str, code: int = exit_codes.FAILED) -> int:
    print(f"replog: {message}", file=sys.stderr)
    return code


def report(error: ReplogError) -> int:
    """Print a typed error as one line; bad input exits 2, a failed operation 1."""
    return fail(str(error), exit_codes.exit_code_of(error))
