"""The CLI's produce and consume ride through a leader change with no help from the user."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import BrokerFactory, create, leadership, replog, run, start_cluster

pytestmark = pytest.mark.slow

TIMEOUT_S = 90


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "spark_replica.tools.cli.main", *args]


def test_cli_produce_and_consume_survive_a_leader_sigkill(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers.brokers.values())
    run(create(brokers.bootstrap, "ride", rf=3, **{"min.insync.replicas": "2"}))
    leader = run(leadership(brokers.bootstrap, "ride"))[0]["leader"]
    consumer = subprocess.Popen(
        cli(
            "consume",
            "ride",
            "--from-beginning",
            "--max-records",
            "200",
            "--timeout",
            "60",
            "--bootstrap",
            bootstrap,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        first = "".join(f"before-{i}\n" for i in range(100)).encode()
        produced = replog("produce", "ride", "--bootstrap", bootstrap, stdin=first)
        assert produced.returncode == 0, produced.stderr
        brokers.brokers[leader].kill()
        second = "".join(f"after-{i}\n" for i in range(100)).encode()
        produced = replog("produce", "ride", "--bootstrap", bootstrap, stdin=second)
        assert produced.returncode == 0, produced.stderr
        out, err = consumer.communicate(timeout=TIMEOUT_S)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 0, err
    lines = out.decode().splitlines()
    assert lines == [f"before-{i}" for i in range(100)] + [f"after-{i}" for i in range(100)]
