"""`replog users create|delete|list`: SCRAM users, stored by the brokers in ZooKeeper.

The password is read from standard input (one line), never from the command line, where
other users of the machine could see it in the process list.

`list` prints a table with one row per user and mechanism, or with `--json`
`[{"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096}, ...]`.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from spark_replica.client import Cluster
from spark_replica.client.security_admin import DEFAULT_MECHANISM, SecurityAdmin
from spark_replica.errors import ConfigError
from spark_replica.security import scram
from spark_replica.tools.cli.common import add_connection_options, run_with_cluster
from spark_replica.tools.cli.output import add_json_flag, print_json, print_table, rows_as_json
from spark_replica.wire.native.scram_credentials import MECHANISM_CODES

LIST_COLUMNS = ("user", "mechanism", "iterations")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    users = subparsers.add_parser("users", help="create, delete and list SCRAM users")
    actions = users.add_subparsers(dest="action", required=True)

    create = actions.add_parser("create", help="create a user, or set a new password")
    create.add_argument("name", help="the user's name")
    create.add_argument(
        "--password-stdin",
        action="store_true",
        required=True,
        help="read the password from the first line of standard input",
    )
    create.add_argument(
        "--mechanism",
        choices=list(MECHANISM_CODES),
        default=DEFAULT_MECHANISM,
        help=f"the SCRAM mechanism (default {DEFAULT_MECHANISM})",
    )
    create.add_argument(
        "--iterations",
        type=int,
        default=scram.MIN_ITERATIONS,
        help=f"PBKDF2 iterations, {scram.MIN_ITERATIONS}-{scram.MAX_ITERATIONS} "
        f"(default {scram.MIN_ITERATIONS})",
    )
    add_connection_options(create)

    delete = actions.add_parser("delete", help="delete a user's credentials")
    delete.add_argument("name", help="the user's name")
    delete.add_argument(
        "--mechanism", choices=list(MECHANISM_CODES), help="only this one (default: all)"
    )
    add_connection_options(delete)

    listing = actions.add_parser("list", help="users and their mechanisms")
    add_json_flag(listing)
    add_connection_options(listing)
    users.set_defaults(handler=run)


def read_password(stream: TextIO) -> str:
    """The first line of `stream`, without its line ending; ConfigError if empty."""
    line = stream.readline()
    password = line.rstrip("\r\n")
    if not password:
        raise ConfigError("--password-stdin: the password read from standard input is empty")
    return password


def run(args: argparse.Namespace) -> int:
    password = read_password(sys.stdin) if args.action == "create" else ""

    async def work(cluster: Cluster) -> int:
        admin = SecurityAdmin(cluster)
        if args.action == "create":
            await admin.create_user(args.name, password, args.mechanism, args.iterations)
            print(f"Set the {args.mechanism} credential of user {args.name}.")
        elif args.action == "delete":
            deleted = await admin.delete_user(args.name, args.mechanism)
            print(f"Deleted the {', '.join(deleted)} credentials of user {args.name}.")
        else:
            rows = [
                [user.name, mechanism, iterations]
                for user in await admin.list_users()
                for mechanism, iterations in user.iterations.items()
            ]
            if args.json:
                print_json(rows_as_json(LIST_COLUMNS, rows))
            elif rows:
                print_table([c.upper() for c in LIST_COLUMNS], rows)
        return 0

    return run_with_cluster(args, work)
