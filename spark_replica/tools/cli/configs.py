"""`replog configs alter|describe`: a topic's config overrides, kept in ZooKeeper.

Configs are written straight to ZooKeeper, as Kafka's `kafka-configs.sh --zookeeper`
did, so these commands need --zookeeper or the cluster directory; there is no broker
API for them. Every key and value is checked before ZooKeeper is even reached: a bad
one exits 2 with a message naming it, and nothing is written. A min.insync.replicas
above the topic's replication factor is refused too (exit 2), as at creation: no
acks=all write could ever succeed.

`describe` (and `alter`, after writing) prints the overrides as a table; `describe
--json` prints `{"topic": "t", "config": {"key": "value", ...}}`.
"""

from __future__ import annotations

import argparse

from kazoo.client import KazooClient

from spark_replica.errors import UnknownTopicOrPartitionError
from spark_replica.tools.cli.arguments import add_topic_argument
from spark_replica.tools.cli.common import add_connection_options, zookeeper_session
from spark_replica.tools.cli.output import add_json_flag, print_json, print_table
from spark_replica.topic_config import (
    MIN_INSYNC_REPLICAS,
    check_min_insync_fits,
    parse_assignments,
)
from spark_replica.zk import topic_store


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    configs = subparsers.add_parser("configs", help="alter and describe topic configs")
    actions = configs.add_subparsers(dest="action", required=True)

    alter = actions.add_parser("alter", help="add, change or delete a topic's configs")
    add_topic_argument(alter, "the topic to configure")
    alter.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="configs to set, such as retention.ms=60000 (repeatable)",
    )
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="KEY[,KEY]",
        help="overrides to remove, back to the broker's default (repeatable)",
    )
    add_connection_options(alter)

    describe = actions.add_parser("describe", help="a topic's config overrides")
    add_topic_argument(describe, "the topic to describe")
    add_json_flag(describe)
    add_connection_options(describe)
    configs.set_defaults(handler=run)


def split_items(values: list[str]) -> list[str]:
    """`["a=1,b=2", "c=3"]` -> `["a=1", "b=2", "c=3"]`: each flag may list several."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def run(args: argparse.Namespace) -> int:
    if args.action == "alter":
        to_set = parse_assignments(split_items(args.add_config))
        to_delete = split_items(args.delete_config)
        topic_store.merge_topic_config({}, to_set, to_delete)
        with zookeeper_session(args, "topic configs") as zk:
            _check_min_insync(zk, args.topic, to_set)
            config = topic_store.alter_topic_config(zk, args.topic, to_set, to_delete)
        print(f"Completed updating config for topic {args.topic}.")
        _print_config(args.topic, config, as_json=False)
        return 0
    with zookeeper_session(args, "topic configs") as zk:
        config = _describe(zk, args.topic)
    _print_config(args.topic, config, as_json=args.json)
    return 0


def _check_min_insync(zk: KazooClient, topic: str, to_set: dict[str, str]) -> None:
    """Refuse a min.insync.replicas above the topic's replication factor, as creation does."""
    value = to_set.get(MIN_INSYNC_REPLICAS)
    if value is None:
        return
    assignment = topic_store.read_assignment(zk, topic)
    if assignment is None:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    replication_factor = min((len(r) for r in assignment.partitions.values()), default=0)
    check_min_insync_fits(topic, int(value), replication_factor)


def _describe(zk: KazooClient, topic: str) -> dict[str, str]:
    if topic_store.read_assignment(zk, topic) is None:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    return topic_store.read_topic_config(zk, topic)


def _print_config(topic: str, config: dict[str, str], *, as_json: bool) -> None:
    if as_json:
        print_json({"topic": topic, "config": dict(sorted(config.items()))})
    elif config:
        print_table(("CONFIG", "VALUE"), sorted(config.items()), title=f"Overrides of {topic}")
    else:
        print(f"Topic {topic} has no config overrides: the brokers' defaults apply.")
