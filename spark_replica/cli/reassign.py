"""`replog reassign`: move partitions to other brokers, like kafka-reassign-partitions.

    replog reassign --generate --brokers 2,3,4 --topics events   # propose a plan (prints it)
    replog reassign --plan plan.json                             # start it
    replog reassign --status [--plan plan.json] [--wait]         # progress per partition

The plan is checked whole against the cluster before `/admin/reassign_partitions` is
written; the controller then adds the new replicas, waits until they are in sync, moves
leadership if the leader leaves, and deletes the removed replicas. Status reads the plan
still pending in ZooKeeper (or the given file) and each replica's log end offset.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from spark_replica import reassignment
from spark_replica.cli.common import add_connection_options, run_with_cluster, zookeeper_session
from spark_replica.client import Admin, Cluster, PartitionDescription
from spark_replica.errors import ConfigError
from spark_replica.reassignment import PartitionMove
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store

BAR_WIDTH = 30
STATUS_POLL_S = 0.5


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("reassign", help="move partitions to other brokers")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--generate", action="store_true", help="print a proposed plan")
    action.add_argument(
        "--status", action="store_true", help="show the progress of the running (or --plan) plan"
    )
    parser.add_argument("--plan", type=Path, metavar="FILE", help="start the moves in FILE")
    parser.add_argument("--brokers", help="with --generate: the brokers to spread over, 1,2,3")
    parser.add_argument("--topics", help="with --generate: the topics to move, t1,t2")
    parser.add_argument(
        "--wait", type=float, metavar="SECONDS", help="with --status: poll until done or timeout"
    )
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.generate:
        return _generate(args)
    if args.status:
        return run_with_cluster(args, lambda cluster: _status(args, cluster))
    if args.plan is None:
        raise ConfigError("give --plan FILE to start a plan, --generate or --status")
    return _execute(args)


def _int_list(value: str | None, option: str) -> list[int]:
    if not value:
        raise ConfigError(f"{option} is required with --generate")
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"{option} must be comma-separated broker ids, not {value!r}") from None


def _generate(args: argparse.Namespace) -> int:
    brokers = _int_list(args.brokers, "--brokers")
    if not args.topics:
        raise ConfigError("--topics is required with --generate")
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    with zookeeper_session(args, "reassignments") as zk:
        assignments = topic_store.read_all_assignments(zk)
    proposal = reassignment.generate_plan(assignments, topics, brokers)
    current = [PartitionMove(m.tp, tuple(assignments[m.tp])) for m in proposal]
    print("Current assignment (keep it to roll back):")
    print(reassignment.plan_to_json(current))
    print("Proposed assignment (save it and run `replog reassign --plan FILE`):")
    print(reassignment.plan_to_json(proposal))
    return 0


def _read_plan(path: Path) -> list[PartitionMove]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the plan {path}: {exc.strerror}") from None
    return reassignment.parse_plan(text)


def _execute(args: argparse.Namespace) -> int:
    moves = _read_plan(args.plan)
    with zookeeper_session(args, "reassignments") as zk:
        topic_store.request_reassignment(zk, moves)
    print(f"Started moving {len(moves)} partition(s); follow with `replog reassign --status`.")
    return 0


async def _status(args: argparse.Namespace, cluster: Cluster) -> int:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (args.wait or 0)
    given = _read_plan(args.plan) if args.plan else None
    while True:
        with zookeeper_session(args, "reassignments") as zk:
            pending = await asyncio.to_thread(topic_store.read_reassignment, zk)
        moves = given if given is not None else pending
        if not moves:
            print("No reassignment is running.")
            return 0
        running = {m.tp for m in pending}
        described = await Admin(cluster).describe(sorted({m.tp.topic for m in moves}))
        by_tp = {TopicPartition(t, d.partition): d for t, ds in described.items() for d in ds}
        lines = [_status_line(m, by_tp.get(m.tp), m.tp in running) for m in moves]
        finished = all(m.tp not in running for m in moves)
        if finished or args.wait is None or loop.time() >= deadline:
            print("\n".join(lines))
            return 0 if finished else 1
        await asyncio.sleep(STATUS_POLL_S)


def catch_up_fraction(move: PartitionMove, description: PartitionDescription) -> float:
    """How far the target replicas have copied the leader's log, 0.0 to 1.0.

    Replicas already in the ISR count as done; the others by their log end offset over
    the leader's.
    """
    leader_end = description.log_end_offsets.get(description.leader, -1)
    parts = []
    for replica in move.replicas:
        if replica in description.isr:
            parts.append(1.0)
        elif leader_end <= 0:
            parts.append(0.0)
        else:
            end = max(description.log_end_offsets.get(replica, 0), 0)
            parts.append(min(end / leader_end, 1.0))
    return sum(parts) / len(parts)


def _status_line(
    move: PartitionMove, description: PartitionDescription | None, running: bool
) -> str:
    target = list(move.replicas)
    if description is None:
        return f"{move.tp}: does not exist"
    if not running:
        state = "done" if description.replicas == target else "not running"
        return f"{move.tp}: {state}, replicas {description.replicas}"
    fraction = catch_up_fraction(move, description)
    if sys.stdout.isatty():
        filled = round(fraction * BAR_WIDTH)
        progress = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction:6.1%}"
    else:
        progress = f"{fraction:.1%}"
    return (
        f"{move.tp}: moving to {target} {progress} "
        f"(replicas {description.replicas}, isr {description.isr})"
    )
