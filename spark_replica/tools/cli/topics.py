"""`replog topics create|alter|delete|delete-records|list|describe`.

`delete-records` is delete_records.py's.

`list` and `describe` print a table, or with `--json` one document:

- list: `[{"topic": "t", "partitions": 3, "replication_factor": 2}, ...]`
- describe: `[{"topic": "t", "cleanup_policy": "compact", "cleanup_policy_source":
  "topic", "partitions": [...]}, ...]`, topics sorted, each partition
  `{"topic", "partition", "leader" (-1: none), "leader_epoch", "replicas", "isr",
  "offline_replicas", "high_watermark", "log_end_offsets": {"<replica id>": offset}}`;
  an offset no broker could say now is -1. A filter leaves out topics it empties.

`describe` narrows its output as kafka-topics does: `--under-replicated-partitions`
(the ISR is smaller than the replica list), `--unavailable-partitions` (no leader, or a
leader that is not a live broker) and `--under-min-isr-partitions` (no leader, or an ISR
smaller than the topic's min.insync.replicas). The last reads the topics' overrides from
ZooKeeper, so it needs `--zookeeper` or `--dir`; a topic without an override counts
Kafka's default of 1. In the table, under-replicated partitions are red.

Each topic's cleanup.policy (compact topics are tables, delete topics streams) is read
from ZooKeeper as well: the topic's override (source "topic"), else "delete" with source
"default", which stands for the brokers' log.cleanup.policy: delete unless a broker
sets it otherwise, and the CLI does not read the brokers' settings. With only
--bootstrap there is no ZooKeeper to read: both are null, "unknown" in the table.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_replica.client import Admin, Cluster, PartitionDescription
from spark_replica.tools.cli.arguments import add_topic_argument
from spark_replica.tools.cli.common import (
    add_connection_options,
    run_with_cluster,
    zookeeper_session,
)
from spark_replica.tools.cli.delete_records import delete_records
from spark_replica.tools.cli.output import (
    add_json_flag,
    plural,
    print_json,
    print_table,
    rows_as_json,
)
from spark_replica.tools.cli.progress import waiting
from spark_replica.topic_config import DELETE, parse_assignments
from spark_replica.wire.native.metadata import NO_LEADER, MetadataResponse
from spark_replica.zk import topic_store

UNDER_REPLICATED = "under-replicated"
UNAVAILABLE = "unavailable"
UNDER_MIN_ISR = "under-min-isr"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
DEFAULT_MIN_INSYNC_REPLICAS = 1
CLEANUP_POLICY = "cleanup.policy"
TOPIC_SOURCE = "topic"
DEFAULT_SOURCE = "default"

LIST_COLUMNS = ("topic", "partitions", "replication_factor")
DESCRIBE_COLUMNS = (
    "TOPIC",
    "CLEANUP-POLICY",
    "PARTITION",
    "LEADER",
    "EPOCH",
    "REPLICAS",
    "ISR",
    "OFFLINE",
    "HW",
    "LOG-END-OFFSETS",
)

Described = Mapping[str, list[PartitionDescription]]


@dataclass(frozen=True, slots=True)
class CleanupPolicy:
    """A topic's cleanup.policy and where it comes from: the topic's own override, or
    the brokers' default (which the CLI cannot read, so it says so)."""

    value: str
    source: str

    def cell(self) -> str:
        return self.value if self.source == TOPIC_SOURCE else f"{self.value} ({self.source})"


