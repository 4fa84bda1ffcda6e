"""`replog`: run a local cluster or its parts, manage topics, produce and consume."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys

from spark_replica.errors import ReplogError
from spark_replica.tools.cli import (
    acls,
    arguments,
    cluster,
    configs,
    console,
    consume,
    demo,
    elect_leaders,
    exit_codes,
    groups,
    lag,
    net,
    produce,
    reassign,
    topics,
    transactions,
    users,
    zookeeper,
)
from spark_replica.tools.cli.common import fail, report
from spark_replica.tools.cli.output import silence_stdout, stdout_closed

PACKAGE = "replog"
# -v, -vv: what the CLI's own loggers say, on standard error.
VERBOSITY_LEVELS = {1: logging.INFO, 2: logging.DEBUG}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replog", description=__doc__, epilog=exit_codes.EPILOG)
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {importlib.metadata.version(PACKAGE)}"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log what the command does to standard error: -v INFO, -vv DEBUG "
        "(default: warnings and errors only)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    demo.add_parser(subparsers)
    zookeeper.add_parser(subparsers)
    cluster.add_parsers(subparsers)
    net.add_parser(subparsers)
    topics.add_parser(subparsers)
    elect_leaders.add_parser(subparsers)
    reassign.add_parser(subparsers)
    configs.add_parser(subparsers)
    console.add_parser(subparsers)
    produce.add_parser(subparsers)
    consume.add_parser(subparsers)
    users.add_parser(subparsers)
    acls.add_parser(subparsers)
    groups.add_parser(subparsers)
    transactions.add_parser(subparsers)
    lag.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, forwarded = parser.parse_known_args(argv)
    arguments.resolve(parser, args, forwarded)
    args.forwarded = forwarded
    _configure_logging(args.verbose)
    try:
        return args.handler(args)
    except ReplogError as exc:
        return report(exc)
    except BrokenPipeError as exc:
        return _pipe_broken(exc)
    except KeyboardInterrupt:
        return 130


def _pipe_broken(error: BrokenPipeError) -> int:
    """A reader that stopped reading (`| head -1`) is not a failure: exit 0 quietly, as
    Kafka's console tools do. A broken pipe anywhere else (a socket not translated into
    a typed error) is reported as one line."""
    if not stdout_closed():
        return fail(str(error))
    silence_stdout()
    return 0


def _configure_logging(verbose: int) -> None:
    if verbose:
        logging.basicConfig(
            stream=sys.stderr,
            level=VERBOSITY_LEVELS[min(verbose, max(VERBOSITY_LEVELS))],
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    else:
        # kazoo reports routine reconnects as warnings; a CLI user only needs real failures.
        logging.getLogger("kazoo").setLevel(logging.ERROR)


if __name__ == "__main__":
    sys.exit(main())
