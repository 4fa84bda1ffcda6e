"""What operators see of compaction, through one real broker for the module: the
cleanup.policy `replog topics describe` prints, the cleaner's metrics on the broker's
Prometheus endpoint after a cleaning, and the coordinator `replog groups describe` names.

The broker's cleaner backs off 200 ms and the compacted topic's segments are small, so
a cleaning happens within seconds of the records being written.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support import BrokerFactory, create_topic, replog, run

pytestmark = pytest.mark.slow

COMPACTED = "changelog"
PLAIN = "events"


@pytest.fixture(scope="module")
def factory(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    brokers = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        Path(tmp_path_factory.mktemp("compaction-ops")),
    )
    try:
        brokers.start(1, **{"log.cleaner.backoff.ms": "200"})
        yield brokers
    finally:
        brokers.stop_all()


@pytest.fixture(scope="module")
def broker(factory: BrokerFactory) -> BrokerProcess:
    return factory.brokers[1]


def ok(*args: str) -> str:
    done = replog(*args)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def test_topics_describe_shows_each_topics_cleanup_policy(factory: BrokerFactory) -> None:
    run(create_topic(factory.bootstrap, COMPACTED, **{"cleanup.policy": "compact"}))
    run(create_topic(factory.bootstrap, PLAIN))
    zookeeper = ["--zookeeper", factory.zk_connect]

    described: list[dict[str, Any]] = json.loads(ok("topics", "describe", "--json", *zookeeper))
    policies = {t["topic"]: (t["cleanup_policy"], t["cleanup_policy_source"]) for t in described}
    assert policies == {COMPACTED: ("compact", "topic"), PLAIN: ("delete", "default")}
    table = ok("topics", "describe", *zookeeper)
    assert "CLEANUP-POLICY" in table
    rows = {
        line.split()[1]: line for line in table.splitlines() if COMPACTED in line or PLAIN in line
    }
    assert "compact" in rows[COMPACTED] and "delete (default)" in rows[PLAIN]

    bootstrap = ["--bootstrap", factory.brokers[1].address]
    (alone,) = json.loads(ok("topics", "describe", COMPACTED, "--json", *bootstrap))
    assert (alone["cleanup_policy"], alone["cleanup_policy_source"]) == (None, None)
    assert "unknown" in ok("topics", "describe", COMPACTED, *bootstrap)
