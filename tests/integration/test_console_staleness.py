"""`replog console` never shows a dead cluster as live: its JSON says, per panel, when the
data was read and, once a read fails, since when and why it is stale ("broker N
unreachable" for a killed broker's metrics, "ZooKeeper unreachable" and "brokers
unreachable" once everything is stopped), with the repeated connection errors collapsed
into one line. Its own ZooKeeper, since the test stops it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support import (
    BrokerFactory,
    controller_of,
    create,
    http_get,
    run,
    running_console,
    start_cluster,
)

DEADLINE_S = 40.0
INTERVAL_S = "0.5"

pytestmark = pytest.mark.slow


def documents(url: str) -> tuple[dict, dict]:
    cluster, rates = (json.loads(http_get(url, path)[2]) for path in ("/api/cluster", "/api/rates"))
    return cluster, rates


def wait_for(url: str, check) -> tuple[dict, dict]:
    """The first (cluster, rates) documents that pass `check`, polled until DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        cluster, rates = documents(url)
        if check(cluster, rates):
            return cluster, rates
        if time.monotonic() > deadline:
            raise AssertionError(f"never passed: {cluster} {rates}")
        time.sleep(0.25)


def healthy(cluster: dict, rates: dict) -> bool:
    panels = [*cluster["panels"].values(), *rates["panels"].values()]
    return (
        not any(p["stale"] for p in panels)
        and cluster["summary"]["brokers_alive"] == 3
        and len(rates["broker_metrics"]) == 3
    )


def shown_dead(cluster: dict, rates: dict, broker_id: int) -> bool:
    metrics = rates["broker_metrics"].get(str(broker_id), {})
    broker = next(b for b in cluster["brokers"] if b["id"] == broker_id)
    return metrics.get("stale", False) and not broker["alive"]


def test_panels_turn_stale_with_the_reason_when_the_cluster_goes_away(
    own_zookeeper: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    connect = f"{own_zookeeper.connect_string}/console"
    brokers = BrokerFactory(connect, tmp_path / "brokers")
    try:
        start_cluster(brokers)
        run(create(brokers.bootstrap, "orders", partitions=2))
        controller = controller_of(connect)
        with running_console("--zookeeper", connect, "--interval", INTERVAL_S) as url:
            # Healthy: every panel read and live.
            cluster, rates = wait_for(url, healthy)
            for panel in (*cluster["panels"].values(), *rates["panels"].values()):
                assert panel["read_ms"] is not None
                assert (panel["stale_since_ms"], panel["stale_reason"]) == (None, None)

            # One broker killed: its metrics are unreachable since the kill, and once its
            # registration is gone it is dead in fresh data (not a stale panel).
            victim = next(i for i in (1, 2, 3) if i != controller)
            killed_ms = time.time() * 1000
            brokers.brokers[victim].kill()
            cluster, rates = wait_for(url, lambda c, r: shown_dead(c, r, victim))
            metrics = rates["broker_metrics"][str(victim)]
            assert metrics["stale_reason"] == f"broker {victim} unreachable"
            assert metrics["stale_since_ms"] >= killed_ms - 1000
            assert not cluster["panels"]["brokers"]["stale"]
            assert not rates["panels"]["rates"]["stale"]

            # Everything down: the brokers, then ZooKeeper.
            down_ms = time.time() * 1000
            brokers.stop_all()
            own_zookeeper.stop()
            cluster, rates = wait_for(
                url,
                lambda c, r: c["panels"]["brokers"]["stale"] and c["panels"]["topics"]["stale"],
            )
            brokers_panel, topics_panel = cluster["panels"]["brokers"], cluster["panels"]["topics"]
            assert brokers_panel["stale_reason"] == "ZooKeeper unreachable"
            assert topics_panel["stale_reason"] == "brokers unreachable"
            for panel in (brokers_panel, topics_panel):
                assert panel["stale_since_ms"] >= down_ms - 1000
                assert panel["read_ms"] < panel["stale_since_ms"]
                assert panel["stale_detail"].count("ConnectionRefusedError") <= 1
            assert cluster["error"].count("ConnectionRefusedError") <= 1

            # The time of the last read stays put while reads keep failing.
            before = cluster["panels"]
            later, _ = wait_for(
                url,
                lambda c, r: all(
                    c["panels"][name]["failures"] > before[name]["failures"]
                    for name in ("brokers", "topics")
                ),
            )
            for name in ("brokers", "topics"):
                assert later["panels"][name]["read_ms"] == before[name]["read_ms"]
                assert later["panels"][name]["stale_since_ms"] == before[name]["stale_since_ms"]
                assert later["panels"][name]["stale"]
            print(json.dumps(later["panels"], indent=1))
    finally:
        brokers.stop_all()
