"""Issue 13's acceptance with kcat (from the system's packages; skipped when absent):
`-L` lists the cluster as its Kafka listeners, `-P` then `-C` round trip keyed records
with headers."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid

import pytest

from tests.kafka.clients import make_topic
from tests.support import BrokerFactory

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed"),
]

KCAT_TIMEOUT_S = 60
PARTITIONS = 2
LINES = 50


def kcat(*args: str, stdin: bytes = b"") -> str:
    result = subprocess.run(
        ["kcat", *args],
        input=stdin,
        capture_output=True,
        timeout=KCAT_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def test_kcat_lists_the_cluster_and_round_trips_records(kafka_cluster: BrokerFactory) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_cluster, topic, PARTITIONS, rf=3)
    bootstrap = kafka_cluster.kafka_bootstrap()

    listing = json.loads(kcat("-b", bootstrap, "-L", "-J", "-m", "30"))
    assert {b["id"] for b in listing["brokers"]} == set(kafka_cluster.brokers)
    assert {b["name"] for b in listing["brokers"]} == {
        p.kafka_address for p in kafka_cluster.brokers.values()
    }
    (listed,) = [t for t in listing["topics"] if t["topic"] == topic]
    assert [p["partition"] for p in listed["partitions"]] == list(range(PARTITIONS))
    for partition in listed["partitions"]:
        assert len(partition["replicas"]) == 3
        assert partition["leader"] in kafka_cluster.brokers

    lines = "".join(f"key-{n}\tvalue {n}\n" for n in range(LINES))
    kcat(
        *("-b", bootstrap, "-t", topic, "-P", "-K", "\t", "-H", "origin=kcat"),
        *("-X", "acks=all", "-m", "30"),
        stdin=lines.encode(),
    )
    consumed = kcat(
        *("-b", bootstrap, "-t", topic, "-C", "-o", "beginning", "-e", "-J"),
        *("-c", str(LINES), "-m", "30"),
    )
    records = [json.loads(line) for line in consumed.splitlines() if line.strip()]
    assert sorted((r["key"], r["payload"]) for r in records) == sorted(
        (f"key-{n}", f"value {n}") for n in range(LINES)
    )
    for record in records:
        assert record["headers"] == ["origin", "kcat"]
        assert record["tstype"] == "create"
        assert record["ts"] > 0
        assert record["partition"] in range(PARTITIONS)
    for partition in range(PARTITIONS):
        offsets = sorted(r["offset"] for r in records if r["partition"] == partition)
        assert offsets == list(range(len(offsets)))