UNKNOWN_POLICY_CELL = "unknown"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    topics = subparsers.add_parser(
        "topics", help="create, delete, list and describe topics, delete records"
    )
    actions = topics.add_subparsers(dest="action", required=True)

    create = actions.add_parser("create", help="create a topic")
    add_topic_argument(create, "the topic's name")
    create.add_argument(
        "--partitions",
        type=int,
        metavar="N",
        help="how many (default: the brokers' num.partitions, as kafka-topics)",
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        metavar="N",
        help="copies of each partition (default: the brokers' default.replication.factor)",
    )
    create.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config override, such as min.insync.replicas=2 (repeatable)",
    )
    add_connection_options(create)

    alter = actions.add_parser("alter", help="grow a topic to more partitions")
    add_topic_argument(alter, "the topic's name")
    alter.add_argument("--partitions", type=int, required=True, help="the new total")
    add_connection_options(alter)

    delete = actions.add_parser("delete", help="delete a topic and its data")
    add_topic_argument(delete, "the topic's name")
    add_connection_options(delete)

    deleting_records = actions.add_parser(
        "delete-records",
        help="delete the records below given offsets (Kafka's kafka-delete-records)",
    )
    deleting_records.add_argument(
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help='Kafka\'s layout: {"partitions": [{"topic": "t", "partition": 0, "offset": 10}], '
        '"version": 1}; offset -1 deletes everything below the high watermark',
    )
    add_json_flag(deleting_records)
    add_connection_options(deleting_records)

    listing = actions.add_parser("list", help="topics with their partition counts")
    add_json_flag(listing)
    add_connection_options(listing)

    describe = actions.add_parser(
        "describe",
        help="cleanup.policy, leader, epoch, replicas, ISR and HW",
        description="Each partition's leader, epoch, replicas, ISR and high watermark, "
        "with its topic's cleanup.policy: the topic's override, or 'delete (default)' when "
        "it has none, meaning the brokers' log.cleanup.policy applies (delete unless a "
        "broker sets it). The policy is read from ZooKeeper: with --bootstrap it shows as "
        "'unknown' (null in --json).",
    )
    add_topic_argument(describe, "only this topic (default: every topic)", required=False)
    only = describe.add_mutually_exclusive_group()
    only.add_argument(
        "--under-replicated-partitions",
        dest="only",
        action="store_const",
        const=UNDER_REPLICATED,
        help="only partitions whose ISR is smaller than their replica list",
    )
    only.add_argument(
        "--unavailable-partitions",
        dest="only",
        action="store_const",
        const=UNAVAILABLE,
        help="only partitions without a live leader",
    )
    only.add_argument(
        "--under-min-isr-partitions",
        dest="only",
        action="store_const",
        const=UNDER_MIN_ISR,
        help="only partitions without a leader or whose ISR is smaller than "
        "min.insync.replicas (needs --zookeeper or --dir)",
    )
    add_json_flag(describe)
    add_connection_options(describe)
    topics.set_defaults(handler=run)


# --------------------------------------------------------------------------- pure rules


def is_under_replicated(p: PartitionDescription) -> bool:
    return len(p.isr) < len(p.replicas)


def is_unavailable(p: PartitionDescription, live: set[int]) -> bool:
    return p.leader == NO_LEADER or p.leader not in live


def is_under_min_isr(p: PartitionDescription, min_insync: int | None) -> bool:
    """As kafka-topics: a partition without a leader counts, whatever its ISR."""
    needed = DEFAULT_MIN_INSYNC_REPLICAS if min_insync is None else min_insync
    return p.leader == NO_LEADER or len(p.isr) < needed


def offline_replicas(p: PartitionDescription, live: set[int]) -> list[int]:
    return [replica for replica in p.replicas if replica not in live]


def min_insync_replicas(config: Mapping[str, str]) -> int:
    value = config.get(MIN_INSYNC_REPLICAS)
    return int(value) if value else DEFAULT_MIN_INSYNC_REPLICAS


def cleanup_policy(config: Mapping[str, str]) -> CleanupPolicy:
    value = config.get(CLEANUP_POLICY)
    if value:
        return CleanupPolicy(value, TOPIC_SOURCE)
    return CleanupPolicy(DELETE, DEFAULT_SOURCE)


def select(
    described: Described,
    only: str | None,
    live: set[int],
    min_insync: Mapping[str, int],
) -> list[tuple[str, PartitionDescription]]:
    """The (topic, partition) pairs the filter keeps, in topic and partition order."""
    chosen = []
    for topic in sorted(described):
        for p in described[topic]:
            if only == UNDER_REPLICATED and not is_under_replicated(p):
                continue
            if only == UNAVAILABLE and not is_unavailable(p, live):
                continue
            if only == UNDER_MIN_ISR and not is_under_min_isr(p, min_insync.get(topic)):
                continue
            chosen.append((topic, p))
    return chosen


