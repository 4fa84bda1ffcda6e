"""`replog groups list|describe|reset-offsets|delete`: Kafka consumer groups, as
kafka-consumer-groups shows and changes them.

These commands speak Kafka's protocol to the brokers' Kafka listeners (groups live
there): the cluster directory's listeners by default, `--bootstrap-server` (Kafka
listener addresses; a replog listener's is refused in one line that names
`replog status --get kafka-bootstrap`), or the Kafka endpoints the brokers registered
in `--zookeeper`.
Security settings come from `--command-config` or the directory's admin.properties, as
for every other command. Lag is reckoned in spark_replica/tools/group_lag.py (shared with
the console), reset targets in groups_plan.

`list`, `describe` and `reset-offsets` print tables, or with `--json`:
- list: `[{"group": "g", "protocol_type": "consumer"}, ...]`
- describe: `{"group", "state", "protocol_type", "protocol", "members": [{"consumer_id",
  "host", "client_id"}], "partitions": [{"topic", "partition", "current_offset",
  "log_end_offset", "lag", "consumer_id", "host", "client_id"}], "coordinator": {"id",
  "host", "port", "offsets_partition"}}` (null where unknown); the coordinator is the
  broker that answered FindCoordinator, with its Kafka listener's address, which the
  table's first line prints as kafka-consumer-groups' COORDINATOR (ID) column does,
  `host:port (id)`, followed by the `__consumer_offsets` partition that holds the group
- reset-offsets: `{"group", "executed", "partitions": [{"topic", "partition",
  "current_offset", "new_offset"}]}`
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from spark_replica.client import listener_probe
from spark_replica.client.kafka_admin import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    KafkaAdminClient,
)
from spark_replica.errors import (
    ConfigError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
)
from spark_replica.tools.cli.common import (
    CLIENT_ID,
    add_kafka_listener_options,
    client_security,
    kafka_bootstrap,
    require_listener,
)
from spark_replica.tools.cli.groups_plan import (
    EARLIEST,
    LATEST,
    SHIFT_BY,
    TO_DATETIME,
    TO_OFFSET,
    ResetStrategy,
    parse_datetime,
    parse_partitions,
    reset_plan,
)
from spark_replica.tools.cli.output import add_json_flag, plural, print_json, print_table
from spark_replica.tools.group_lag import PartitionLag, group_json, lag_rows, owners
from spark_replica.topics import OFFSETS_TOPIC, TopicPartition, offsets_partition_for

T = TypeVar("T")

COLUMNS = (
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


@dataclass(frozen=True, slots=True)
class Coordinator:
    """The broker coordinating a group, at its Kafka listener, and the partition of the
    offsets topic it leads that holds the group (None while that topic is not there)."""

    broker_id: int
    host: str
    port: int
    offsets_partition: int | None

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.broker_id,
            "host": self.host,
            "port": self.port,
            "offsets_partition": self.offsets_partition,
        }

    def label(self) -> str:
        where = f"{self.host}:{self.port} ({self.broker_id})"
        if self.offsets_partition is None:
            return where
        return f"{where}, offsets in {OFFSETS_TOPIC}-{self.offsets_partition}"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    groups = subparsers.add_parser(
        "groups", help="list, describe, reset and delete Kafka consumer groups"
    )
    actions = groups.add_subparsers(dest="action", required=True)

    listing = actions.add_parser("list", help="every group's id")
    add_json_flag(listing)
    add_kafka_listener_options(listing)

    describe = actions.add_parser(
        "describe", help="per partition: committed offset, log end, lag and consumer"
    )
    describe.add_argument("group", help="the group's id")
    add_json_flag(describe)
    add_kafka_listener_options(describe)

    reset = actions.add_parser(
        "reset-offsets",
        help="move a stopped group's committed offsets (a dry run unless --execute)",
    )
    reset.add_argument("group", help="the group's id")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every partition the group has committed"
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start")
    target.add_argument("--to-latest", action="store_true", help="the log end (high watermark)")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped)")
    target.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (may be < 0)"
    )
    target.add_argument(
        "--to-datetime",
        metavar="ISO",
        help="the first offset at or after this time (ISO 8601; without a zone: UTC)",
    )
    reset.add_argument("--execute", action="store_true", help="commit the plan (else: print it)")
    add_json_flag(reset)
    add_kafka_listener_options(reset)

    delete = actions.add_parser("delete", help="delete a group without members, and its offsets")
    delete.add_argument("group", help="the group's id")
    add_kafka_listener_options(delete)
    groups.set_defaults(handler=run)


def strategy_of(args: argparse.Namespace) -> ResetStrategy:
    """The reset target the flags name (argparse makes exactly one present)."""
    if args.to_earliest:
        return ResetStrategy(EARLIEST)
    if args.to_latest:
        return ResetStrategy(LATEST)
    if args.to_offset is not None:
        return ResetStrategy(TO_OFFSET, args.to_offset)
    if args.shift_by is not None:
        return ResetStrategy(SHIFT_BY, args.shift_by)
    return ResetStrategy(TO_DATETIME, parse_datetime(args.to_datetime))


def run(args: argparse.Namespace) -> int:
    actions: dict[str, Callable[[KafkaAdminClient, argparse.Namespace], Awaitable[int]]] = {
        "list": _list,
        "describe": _describe,
        "reset-offsets": _reset,
        "delete": _delete,
    }
    if args.action == "reset-offsets":
        strategy_of(args)  # a bad --to-datetime or --to-offset fails before any connection
    bootstrap = kafka_bootstrap(args)
    security = client_security(args)

    async def main() -> int:
        if args.bootstrap:
            await require_listener(bootstrap, listener_probe.KAFKA, args, security)
        async with KafkaAdminClient(bootstrap, security, CLIENT_ID, args.timeout) as admin:
            return await actions[args.action](admin, args)

    return asyncio.run(main())


async def _list(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    groups = await admin.list_groups()
    rows = [[g.group_id, g.protocol_type] for g in sorted(groups, key=lambda g: g.group_id)]
    if args.json:
        print_json([{"group": group, "protocol_type": kind} for group, kind in rows])
    elif rows:
        print_table(("GROUP", "PROTOCOL-TYPE"), rows)
    return 0


async def _describe(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    description = await admin.describe_group(args.group)
    committed = await admin.committed_offsets(args.group)
    owned = owners(description)
    log_ends = await admin.list_offsets([*committed, *owned], LATEST_TIMESTAMP)
    rows = lag_rows(committed, log_ends, owned)
    coordinator = await _coordinator(admin, args.group)
    if args.json:
        print_json({**group_json(description, rows), "coordinator": coordinator.as_json()})
        return 0
    members = len(description.members)
    print(
        f"Group {args.group}: {description.state}, {plural(members, 'member')}"
        + (f", protocol {description.protocol}" if description.protocol else "")
        + f", coordinator {coordinator.label()}"
    )
    if not rows:
        print("No committed offsets and no assigned partitions.")
        return 0
    print_table(COLUMNS, [_cells(row) for row in rows])
    return 0


async def _coordinator(admin: KafkaAdminClient, group: str) -> Coordinator:
    broker_id = await admin.find_coordinator(group)
    host, port = admin.brokers[broker_id]
    partitions = (await admin.metadata([OFFSETS_TOPIC])).get(OFFSETS_TOPIC, {})
    index = offsets_partition_for(group, len(partitions)) if partitions else None
    return Coordinator(broker_id, host, port, index)


def _cells(row: PartitionLag) -> list[object]:
    owner = row.owner
    return [
        row.topic,
        row.partition,
        row.current_offset,
        row.log_end_offset,
        row.lag,
        None if owner is None else owner.consumer_id,
        None if owner is None else owner.host,
        None if owner is None else owner.client_id,
    ]


async def _reset(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    strategy = strategy_of(args)
    description = await admin.describe_group(args.group)
    if description.members:
        raise NonEmptyGroupError(
            f"group {args.group} has {plural(len(description.members), 'active member')} "
            f"(state {description.state}): offsets can only be reset while its consumers "
            "are stopped"
        )
    committed = await admin.committed_offsets(args.group)
    partitions = await _partitions_to_reset(admin, args, committed)
    earliest = await admin.list_offsets(partitions, EARLIEST_TIMESTAMP)
    latest = await admin.list_offsets(partitions, LATEST_TIMESTAMP)
    at_time = None
    if strategy.kind == TO_DATETIME:
        at_time = await admin.list_offsets(partitions, strategy.value)
    plan = reset_plan(strategy, partitions, committed, earliest, latest, at_time)
    if args.execute:
        await admin.commit_offsets(args.group, plan)
    if args.json:
        document = {
            "group": args.group,
            "executed": args.execute,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "current_offset": committed.get(tp),
                    "new_offset": offset,
                }
                for tp, offset in plan.items()
            ],
        }
        print_json(document)
        return 0
    header = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
    cells = [[tp.topic, tp.partition, committed.get(tp), offset] for tp, offset in plan.items()]
    print_table(header, cells)
    if args.execute:
        print(f"Committed the new offsets of group {args.group}.")
    else:
        print("Dry run: nothing was changed. Pass --execute to commit these offsets.")
    return 0


async def _partitions_to_reset(
    admin: KafkaAdminClient, args: argparse.Namespace, committed: dict[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        if not committed:
            raise ConfigError(
                f"group {args.group} has no committed offsets: name the topics with --topic"
            )
        return sorted(committed)
    specs = [parse_partitions(spec) for spec in args.topic]
    leaders = await admin.metadata(sorted({topic for topic, _ in specs}))
    partitions: set[TopicPartition] = set()
    for topic, chosen in specs:
        existing = set(leaders[topic])
        missing = sorted(set(chosen or ()) - existing)
        if missing:
            raise ConfigError(
                f"topic {topic} has no partition {', '.join(map(str, missing))} "
                f"(it has {len(existing)})"
            )
        partitions.update(TopicPartition(topic, p) for p in (chosen or existing))
    return sorted(partitions)


async def _delete(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    try:
        await admin.delete_group(args.group)
    except NonEmptyGroupError:
        raise NonEmptyGroupError(
            f"group {args.group} still has members: stop its consumers, then delete it"
        ) from None
    except GroupIdNotFoundError:
        raise GroupIdNotFoundError(f"there is no group {args.group}") from None
    print(f"Deleted group {args.group}.")
    return 0
