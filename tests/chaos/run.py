"""Run chaos schedules against real brokers; print one JSON line of what was found.

    .venv/bin/python tests/chaos/run.py --schedules 10 --seed 1
    .venv/bin/python tests/chaos/run.py --netns --schedules 10   # as root
    .venv/bin/python tests/chaos/run.py --transactions --schedules 20

With --netns, ZooKeeper and each broker run on a host of their own (a network namespace)
and network partitions join the faults; where namespaces cannot be made it exits (2)
saying why. With --transactions, confluent-kafka transactional producers and
read_committed readers join the clients, and the line counts aborted_seen and
uncommitted_seen too (their lost and duplicated records are in lost and duplicated).

Schedule i runs with seed S + i; a seed in `problem_seeds` replays alone with
`--seed <it> --schedules 1`. One line per schedule goes to stderr, with the story of
each one that found a problem and where its brokers' logs were kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import random
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType

REPO_ROOT = Path(__file__).resolve().parents[2]


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--schedules", type=int, default=1, help="how many schedules to run")
    parser.add_argument("--seed", type=int, default=None, help="seed of the first schedule")
    parser.add_argument(
        "--verbose", action="store_true", help="tell every schedule's story on stderr"
    )
    parser.add_argument(
        "--netns",
        action="store_true",
        help="ZooKeeper and each broker on a host of their own (network namespaces, root), "
        "network partitions among the faults",
    )
    parser.add_argument(
        "--transactions",
        action="store_true",
        help="transactional producers and read_committed readers (Kafka listener) too",
    )
    args = parser.parse_args()
    if args.schedules < 1:
        parser.error("--schedules must be 1 or more")
    seed = random.randrange(1_000_000) if args.seed is None else args.seed
    # Run as a script, the repository root is not on the path: the harness lives in tests.
    sys.path.insert(0, str(REPO_ROOT))
    from spark_replica.tools.netns.network import unavailable_reason
    from tests.chaos.runner import run_schedules
    from tests.chaos.schedule import NETNS_SETTINGS, ScheduleSettings

    reason = unavailable_reason() if args.netns else None
    if reason is not None:
        parser.exit(2, f"--netns is not possible on this machine: {reason}\n")

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    # kazoo warns of every connection dropped by a fault on purpose; keep stderr readable.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    root = Path(tempfile.mkdtemp(prefix="replog-chaos-"))
    settings = NETNS_SETTINGS if args.netns else ScheduleSettings()
    settings = dataclasses.replace(settings, transactions=args.transactions)
    summary = run_schedules(seed, args.schedules, root, settings, verbose=args.verbose)
    line = summary.as_json()
    if not line["problem_seeds"]:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
