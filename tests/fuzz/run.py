"""Fuzz a live broker with mutated requests of every API and random bytes.

    python tests/fuzz/run.py --frames 1000000 --seed 1
    python tests/fuzz/run.py --frames 1000000 --hostile --listener kafka --sasl --max-seconds 480

Starts a real ZooKeeper and real broker processes in a temporary directory, makes a few
topics, sends the frames (see driver.py), and prints one JSON line: frames, connections,
crashes (broker restarts: 0 unless the broker died or hung), the broker's RSS before and
after, answers by error code, and where any saved frames are. `--replay FILE` sends
saved frames one by one instead and names the first one after which the broker is down.

`--listener` picks the listener fuzzed (replog's protocol or Kafka's); `--sasl` secures
the cluster (SASL_PLAINTEXT, SCRAM), and half the fuzzer's connections log in. `--hostile`
adds the hostile cases (hostile.py: sizes and counts that lie, compression bombs, one
partition repeated hundreds of times, requests before login, slow senders) and a
well-behaved client producing throughout, whose latencies (well_behaved_p99_ms) say what
the rest cost everyone else. Every process started is stopped at the end, on error and
on SIGTERM too.
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
from tests.fuzz.login import KAFKA, REPLOG

CONNECTIONS = 8
SASL_CONNECTIONS = 32


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=10_000, help="frames to send")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--brokers", type=int, default=1, help="brokers in the cluster")
    parser.add_argument(
        "--connections",
        type=int,
        help=f"connections at a time ({CONNECTIONS}; {SASL_CONNECTIONS} with --sasl, whose "
        "refused logins and requests before login each cost the broker's close delay)",
    )
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
    parser.add_argument(
        "--listener", choices=(REPLOG, KAFKA), default=REPLOG, help="the listener fuzzed"
    )
    parser.add_argument("--sasl", action="store_true", help="SASL_PLAINTEXT listeners, SCRAM")
    parser.add_argument(
        "--hostile",
        action="store_true",
        help="hostile cases, the slow lane and a well-behaved client (Kafka's size limit)",
    )
    return parser.parse_args(argv)


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = parse_args(argv)
    # kazoo reports each closed session on stderr; the JSON line is the run's output.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    with tempfile.TemporaryDirectory(prefix="replog-fuzz-") as root:
        cluster = FuzzCluster(
            Path(root),
            args.brokers,
            hostile=args.hostile,
            sasl=args.sasl,
            kafka_listener=args.listener == KAFKA,
        )
        try:
            cluster.setup()
            if args.replay is not None:
                return asyncio.run(replay(cluster, args.replay, args.listener))
            settings = FuzzSettings(
                args.frames,
                args.seed,
                args.connections or (SASL_CONNECTIONS if args.sasl else CONNECTIONS),
                args.check_every,
                args.findings.resolve(),
                args.progress,
                args.max_seconds,
                args.listener,
                args.hostile,
            )
            return asyncio.run(fuzz(cluster, settings))
        finally:
            cluster.close()


if __name__ == "__main__":
    print(json.dumps(main()), flush=True)
