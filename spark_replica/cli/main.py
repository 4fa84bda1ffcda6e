"""`replog`: run a local cluster or its parts, manage topics, produce and consume."""

from __future__ import annotations

import argparse
import logging
import sys

from spark_replica.cli import (
    acls,
    cluster,
    configs,
    consume,
    demo,
    elect_leaders,
    groups,
    produce,
    reassign,
    topics,
    users,
    zookeeper,
)
from spark_replica.cli.common import report
from spark_replica.errors import ReplogError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replog", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    demo.add_parser(subparsers)
    zookeeper.add_parser(subparsers)
    cluster.add_parsers(subparsers)
    topics.add_parser(subparsers)
    elect_leaders.add_parser(subparsers)
    reassign.add_parser(subparsers)
    configs.add_parser(subparsers)
    produce.add_parser(subparsers)
    consume.add_parser(subparsers)
    users.add_parser(subparsers)
    acls.add_parser(subparsers)
    groups.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # kazoo reports routine reconnects as warnings; a CLI user only needs real failures.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    try:
        return args.handler(args)
    except ReplogError as exc:
        return report(exc)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
