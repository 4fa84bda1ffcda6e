"""`replog console` against a live 3-broker cluster: what /api/cluster, /api/rates and
/api/lag say, through ZooKeeper and through --bootstrap only, and what it refuses."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from tests.support import (
    BrokerFactory,
    controller_of,
    create,
    http_get,
    produce,
    replog,
    run,
    running_console,
    start_cluster,
)

DEADLINE_S = 30.0


def get_json(url: str, path: str) -> dict:
    status, content_type, body = http_get(url, path)
    assert (status, content_type) == (200, "application/json")
    return json.loads(body)


def wait_for_document(url: str, path: str, check) -> dict:
    """The first document at `path` that passes `check`, polled until DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        document = get_json(url, path)
        if check(document):
            return document
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never passed the check; last: {document}")
        time.sleep(0.3)


def spark_checkpoint(root: Path, source_offsets: str) -> Path:
    """A Spark query's checkpoint with batch 0 committed at `source_offsets`, in the files
    and layout Spark writes (offsets/0: version, batch metadata, one line per source)."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id":"5f1c9a52-7d1e-4b8e-9a43-3c2f0e6d7b10"}')
    batch = '{"batchWatermarkMs":0,"batchTimestampMs":1795500585001,"conf":{}}'
    (root / "offsets" / "0").write_text(f"v1\n{batch}\n{source_offsets}")
    (root / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def hw_reached(topic: str, partition: int, hw: int):
    def check(document: dict) -> bool:
        for t in document["topics"]:
            for p in t["partitions"]:
                if (t["topic"], p["partition"]) == (topic, partition):
                    return p["high_watermark"] == hw
        return False

    return check


@pytest.mark.slow
def test_console_shows_the_cluster_from_zookeeper(
    brokers: BrokerFactory, zk_connect: str, tmp_path: Path
) -> None:
    start_cluster(brokers)
    run(create(brokers.bootstrap, "orders", partitions=2))
    run(produce(brokers.bootstrap, "orders", ["a", "b", "c"]))
    controller = controller_of(zk_connect)
    run(create(brokers.bootstrap, "ledger", partitions=1))
    run(produce(brokers.bootstrap, "ledger", ["1", "2", "3"]))
    checkpoint = spark_checkpoint(tmp_path / "query", '{"ledger":{"0":1}}')
    missing = tmp_path / "no-such-checkpoint"
    checkpoints = ("--checkpoint", str(checkpoint), "--checkpoint", str(missing))

    with running_console("--zookeeper", zk_connect, *checkpoints) as url:
        cluster = wait_for_document(url, "/api/cluster", hw_reached("orders", 0, 3))
        assert cluster["source"] == "zookeeper"
        assert cluster["error"] is None
        assert cluster["controller"] == controller
        assert [
            (b["id"], b["alive"], b["controller"], b["port"], b["metrics_url"])
            for b in cluster["brokers"]
        ] == [
            (i, True, i == controller, brokers.brokers[i].port, brokers.brokers[i].metrics_url)
            for i in (1, 2, 3)
        ]
        orders = next(t for t in cluster["topics"] if t["topic"] == "orders")
        assert [p["partition"] for p in orders["partitions"]] == [0, 1]
        for p in orders["partitions"]:
            assert sorted(p["replicas"]) == [1, 2, 3]
            assert p["leader"] in p["replicas"]
            assert sorted(p["isr"]) == [1, 2, 3]
            assert (p["under_replicated"], p["offline"]) == (False, False)
        assert orders["partitions"][1]["high_watermark"] == 0
        assert cluster["summary"]["under_replicated"] == 0

        # Rates are increases between scrapes: produce once the console has a baseline.
        wait_for_document(url, "/api/rates", lambda d: len(d["points"]) > 0)
        run(produce(brokers.bootstrap, "orders", [f"record-{i}" for i in range(500)]))
        rates = wait_for_document(
            url, "/api/rates", lambda d: any(p["messages_in"] > 0 for p in d["points"])
        )
        assert rates["available"] is True, rates["reason"]
        assert rates["series"] == ["bytes_in", "bytes_out", "messages_in"]
        assert any(p["bytes_in"] > 0 for p in rates["points"])
        assert rates["errors"] == {}

        lag = wait_for_document(url, "/api/lag", lambda d: d["queries"][0]["error"] is None)
        query, failed = lag["queries"]
        assert (query["checkpoint"], query["batch_id"], query["total_lag"]) == (
            str(checkpoint),
            0,
            2,
        )
        assert query["partitions"] == [
            {"topic": "ledger", "partition": 0, "committed": 1, "high_watermark": 3, "lag": 2}
        ]
        assert failed["checkpoint"] == str(missing)
        assert str(missing) in failed["error"]

        for path in ("/nope", "/api/nope", "/api/cluster/x", "/static/../pyproject.toml"):
            assert http_get(url, path)[0] == 404, path
        assert http_get(url, "/api/cluster", method="POST")[0] == 405
        assert http_get(url, "/api/cluster", method="DELETE")[0] == 405
        status, content_type, page = http_get(url, "/")
        assert (status, content_type) == (200, "text/html; charset=utf-8")
        assert b'id="brokers"' in page


@pytest.mark.slow
def test_console_with_bootstrap_only_shows_the_brokers_but_no_rates(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers)
    run(create(brokers.bootstrap, "t", partitions=1))
    bootstrap = ",".join(f"{host}:{port}" for host, port in brokers.bootstrap)

    with running_console("--bootstrap", bootstrap) as url:
        cluster = wait_for_document(url, "/api/cluster", hw_reached("t", 0, 0))
        assert cluster["source"] == "bootstrap"
        assert [(b["id"], b["alive"], b["metrics_url"]) for b in cluster["brokers"]] == [
            (1, True, None),
            (2, True, None),
            (3, True, None),
        ]
        assert sum(b["controller"] for b in cluster["brokers"]) == 1
        rates = get_json(url, "/api/rates")
        assert rates["available"] is False
        assert "--zookeeper" in rates["reason"]
        assert get_json(url, "/api/lag")["queries"] == []


@pytest.mark.slow
def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = replog("console", "--bootstrap", "127.0.0.1:9", "--port", str(port))
    assert result.returncode == 2
    assert result.stderr.decode().startswith(
        f"replog: cannot serve the console on 127.0.0.1:{port}"
    )
