"""`replog topics create|alter|delete|list|describe`."""

from __future__ import annotations

import argparse
import json

from spark_replica.cli.common import add_connection_options, run_with_cluster
from spark_replica.client import Admin, Cluster
from spark_replica.topic_config import parse_assignments


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    topics = subparsers.add_parser("topics", help="create, delete, list and describe topics")
    actions = topics.add_subparsers(dest="action", required=True)

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    add_connection_options(create)

    alter = actions.add_parser("alter", help="grow a topic to more partitions")
    alter.add_argument("name")
    alter.add_argument("--partitions", type=int, required=True, help="the new total")
    add_connection_options(alter)

    delete = actions.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("name")
    add_connection_options(delete)

    listing = actions.add_parser("list", help="list topic names")
    add_connection_options(listing)

    describe = actions.add_parser("describe", help="leader, epoch, replicas, ISR and HW")
    describe.add_argument("name", nargs="?")
    describe.add_argument("--json", action="store_true", help="one JSON document")
    add_connection_options(describe)
    topics.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    async def work(cluster: Cluster) -> int:
        admin = Admin(cluster)
        if args.action == "create":
            configs = parse_assignments(args.config)
            await admin.create_topic(args.name, args.partitions, args.replication_factor, configs)
            print(f"Created topic {args.name}.")
        elif args.action == "alter":
            await admin.create_partitions(args.name, args.partitions)
            print(f"Topic {args.name} now has {args.partitions} partitions.")
        elif args.action == "delete":
            await admin.delete_topic(args.name)
            print(f"Deleted topic {args.name}.")
        elif args.action == "list":
            for name in await admin.list_topics():
                print(name)
        else:
            described = await admin.describe([args.name] if args.name else None)
            if args.json:
                document = [
                    {"topic": topic, "partitions": [p.as_json() for p in partitions]}
                    for topic, partitions in described.items()
                ]
                print(json.dumps(document))
            else:
                _print_table(described)
        return 0

    return run_with_cluster(args, work)


def _print_table(described: dict) -> None:
    for topic, partitions in described.items():
        print(f"Topic: {topic}\tPartitionCount: {len(partitions)}")
        for p in partitions:
            print(
                f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                f"LeaderEpoch: {p.leader_epoch}\tReplicas: {','.join(map(str, p.replicas))}\t"
                f"Isr: {','.join(map(str, p.isr))}\tHighWatermark: {p.high_watermark}\t"
                f"LogEndOffsets: {','.join(f'{r}={o}' for r, o in p.log_end_offsets.items())}"
            )
