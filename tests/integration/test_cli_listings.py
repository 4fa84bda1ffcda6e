"""The CLI's listings against real brokers: `--json` of each one, kafka-topics' describe
filters after a broker is killed, and `--bootstrap-server` as Kafka's tools spell it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_replica.reassignment import PartitionMove, plan_to_json
from spark_replica.tools.cli.main import main
from spark_replica.topics import TopicPartition
from tests.support import BrokerFactory, create, replog, run, start_cluster

pytestmark = pytest.mark.slow

DEADLINE_S = 40.0


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., str]:
    """The command line's main() in this process, returning what it printed: the listings
    are many commands, and an interpreter started for each costs a second. Exit codes
    and stderr of a real `replog` process are checked where they are the point."""

    def ok(*args: str) -> str:
        capsys.readouterr()
        code = main(list(args))
        printed = capsys.readouterr()
        assert code == 0, printed.err
        return printed.out

    return ok


def ok_json(cli: Callable[..., str], *args: str) -> Any:
    return json.loads(cli(*args, "--json"))


def test_every_listing_prints_json_and_a_table(
    brokers: BrokerFactory, tmp_path: Path, cli: Callable[..., str]
) -> None:
    broker = brokers.start(1)
    server = ["--bootstrap-server", broker.address]
    zookeeper = ["--zookeeper", brokers.zk_connect]

    cli("topics", "create", "t", "--config", "retention.ms=60000", *server)
    assert ok_json(cli, "topics", "list", *server) == [
        {"topic": "t", "partitions": 1, "replication_factor": 1}
    ]
    assert "REPLICATION-FACTOR" in cli("topics", "list", *server)
    (described,) = ok_json(cli, "topics", "describe", "t", *server)
    (partition,) = described["partitions"]
    assert partition["topic"] == "t" and partition["leader"] == 1
    assert (partition["replicas"], partition["isr"], partition["offline_replicas"]) == (
        [1],
        [1],
        [],
    )
    assert (partition["high_watermark"], partition["log_end_offsets"]) == (0, {"1": 0})
    assert "LOG-END-OFFSETS" in cli("topics", "describe", "t", *server)

    assert ok_json(cli, "configs", "describe", "--topic", "t", *zookeeper) == {
        "topic": "t",
        "config": {"retention.ms": "60000"},
    }
    assert "retention.ms" in cli("configs", "describe", "--topic", "t", *zookeeper)

    assert ok_json(cli, "elect-leaders", "--topic", "t", *zookeeper) == [
        {
            "topic": "t",
            "partition": 0,
            "previous_leader": 1,
            "leader": 1,
            "preferred_replica": 1,
            "preferred_leads": True,
        }
    ]
    assert "1 of 1 partitions" in cli("elect-leaders", "--topic", "t", *zookeeper)

    assert ok_json(cli, "reassign", "--status", *zookeeper) == []
    plan = tmp_path / "plan.json"
    plan.write_text(plan_to_json([PartitionMove(TopicPartition("t", 0), (1,))]))
    (status,) = ok_json(cli, "reassign", "--status", "--plan", str(plan), *zookeeper)
    assert (status["topic"], status["partition"], status["state"]) == ("t", 0, "done")
    assert status["target"] == status["replicas"] == [1]
    assert "done" in cli("reassign", "--status", "--plan", str(plan), *zookeeper)

    added = replog("users", "create", "alice", "--password-stdin", *server, stdin=b"pw\n")
    assert added.returncode == 0, added.stderr.decode()
    assert ok_json(cli, "users", "list", *server) == [
        {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096}
    ]
    cli("acls", "add", "--allow-principal", "User:alice", "--topic", "t", *server)
    assert ok_json(cli, "acls", "list", *server) == [
        {
            "resource_type": "Topic",
            "pattern_type": "Literal",
            "resource": "t",
            "principal": "User:alice",
            "permission": "Allow",
            "operation": "All",
            "host": "*",
        }
    ]
    assert "User:alice" in cli("acls", "list", *server)

    assert broker.kafka_address is not None
    assert ok_json(cli, "groups", "list", "--bootstrap-server", broker.kafka_address) == []


def partitions_of(document: list[dict[str, Any]]) -> set[tuple[str, int]]:
    return {(p["topic"], p["partition"]) for t in document for p in t["partitions"]}


def wait_for_json(
    cli: Callable[..., str], args: list[str], expected: set[tuple[str, int]]
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        document = ok_json(cli, *args)
        if partitions_of(document) == expected:
            return document
        assert time.monotonic() < deadline, f"{args}: {document}"
        time.sleep(0.5)


def test_describe_filters_after_a_broker_kill(
    brokers: BrokerFactory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    cli: Callable[..., str],
) -> None:
    start_cluster(brokers)
    server = ["--bootstrap-server", ",".join(f"{h}:{p}" for h, p in brokers.bootstrap)]
    zookeeper = ["--zookeeper", brokers.zk_connect]
    created = replog(
        "topics", "create", "spread", "--partitions", "2", "--replication-factor", "3",
        "--config", "min.insync.replicas=3", *server,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr.decode()
    run(create(brokers.bootstrap, "lonely", partitions=3, rf=1))
    (described,) = ok_json(cli, "topics", "describe", "lonely", *server)
    lonely = {p["partition"]: p["replicas"][0] for p in described["partitions"]}
    describe = ["topics", "describe", *server]
    assert ok_json(cli, *describe, "--under-replicated-partitions") == []
    assert ok_json(cli, *describe, "--unavailable-partitions") == []
    assert ok_json(cli, "topics", "describe", "--under-min-isr-partitions", *zookeeper) == []

    victim = lonely[0]
    brokers.brokers[victim].kill()
    stranded = {("lonely", p) for p, replica in lonely.items() if replica == victim}
    spread = {("spread", 0), ("spread", 1)}

    shrunk = wait_for_json(cli, [*describe, "--under-replicated-partitions"], spread)
    assert all(
        victim not in p["isr"] and p["offline_replicas"] == [victim]
        for t in shrunk
        for p in t["partitions"]
    )
    unavailable = wait_for_json(cli, [*describe, "--unavailable-partitions"], stranded)
    assert all(p["offline_replicas"] == [victim] for p in unavailable[0]["partitions"])
    wait_for_json(
        cli, ["topics", "describe", "--under-min-isr-partitions", *zookeeper], spread | stranded
    )
    refused = replog("topics", "describe", "--under-min-isr-partitions", *server)
    assert refused.returncode == 2 and b"--zookeeper" in refused.stderr

    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    capsys.readouterr()
    assert main(["topics", "describe", *server]) == 0
    table = capsys.readouterr().out
    red = [line for line in table.splitlines() if "\x1b[31m" in line]
    assert len(red) == 2 and all("spread" in line for line in red), table
    assert sum("lonely" in line for line in table.splitlines()) == 3
