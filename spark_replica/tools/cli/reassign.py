"""`replog reassign`: move partitions to other brokers, like kafka-reassign-partitions.

    replog reassign --generate --brokers 2,3,4 --topics events --output plan.json
    replog reassign --plan plan.json                         # start it
    replog reassign --status [--plan plan.json] [--wait S]   # progress per partition

The plan is checked whole against the cluster before `/admin/reassign_partitions` is
written; the controller then adds the new replicas, waits until they are in sync, moves
leadership if the leader leaves, and deletes the removed replicas. Status reads the plan
still pending in ZooKeeper (or the given file) and each replica's log end offset.

`--status` prints a table, or with `--json` one object per partition of the plan:
`{"topic", "partition", "state": "moving"|"done"|"not running"|"does not exist",
"target": [...], "replicas": [...], "isr": [...], "progress": 0.0-1.0}` (replicas and
ISR null when the partition does not exist, progress null unless it is moving); `[]`
when no reassignment is running. It exits 1 while some partition is still moving.
`--generate --json` prints `{"current": PLAN, "proposed": PLAN}` and `--plan FILE
--json` the plan it started, each PLAN in the plan file's own format
(`{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

from spark_replica import reassignment
from spark_replica.client import Admin, Cluster, PartitionDescription
from spark_replica.errors import ConfigError
from spark_replica.reassignment import PartitionMove
from spark_replica.tools.cli.common import (
    add_connection_options,
    run_with_cluster,
    zookeeper_session,
)
from spark_replica.tools.cli.output import add_json_flag, plural, print_json, print_table
from spark_replica.tools.cli.progress import Waiting, waiting
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store

STATUS_POLL_S = 0.5
MOVING, DONE, NOT_RUNNING, MISSING = "moving", "done", "not running", "does not exist"
STATUS_COLUMNS = ("TOPIC", "PARTITION", "STATE", "TARGET", "REPLICAS", "ISR", "PROGRESS")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("reassign", help="move partitions to other brokers")
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--generate",
        action="store_true",
        help="propose a plan: print it, or write it to --output FILE",
    )
    action.add_argument(
        "--status", action="store_true", help="show the progress of the running (or --plan) plan"
    )
    parser.add_argument(
        "--plan",
        type=Path,
        metavar="FILE",
        help="start the moves in FILE (with --status: the plan to report on)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="with --generate: write the proposed plan to FILE, ready for --plan "
        "(default: print it)",
    )
    parser.add_argument(
        "--brokers", help="with --generate: the broker ids to spread over, such as 1,2,3"
    )
    parser.add_argument("--topics", help="with --generate: the topics to move, such as t1,t2")
    parser.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="with --status: poll until done or this many seconds passed (default: report once)",
    )
    add_json_flag(parser)
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.output is not None and not args.generate:
        raise ConfigError("--output goes with --generate: it is where the proposed plan goes")
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
    if args.output is not None:
        _write_plan(args.output, proposal)
    if args.json:
        print_json(
            {
                "current": json.loads(reassignment.plan_to_json(current)),
                "proposed": json.loads(reassignment.plan_to_json(proposal)),
            }
        )
        return 0
    print("Current assignment (keep it to roll back):")
    print(reassignment.plan_to_json(current))
    if args.output is not None:
        print(
            f"Proposed assignment written to {args.output}; start it with "
            f"`replog reassign --plan {args.output}`."
        )
        return 0
    print("Proposed assignment (save it and run `replog reassign --plan FILE`):")
    print(reassignment.plan_to_json(proposal))
    return 0


def _write_plan(path: Path, moves: list[PartitionMove]) -> None:
    try:
        path.write_text(reassignment.plan_to_json(moves) + "\n")
    except OSError as exc:
        raise ConfigError(f"cannot write the plan to {path}: {exc.strerror}") from None


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
    if args.json:
        print_json(json.loads(reassignment.plan_to_json(moves)))
        return 0
    print(
        f"Started moving {plural(len(moves), 'partition')}; follow with `replog reassign --status`."
    )
    return 0


async def _status(args: argparse.Namespace, cluster: Cluster) -> int:
    with waiting("waiting for the reassignment to finish") as progress:
        statuses = await _poll_statuses(args, cluster, progress)
    if statuses is None:
        if args.json:
            print_json([])
        else:
            print("No reassignment is running.")
        return 0
    if args.json:
        print_json([s.as_json() for s in statuses])
    else:
        _print_statuses(statuses)
    return 0 if all(s.state != MOVING for s in statuses) else 1


async def _poll_statuses(
    args: argparse.Namespace, cluster: Cluster, progress: Waiting
) -> list[MoveStatus] | None:
    """Each move's status once, or (with --wait) once every move is done or time is up;
    None when no reassignment is running and no plan was given."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (args.wait or 0)
    given = _read_plan(args.plan) if args.plan else None
    while True:
        with zookeeper_session(args, "reassignments") as zk:
            pending = await asyncio.to_thread(topic_store.read_reassignment, zk)
        moves = given if given is not None else pending
        if not moves:
            return None
        running = {m.tp for m in pending}
        described = await Admin(cluster).describe(sorted({m.tp.topic for m in moves}))
        by_tp = {TopicPartition(t, d.partition): d for t, ds in described.items() for d in ds}
        statuses = [move_status(m, by_tp.get(m.tp), m.tp in running) for m in moves]
        moved = sum(m.tp not in running for m in moves)
        if moved == len(moves) or args.wait is None or loop.time() >= deadline:
            return statuses
        progress.update(f"{moved} of {len(moves)} partitions moved")
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


@dataclass(frozen=True, slots=True)
class MoveStatus:
    """One partition's row of `--status`; replicas, ISR and progress are None when the
    partition does not exist, progress also when it is not moving."""

    topic: str
    partition: int
    state: str
    target: list[int]
    replicas: list[int] | None
    isr: list[int] | None
    progress: float | None

    def as_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "state": self.state,
            "target": self.target,
            "replicas": self.replicas,
            "isr": self.isr,
            "progress": self.progress,
        }


def move_status(
    move: PartitionMove, description: PartitionDescription | None, running: bool
) -> MoveStatus:
    tp, target = move.tp, list(move.replicas)
    if description is None:
        return MoveStatus(tp.topic, tp.partition, MISSING, target, None, None, None)
    if running:
        state, progress = MOVING, round(catch_up_fraction(move, description), 4)
    else:
        state, progress = (DONE if description.replicas == target else NOT_RUNNING), None
    return MoveStatus(
        tp.topic, tp.partition, state, target, description.replicas, description.isr, progress
    )


def _print_statuses(statuses: list[MoveStatus]) -> None:
    rows = [
        [
            s.topic,
            s.partition,
            s.state,
            s.target,
            s.replicas,
            s.isr,
            None if s.progress is None else f"{s.progress:.1%}",
        ]
        for s in statuses
    ]
    print_table(STATUS_COLUMNS, rows, highlight=[s.state == MISSING for s in statuses])