def describe_json(
    chosen: list[tuple[str, PartitionDescription]],
    live: set[int],
    policies: Mapping[str, CleanupPolicy],
) -> list[dict[str, Any]]:
    """Topics in the order chosen; a topic missing from `policies` (no ZooKeeper read)
    has a null cleanup_policy and source."""
    by_topic: dict[str, list[dict[str, object]]] = {}
    for topic, p in chosen:
        partition = {"topic": topic, **p.as_json(), "offline_replicas": offline_replicas(p, live)}
        by_topic.setdefault(topic, []).append(partition)
    described = []
    for topic, partitions in by_topic.items():
        policy = policies.get(topic)
        described.append(
            {
                "topic": topic,
                "cleanup_policy": None if policy is None else policy.value,
                "cleanup_policy_source": None if policy is None else policy.source,
                "partitions": partitions,
            }
        )
    return described


def partition_cells(
    topic: str, p: PartitionDescription, live: set[int], policy: CleanupPolicy | None
) -> list[object]:
    return [
        topic,
        UNKNOWN_POLICY_CELL if policy is None else policy.cell(),
        p.partition,
        "none" if p.leader == NO_LEADER else p.leader,
        p.leader_epoch,
        p.replicas,
        p.isr,
        offline_replicas(p, live) or None,
        p.high_watermark,
        [f"{r}={offset}" for r, offset in p.log_end_offsets.items()],
    ]


# --------------------------------------------------------------------------- commands


def run(args: argparse.Namespace) -> int:
    async def work(cluster: Cluster) -> int:
        admin = Admin(cluster)
        if args.action == "create":
            configs = parse_assignments(args.config)
            with waiting(f"creating topic {args.topic} and waiting for its leaders"):
                created = await admin.create_topic(
                    args.topic, args.partitions, args.replication_factor, configs
                )
            replicas = max((len(p.replicas) for p in created.partitions), default=0)
            print(
                f"Created topic {args.topic}: {plural(len(created.partitions), 'partition')}, "
                f"replication factor {replicas}."
            )
        elif args.action == "alter":
            with waiting(f"adding partitions to {args.topic}"):
                await admin.create_partitions(args.topic, args.partitions)
            print(f"Topic {args.topic} now has {args.partitions} partitions.")
        elif args.action == "delete":
            with waiting(f"deleting topic {args.topic}"):
                await admin.delete_topic(args.topic)
            print(f"Deleted topic {args.topic}.")
        elif args.action == "delete-records":
            return await delete_records(args, admin)
        elif args.action == "list":
            _list(args, await cluster.refresh(None))
        else:
            await _describe(args, cluster, admin)
        return 0

    return run_with_cluster(args, work)


def _list(args: argparse.Namespace, response: MetadataResponse) -> None:
    rows = [
        [t.topic, len(t.partitions), max((len(p.replicas) for p in t.partitions), default=0)]
        for t in sorted(response.topics, key=lambda t: t.topic)
        if not t.error_code
    ]
    if args.json:
        print_json(rows_as_json(LIST_COLUMNS, rows))
    elif rows:
        print_table([c.upper().replace("_", "-") for c in LIST_COLUMNS], rows)


async def _describe(args: argparse.Namespace, cluster: Cluster, admin: Admin) -> None:
    described = await admin.describe([args.topic] if args.topic else None)
    live = set(cluster.brokers)
    configs: dict[str, dict[str, str]] = {}
    if args.only == UNDER_MIN_ISR or not args.bootstrap:
        configs = await asyncio.to_thread(_read_configs, args, sorted(described))
    min_insync = {topic: min_insync_replicas(config) for topic, config in configs.items()}
    policies = {topic: cleanup_policy(config) for topic, config in configs.items()}
    chosen = select(described, args.only, live, min_insync)
    if args.json:
        print_json(describe_json(chosen, live, policies))
    elif chosen:
        print_table(
            DESCRIBE_COLUMNS,
            [partition_cells(topic, p, live, policies.get(topic)) for topic, p in chosen],
            highlight=[is_under_replicated(p) for _, p in chosen],
        )


def _read_configs(args: argparse.Namespace, topics: list[str]) -> dict[str, dict[str, str]]:
    with zookeeper_session(args, "topic configs for --under-min-isr-partitions") as zk:
        return {topic: topic_store.read_topic_config(zk, topic) for topic in topics}
