"""Run chaos schedules against real brokers; print one JSON line of what was found.

    .venv/bin/python tests/chaos/run.py --schedules 10 --seed 1

Schedule i runs with seed S + i; a seed in `problem_seeds` replays alone with
`--seed <it> --schedules 1`. One line per schedule goes to stderr, with the story of
each one that found a problem and where its brokers' logs were kept.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
    if args.schedules < 1:
        parser.error("--schedules must be 1 or more")
    seed = random.randrange(1_000_000) if args.seed is None else args.seed
    # Run as a script, the repository root is not on the path: the harness lives in tests.
    sys.path.insert(0, str(REPO_ROOT))
    from tests.chaos.runner import run_schedules

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    # kazoo warns of every connection dropped by a fault on purpose; keep stderr readable.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    root = Path(tempfile.mkdtemp(prefix="replog-chaos-"))
    summary = run_schedules(seed, args.schedules, root, verbose=args.verbose)
    line = summary.as_json()
    if not line["problem_seeds"]:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
