"""`replog up` on fixed ports: every listener where --port-base puts it, the same ports
again on the next `up`, and a taken port refused in one line naming --port-base, with
nothing left running, whether it was taken before `up` looked or between its check and
the process binding it."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_replica.tools.cli import cluster, cluster_start
from spark_replica.tools.cli.main import build_parser
from spark_replica.tools.launcher import cluster_dir
from spark_replica.tools.launcher.brokers import PortInUseError
from spark_replica.tools.launcher.port_plan import PortPlan
from spark_replica.tools.launcher.zookeeper import is_answering
from tests.support import free_port_base, replog

pytestmark = pytest.mark.slow

UP_TIMEOUT_S = 60.0


@contextlib.contextmanager
def listening_on(port: int) -> Iterator[None]:
    with socket.socket() as sock:
        sock.bind((cluster.HOST, port))
        sock.listen()
        yield


def _status(directory: Path) -> dict:
    result = replog("status", "--json", "--dir", str(directory))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_listener_is_where_the_port_base_puts_it_and_stays_there(tmp_path: Path) -> None:
    directory = tmp_path / ".replog"
    base = free_port_base(brokers=2)
    try:
        up = replog("up", "--dir", str(directory), "--brokers", "2", "--port-base", str(base))
        assert up.returncode == 0, up.stderr
        expected = {
            "zookeeper": f"127.0.0.1:{base - 6911}",
            "bootstrap_servers": f"127.0.0.1:{base},127.0.0.1:{base + 1}",
            "kafka_bootstrap_servers": f"127.0.0.1:{base + 10000},127.0.0.1:{base + 10001}",
            "metrics_urls": [f"http://127.0.0.1:{base + 312 + i}/metrics" for i in (0, 1)],
        }
        for attempt in ("first", "again"):
            document = _status(directory)
            seen = {key: document[key] for key in expected if key != "metrics_urls"}
            seen["metrics_urls"] = [b["metrics_url"] for b in document["brokers"]]
            assert seen == expected, attempt
            assert replog("down", "--dir", str(directory)).returncode == 0
            if attempt == "first":
                again = replog("up", "--dir", str(directory))
                assert again.returncode == 0, again.stderr
    finally:
        replog("down", "--dir", str(directory))


def test_a_taken_port_stops_up_before_anything_starts(tmp_path: Path) -> None:
    directory = tmp_path / ".replog"
    base = free_port_base(brokers=1)
    with listening_on(base + 10000):
        refused = replog("up", "--dir", str(directory), "--brokers", "1", "--port-base", str(base))
    assert refused.returncode == 1
    assert refused.stderr.decode().splitlines() == [
        f"replog: port {base + 10000} (broker 1's Kafka listener) is taken: stop what listens "
        "there, or move every port of the cluster with `replog up --port-base N`"
    ]
    assert not cluster_dir.exists(directory)
    assert not is_answering("127.0.0.1", base - 6911)


@pytest.mark.parametrize("taken", ["zookeeper", "kafka"])
def test_a_port_taken_after_the_check_is_refused_the_same_way(tmp_path: Path, taken: str) -> None:
    """The moment between `up`'s check and a process binding its port: ZooKeeper's port,
    or a broker's once ZooKeeper runs; either way `up` stops what it started."""
    directory = tmp_path / ".replog"
    base = free_port_base(brokers=1)
    args = build_parser().parse_args(
        ["up", "--dir", str(directory), "--brokers", "1", "--port-base", str(base)]
    )
    plan = cluster._plan(args)
    port = base - 6911 if taken == "zookeeper" else PortPlan(base, 1).kafka(1)
    with listening_on(port), pytest.raises(PortInUseError, match="--port-base N") as refused:
        cluster_start.start(directory, plan, UP_TIMEOUT_S, fresh=True)
    assert str(port) in str(refused.value)
    assert not cluster_dir.exists(directory)
    assert not is_answering("127.0.0.1", base - 6911)
