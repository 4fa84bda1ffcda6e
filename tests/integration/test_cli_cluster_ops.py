"""`replog up --config`, metrics URLs in `status --json`, `-v` and `--version`, against real
processes in a cluster directory of the test's own."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from spark_replica.tools.launcher import cluster_dir
from tests.support import http_get, kafka_broker_configs, replog, replog_up


def test_version_names_the_package_version() -> None:
    from importlib.metadata import version

    result = replog("--version")
    assert result.returncode == 0
    assert result.stdout.decode().strip() == f"replog {version('replog')}"


def status(directory: Path) -> dict:
    result = replog("status", "--json", "--dir", str(directory))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def stop_everything(directory: Path, seen: list[cluster_dir.RecordedProcess]) -> None:
    replog("down", "--dir", str(directory))
    for process in seen:
        if process.running() and process.pid is not None:
            os.kill(process.pid, signal.SIGKILL)


@pytest.mark.slow
def test_up_with_a_config_file_serves_metrics_and_logs_with_v(tmp_path: Path) -> None:
    directory = tmp_path / ".replog"
    shared = tmp_path / "cluster.properties"
    shared.write_text("log.retention.hours=3\nnum.io.threads=8\n")
    identity = tmp_path / "identity.properties"
    identity.write_text("broker.id=1\n")
    refused = replog("up", "--dir", str(directory), "--config", str(identity))
    assert refused.returncode == 2 and b"broker.id cannot be shared" in refused.stderr
    assert not cluster_dir.exists(directory)

    seen: list[cluster_dir.RecordedProcess] = []
    try:
        up = replog_up(
            directory, "--config", str(shared), "--override", "zookeeper.session.timeout.ms=3000",
            brokers=1, global_options=("-v",),
        )  # fmt: skip
        info = cluster_dir.load(directory)
        seen += [p for p in info.processes() if p.pid]
        assert up.returncode == 0, up.stderr
        assert b"num.io.threads is a Kafka broker config replog does not use" in up.stderr
        assert b" INFO replog.launcher: starting broker 1: " in up.stderr
        assert info.overrides == {
            "log.retention.hours": "3",
            "zookeeper.session.timeout.ms": "3000",
        }
        (broker,) = info.brokers
        kafka = f"127.0.0.1:{broker.kafka_port}"
        assert kafka_broker_configs(kafka, 1)["log.retention.ms"] == str(3 * 3_600_000)

        url = status(directory)["brokers"][0]["metrics_url"]
        assert broker.metrics_port > 0
        assert url == f"http://127.0.0.1:{broker.metrics_port}/metrics"
        code, _, body = http_get(url.removesuffix("/metrics"), "/metrics")
        assert code == 200 and b"kafka_server_replicamanager_partitioncount" in body

        assert replog("down", "--dir", str(directory)).returncode == 0
        again = replog("up", "--dir", str(directory), "--no-metrics")
        seen += [p for p in cluster_dir.load(directory).processes() if p.pid]
        assert again.returncode == 0, again.stderr
        assert status(directory)["brokers"][0]["metrics_url"] is None
        assert cluster_dir.load(directory).overrides == info.overrides, "kept for later `up`"
    finally:
        stop_everything(directory, seen)
