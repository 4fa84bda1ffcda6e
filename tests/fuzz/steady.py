"""The well-behaved client: one record at a time to its own topic while the fuzz runs.

    python -m tests.fuzz.steady --listener kafka --bootstrap HOST:PORT --topic steady

What a hostile client may cost others is the question: a broker that refuses every
hostile case but holds its event loop for seconds doing so has still failed its other
clients. So a real client (confluent-kafka on the Kafka listener, replog's own producer
on the replog listener; acks=all, no linger; logged in as the super user when
FUZZ_STEADY_PASSWORD is set) sends a record, waits for its acknowledgement, sleeps
INTERVAL_S, and so on until its stdin is closed; then it prints one JSON line: records
sent, failed, and the latency quantiles in milliseconds (a failure counts with the time
it took to fail). Each line read from stdin before that ends a phase: the figures so far
are printed and the next phase starts from none (the fuzzer's baseline, before the
fuzzing starts). It runs as a process of its own, so that the fuzzer's CPU-bound frame
making does not show up in its latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

INTERVAL_S = 0.05
DELIVERY_TIMEOUT_MS = 30_000
VALUE = b"steady" * 16
PASSWORD_ENV = "FUZZ_STEADY_PASSWORD"
MECHANISM = "SCRAM-SHA-256"
STOP_TIMEOUT_S = DELIVERY_TIMEOUT_MS / 1000 + 20
REPO_ROOT = Path(__file__).resolve().parents[2]


class SteadyProcess:
    """The fuzzer's side: start the client process, and stop it for its figures."""

    def __init__(
        self,
        listener: str,
        bootstrap: str,
        topic: str,
        log: Path,
        login: tuple[str, str] | None = None,
    ) -> None:
        command = [
            sys.executable,
            "-m",
            "tests.fuzz.steady",
            "--listener",
            listener,
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
        ]
        env = dict(os.environ)
        if login is not None:
            command += ["--user", login[0]]
            env[PASSWORD_ENV] = login[1]
        with log.open("ab") as stderr:
            self.process = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )

    def end_phase(self) -> dict[str, Any]:
        """The figures of the phase so far; the next starts from none (blocks: a thread's)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(b"\n")
            self.process.stdin.flush()
            summary: dict[str, Any] = json.loads(self.process.stdout.readline())
        except (OSError, ValueError) as exc:
            return {"error": f"the well-behaved client did not answer: {exc!r}"}
        return summary

    def stop(self) -> dict[str, Any]:
        """Close its stdin and read its last JSON line; kill it (by its PID) if it hangs."""
        try:
            out, _ = self.process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return {"error": "the well-behaved client did not stop"}
        with contextlib.suppress(ValueError, IndexError):
            summary: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
            return summary
        return {"error": f"the well-behaved client exited {self.process.returncode}"}


class Latencies:
    """Latencies of the phase so far: the producing thread adds, the main thread takes."""

    def __init__(self) -> None:
        self.samples_ms: list[float] = []
        self.failed = 0
        self._lock = threading.Lock()

    def add(self, started: float, ok: bool) -> None:
        with self._lock:
            self.samples_ms.append((time.monotonic() - started) * 1000)
            self.failed += not ok

    def take(self) -> dict[str, Any]:
        """The phase's figures; the next phase starts from none."""
        with self._lock:
            ordered = sorted(self.samples_ms)
            failed = self.failed
            self.samples_ms, self.failed = [], 0

        def quantile(q: float) -> float | None:
            if not ordered:
                return None
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

        return {
            "sent": len(ordered),
            "failed": failed,
            "p50_ms": quantile(0.5),
            "p99_ms": quantile(0.99),
            "max_ms": round(ordered[-1], 1) if ordered else None,
        }


def produce_kafka(args: argparse.Namespace, stop: threading.Event, latencies: Latencies) -> None:
    from confluent_kafka import Producer

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "linger.ms": 0,
        "message.timeout.ms": DELIVERY_TIMEOUT_MS,
    }
    if args.user:
        config |= {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM,
            "sasl.username": args.user,
            "sasl.password": os.environ[PASSWORD_ENV],
        }
    producer = Producer(config)
    first = True
    while not stop.is_set():
        outcome: list[bool] = []

        def delivered(error: object, _message: object, box: list[bool] = outcome) -> None:
            box.append(error is None)

        started = time.monotonic()
        producer.produce(args.topic, VALUE, on_delivery=delivered)
        deadline = started + DELIVERY_TIMEOUT_MS / 1000 + 5
        while not outcome and time.monotonic() < deadline:
            producer.poll(0.01)
        if not first:  # the first pays for connecting and metadata
            latencies.add(started, bool(outcome) and outcome[0])
        first = False
        stop.wait(INTERVAL_S)
    producer.flush(5)


def produce_replog(args: argparse.Namespace, stop: threading.Event, latencies: Latencies) -> None:
    asyncio.run(_produce_replog(args, stop, latencies))


async def _produce_replog(
    args: argparse.Namespace, stop: threading.Event, latencies: Latencies
) -> None:
    from spark_replica.client import Cluster, Producer, ProducerConfig, parse_bootstrap
    from spark_replica.errors import ReplogError
    from spark_replica.security.settings import SecurityConfig
    from spark_replica.tools.launcher.local_security import scram_jaas_config

    security = None
    if args.user:
        security = SecurityConfig.from_properties(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": MECHANISM,
                "sasl.jaas.config": scram_jaas_config(args.user, os.environ[PASSWORD_ENV]),
            }
        )
    cluster = Cluster(parse_bootstrap(args.bootstrap), client_id="steady", security=security)
    config = ProducerConfig(linger_ms=0, delivery_timeout_ms=DELIVERY_TIMEOUT_MS)
    first = True
    try:
        async with Producer(cluster, config) as producer:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    future = await producer.send_future(args.topic, VALUE, partition=0)
                    await future
                    ok = True
                except ReplogError:
                    ok = False
                if not first:
                    latencies.add(started, ok)
                first = False
                await asyncio.sleep(INTERVAL_S)
    finally:
        await cluster.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--listener", choices=("replog", "kafka"), required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--user", help="log in as this user (password in FUZZ_STEADY_PASSWORD)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    latencies = Latencies()
    produce: Callable[[argparse.Namespace, threading.Event, Latencies], None] = (
        produce_kafka if args.listener == "kafka" else produce_replog
    )
    worker = threading.Thread(target=produce, args=(args, stop, latencies), daemon=True)
    worker.start()
    for _ in sys.stdin:  # a line ends a phase; the end of stdin ends the run
        print(json.dumps(latencies.take()), flush=True)
    stop.set()
    worker.join(DELIVERY_TIMEOUT_MS / 1000 + 10)
    print(json.dumps(latencies.take()), flush=True)


if __name__ == "__main__":
    main()
