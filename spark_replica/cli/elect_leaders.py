"""`replog elect-leaders [--topic T [--partition P]]`: move leadership back to the preferred
replicas (the first of each assignment), like kafka-leader-election's preferred election.

It writes `/admin/preferred_replica_election` for the controller, then waits until the
metadata shows each partition led by its preferred replica (or says which are not: a
preferred replica that is down or out of sync cannot lead).
"""

from __future__ import annotations

import argparse
import asyncio

from spark_replica.cli.common import add_connection_options, run_with_cluster, zookeeper_session
from spark_replica.client import Cluster
from spark_replica.errors import ConfigError
from spark_replica.zk import topic_store

WAIT_S = 30.0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "elect-leaders", help="move leadership back to the preferred replicas"
    )
    parser.add_argument("--topic", help="only this topic (default: every topic)")
    parser.add_argument("--partition", type=int, help="only this partition of --topic")
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.partition is not None and args.topic is None:
        raise ConfigError("--partition needs --topic")

    async def work(cluster: Cluster) -> int:
        response = await cluster.refresh([args.topic] if args.topic else None)
        wanted = [
            (t.topic, p.partition)
            for t in response.topics
            for p in t.partitions
            if args.partition is None or p.partition == args.partition
        ]
        if not wanted:
            raise ConfigError("no such partition: check --topic and --partition")
        with zookeeper_session(args, "preferred replica elections") as zk:
            await asyncio.to_thread(topic_store.request_preferred_election, zk, wanted)
        misplaced = await _wait_until_preferred(cluster, wanted)
        led = len(wanted) - len(misplaced)
        print(f"{led} of {len(wanted)} partitions led by their preferred replica.")
        for topic, partition in misplaced:
            print(f"  {topic}-{partition}: its preferred replica cannot lead now")
        return 0 if not misplaced else 1

    return run_with_cluster(args, work)


async def _wait_until_preferred(
    cluster: Cluster, wanted: list[tuple[str, int]]
) -> list[tuple[str, int]]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    topics = sorted({t for t, _ in wanted})
    while True:
        response = await cluster.refresh(topics)
        leaders = {
            (t.topic, p.partition): (p.leader, p.replicas[0] if p.replicas else -1)
            for t in response.topics
            for p in t.partitions
        }
        misplaced = [tp for tp in wanted if tp not in leaders or leaders[tp][0] != leaders[tp][1]]
        if not misplaced or loop.time() > deadline:
            return misplaced
        await asyncio.sleep(0.1)
