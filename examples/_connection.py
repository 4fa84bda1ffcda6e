"""Where the examples find the cluster: --bootstrap or --zookeeper, as the CLI takes them.

With `replog up` running, `replog status` prints both ("Bootstrap:" and "ZooKeeper:").
"""

from __future__ import annotations

import argparse


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap", help="broker addresses, host:port[,host:port]")
    where.add_argument("--zookeeper", help="ZooKeeper connect string, host:port[/chroot]")


def connection_options(args: argparse.Namespace) -> dict[str, str]:
    """The connector options for the cluster the arguments name."""
    if args.bootstrap:
        return {"replog.bootstrap.servers": args.bootstrap}
    return {"replog.zookeeper.connect": args.zookeeper}
