"""`replog elect-leaders [--topic T [--partition P]]`: move leadership back to the preferred
replicas (the first of each assignment), like kafka-leader-election's preferred election.

It writes `/admin/preferred_replica_election` for the controller (once an election already
there is done, up to 30 s), then waits until the metadata shows each partition led by its
preferred replica (or says which are not: a preferred replica that is down or out of sync
cannot lead). It exits 1 if any cannot.

It prints a table that says which partitions moved (`moved 2 -> 1`) and which were
already led by their preferred replica, or with `--json` one object per partition:
`{"topic", "partition", "previous_leader", "leader", "preferred_replica",
"preferred_leads": true|false}` (-1: none).
"""

from __future__ import annotations

import argparse
import asyncio

from kazoo.client import KazooClient

from spark_replica.client import Cluster
from spark_replica.errors import ConfigError, ElectionInProgressError
from spark_replica.tools.cli.common import (
    add_connection_options,
    run_with_cluster,
    zookeeper_session,
)
from spark_replica.tools.cli.output import add_json_flag, plural, print_json, print_table
from spark_replica.tools.cli.progress import Waiting, waiting
from spark_replica.wire.native.metadata import NO_LEADER
from spark_replica.zk import topic_store

WAIT_S = 30.0
POLL_S = 0.1
COLUMNS = ("TOPIC", "PARTITION", "PREVIOUS-LEADER", "LEADER", "PREFERRED", "RESULT")

# (topic, partition) -> (current leader, preferred replica); -1 when there is none.
Leaders = dict[tuple[str, int], tuple[int, int]]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "elect-leaders", help="move leadership back to the preferred replicas"
    )
    parser.add_argument("--topic", help="only this topic (default: every topic)")
    parser.add_argument(
        "--partition", type=int, help="only this partition of --topic (default: all of them)"
    )
    add_json_flag(parser)
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.partition is not None and args.topic is None:
        raise ConfigError("--partition needs --topic")

    async def work(cluster: Cluster) -> int:
        response = await cluster.refresh([args.topic] if args.topic else None)
        before = {
            (t.topic, p.partition): p.leader
            for t in response.topics
            for p in t.partitions
            if args.partition is None or p.partition == args.partition
        }
        wanted = list(before)
        if not wanted:
            raise ConfigError("no such partition: check --topic and --partition")
        with zookeeper_session(args, "preferred replica elections") as zk:
            await request_when_free(zk, wanted)
        with waiting(f"waiting for the preferred replicas of {len(wanted)} partitions") as w:
            leaders = await _wait_until_preferred(cluster, sorted(wanted), w)
        _report(args, leaders, before)
        return 0 if not misplaced(leaders) else 1

    return run_with_cluster(args, work)


async def request_when_free(zk: KazooClient, wanted: list[tuple[str, int]]) -> None:
    """ZooKeeper holds one election request at a time: one already there (another
    `elect-leaders`, or the controller not yet done with it) is waited out, up to WAIT_S,
    rather than failing a command the user could only run again."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    with waiting("waiting for the preferred replica election in progress to finish") as w:
        while True:
            try:
                await asyncio.to_thread(topic_store.request_preferred_election, zk, wanted)
                return
            except ElectionInProgressError:
                if loop.time() > deadline:
                    raise
            w.update("another election is still in progress")
            await asyncio.sleep(POLL_S)


def preferred_leads(leader: int, preferred: int) -> bool:
    return leader != NO_LEADER and leader == preferred


def misplaced(leaders: Leaders) -> list[tuple[str, int]]:
    return [tp for tp, pair in leaders.items() if not preferred_leads(*pair)]


def moved(leader: int, previous: int) -> bool:
    return leader != NO_LEADER and leader != previous


def result_text(leader: int, preferred: int, previous: int) -> str:
    if not preferred_leads(leader, preferred):
        return "its preferred replica cannot lead now"
    if moved(leader, previous):
        return f"moved {leader_name(previous)} -> {leader}"
    return "already led by its preferred replica"


def leader_name(leader: int) -> str:
    return "none" if leader == NO_LEADER else str(leader)


def _report(args: argparse.Namespace, leaders: Leaders, before: dict[tuple[str, int], int]) -> None:
    if args.json:
        print_json(
            [
                {
                    "topic": topic,
                    "partition": partition,
                    "previous_leader": before[(topic, partition)],
                    "leader": leader,
                    "preferred_replica": preferred,
                    "preferred_leads": preferred_leads(leader, preferred),
                }
                for (topic, partition), (leader, preferred) in leaders.items()
            ]
        )
        return
    rows = [
        [
            topic,
            partition,
            leader_name(before[(topic, partition)]),
            leader_name(leader),
            leader_name(preferred),
            result_text(leader, preferred, before[(topic, partition)]),
        ]
        for (topic, partition), (leader, preferred) in leaders.items()
    ]
    print_table(COLUMNS, rows, highlight=[not preferred_leads(*pair) for pair in leaders.values()])
    led = len(leaders) - len(misplaced(leaders))
    changed = sum(moved(leader, before[tp]) for tp, (leader, _) in leaders.items())
    print(
        f"{led} of {len(leaders)} partitions led by their preferred replica; "
        f"leadership of {plural(changed, 'partition')} moved."
    )


async def _wait_until_preferred(
    cluster: Cluster, wanted: list[tuple[str, int]], progress: Waiting
) -> Leaders:
    """Each wanted partition's leader and preferred replica, once all match or WAIT_S
    has passed (a partition the metadata no longer shows has neither)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    topics = sorted({t for t, _ in wanted})
    while True:
        response = await cluster.refresh(topics)
        known = {
            (t.topic, p.partition): (p.leader, p.replicas[0] if p.replicas else NO_LEADER)
            for t in response.topics
            for p in t.partitions
        }
        leaders = {tp: known.get(tp, (NO_LEADER, NO_LEADER)) for tp in wanted}
        behind = misplaced(leaders)
        if not behind or loop.time() > deadline:
            return leaders
        progress.update(
            f"{len(wanted) - len(behind)} of {len(wanted)} led by their preferred replica"
        )
        await asyncio.sleep(POLL_S)
