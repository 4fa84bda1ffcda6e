"""What every CLI command shares: how to find the cluster and how to report errors."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

from kazoo.client import KazooClient

from spark_replica import cluster_dir
from spark_replica.client import Cluster, bootstrap_from_zookeeper, parse_bootstrap
from spark_replica.errors import ConfigError, ReplogError
from spark_replica.zk.session import connect

T = TypeVar("T")


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--bootstrap", metavar="HOST:PORT[,HOST:PORT]", help="broker addresses")
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


def open_cluster(args: argparse.Namespace) -> Cluster:
    """Connect where the flags say, else to the running brokers recorded in --dir."""
    if args.bootstrap:
        return Cluster(parse_bootstrap(args.bootstrap), client_id="replog-cli")
    if args.zookeeper:
        return Cluster(bootstrap_from_zookeeper(args.zookeeper), client_id="replog-cli")
    return Cluster(cluster_dir.running_bootstrap(args.dir), client_id="replog-cli")


@contextlib.contextmanager
def zookeeper_session(args: argparse.Namespace, needed_for: str) -> Iterator[KazooClient]:
    """A ZooKeeper session from --zookeeper or the cluster directory, closed afterwards.

    Some commands write straight to ZooKeeper, as Kafka's `--zookeeper` tools did; with
    only --bootstrap they cannot, and say so.
    """
    if args.bootstrap:
        raise ConfigError(
            f"{needed_for} need ZooKeeper: pass --zookeeper or --dir instead of --bootstrap"
        )
    zk = connect(args.zookeeper or cluster_dir.load(args.dir).zookeeper)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def run_with_cluster(args: argparse.Namespace, work: Callable[[Cluster], Awaitable[T]]) -> T:
    """Open the cluster, run `work` on an event loop, close the cluster whatever happens."""

    async def main() -> T:
        cluster = open_cluster(args)
        try:
            return await work(cluster)
        finally:
            await cluster.close()

    return asyncio.run(main())


def fail(message: str, code: int = 1) -> int:
    print(f"replog: {message}", file=sys.stderr)
    return code


def report(error: ReplogError) -> int:
    """Print a typed error as one line; configuration mistakes exit 2, the rest 1."""
    return fail(str(error), 2 if isinstance(error, ConfigError) else 1)
