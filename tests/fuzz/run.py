"""Fuzz a live broker with mutated requests of every API and random bytes.

    python tests/fuzz/run.py --frames 1000000 --seed 1

Starts a real ZooKeeper and real broker processes in a temporary directory, makes a few
topics, sends the frames (see driver.py), and prints one JSON line: frames, connections,
broker restarts (0 unless the broker died or hung), the broker's RSS before and after,
answers by error code, and where any saved frames are. `--replay FILE` sends saved
frames one by one instead and names the first one after which the broker is down.
Every process started is stopped at the end, on error and on SIGTERM too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fuzz.cluster import FuzzCluster
from tests.fuzz.driver import FuzzSettings, fuzz, replay


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=10_000, help="frames to send")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--brokers", type=int, default=1, help="brokers in the cluster")
    parser.add_argument("--connections", type=int, default=8, help="connections at a time")
    parser.add_argument(
        "--check-every", type=int, default=2000, help="frames between broker health checks"
    )
    parser.add_argument(
        "--findings", type=Path, default=Path("fuzz-findings"), help="where frames are saved"
    )
    parser.add_argument("--progress", action="store_true", help="a JSON line per chunk on stderr")
    parser.add_argument(
        "--max-seconds", type=float, help="stop after this long, whatever --frames says"
    )
    parser.add_argument("--replay", type=Path, help="send the frames saved in this file")
    return parser.parse_args(argv)


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = parse_args(argv)
    # kazoo reports each closed session on stderr; the JSON line is the run's output.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    with tempfile.TemporaryDirectory(prefix="replog-fuzz-") as root:
        cluster = FuzzCluster(Path(root), args.brokers)
        try:
            cluster.setup()
            if args.replay is not None:
                return asyncio.run(replay(cluster, args.replay))
            settings = FuzzSettings(
                args.frames,
                args.seed,
                args.connections,
                args.check_every,
                args.findings.resolve(),
                args.progress,
                args.max_seconds,
            )
            return asyncio.run(fuzz(cluster, settings))
        finally:
            cluster.close()


if __name__ == "__main__":
    print(json.dumps(main()), flush=True)
