"""What operators see of compaction, through one real broker for the module: the
cleanup.policy `replog topics describe` prints, the cleaner's metrics on the broker's
Prometheus endpoint after a cleaning, and the coordinator `replog groups describe` names.

The broker's cleaner backs off 200 ms and the compacted topic's segments are small, so
a cleaning happens within seconds of the records being written.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spark_replica.client import Cluster, Producer, ProducerConfig
from spark_replica.client.kafka_admin import KafkaAdminClient
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition, offsets_partition_for
from tests.support import BrokerFactory, create_topic, eventually, replog, run

pytestmark = pytest.mark.slow

COMPACTED = "changelog"
PLAIN = "events"
METERED = "metered"
LEDGER = "ledger"
GROUP = "auditors"
# A segment holds a few batches of BATCH records: most of the log is sealed, cleanable.
SEGMENT_BYTES = "4096"
BATCH = 10
DISTINCT_KEYS = 400
UPDATES = 50
DIRTY = "kafka_log_logcleanermanager_max_dirty_percent"
RECOPY = "kafka_log_logcleaner_cleaner_recopy_percent"
CLEAN_TIME = "kafka_log_logcleaner_max_clean_time_secs"
SINCE_LAST_RUN = "kafka_log_logcleaner_time_since_last_run_ms"
BUFFER_USED = "kafka_log_logcleaner_max_buffer_utilization_percent"
# Room for 1,000 keys at Kafka's 24 bytes a key: DISTINCT_KEYS fill a known share of it.
DEDUPE_BUFFER_BYTES = 24_000
KEY_MAP_ENTRY_BYTES = 24


@pytest.fixture(scope="module")
def factory(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    brokers = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        Path(tmp_path_factory.mktemp("compaction-ops")),
    )
    try:
        brokers.start(
            1,
            **{
                "log.cleaner.backoff.ms": "200",
                "log.cleaner.dedupe.buffer.size": str(DEDUPE_BUFFER_BYTES),
            },
        )
        yield brokers
    finally:
        brokers.stop_all()


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
    assert policies[COMPACTED] == ("compact", "topic")
    assert policies[PLAIN] == ("delete", "default")
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


def scrape(broker: BrokerProcess) -> dict[str, float]:
    """Every unlabelled sample the broker serves, by name."""
    assert broker.metrics_url is not None
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
        text = response.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


async def produce(bootstrap: list[tuple[str, int]], keys: list[str]) -> None:
    cluster = Cluster(bootstrap)
    try:
        producer = Producer(cluster, ProducerConfig(batch_records=BATCH))
        values = [f"{k}:" + "v" * 40 for k in keys]
        await producer.send_records(METERED, values, keys, partition=0)
        await producer.close()
    finally:
        await cluster.close()


def wait_for_metric(
    broker: BrokerProcess, name: str, holds: Callable[[float], bool], what: str
) -> float:
    """The metric's first value that `holds` (wrapped for eventually: 0 is a value)."""

    def once() -> tuple[float] | None:
        value = scrape(broker).get(name)
        return (value,) if value is not None and holds(value) else None

    return eventually(once, what)[0]


def test_the_cleaner_metrics_follow_a_cleaning(factory: BrokerFactory) -> None:
    broker = factory.brokers[1]
    before = scrape(broker)
    assert before[RECOPY] == 0 and before[CLEAN_TIME] == 0, "no cleaning yet"
    assert before[BUFFER_USED] == 0
    config = {"segment.bytes": SEGMENT_BYTES, "min.cleanable.dirty.ratio": "0.5"}
    run(create_topic(factory.bootstrap, METERED, **config))
    # Every key once, all written before the topic compacts: one cleaning takes the
    # whole sealed log, reads its dirty part twice (to map, to copy) and keeps it all.
    run(produce(factory.bootstrap, [f"k{n:03d}" for n in range(DISTINCT_KEYS)]))
    alter_config("cleanup.policy=compact", factory.zk_connect)
    wait_for_metric(broker, CLEAN_TIME, lambda v: v > 0, "a cleaning")
    cleaned = scrape(broker)
    assert 40 < cleaned[RECOPY] <= 60
    # The key map held the keys of the sealed segments: most of them, never more.
    all_keys_percent = 100 * DISTINCT_KEYS * KEY_MAP_ENTRY_BYTES / DEDUPE_BUFFER_BYTES
    assert all_keys_percent / 2 < cleaned[BUFFER_USED] <= all_keys_percent
    assert 0 <= cleaned[SINCE_LAST_RUN] < 5_000
    wait_for_metric(broker, DIRTY, lambda v: v == 0, "every key cleaned")

    # A few updates: dirty, but below the topic's ratio, so they wait and show.
    run(produce(factory.bootstrap, [f"k{n:03d}" for n in range(UPDATES)]))
    dirty = wait_for_metric(broker, DIRTY, lambda v: v > 0, "dirty bytes")
    assert dirty < 50
    time.sleep(1)  # several cleaner passes (200 ms back-off): still waiting
    assert scrape(broker)[DIRTY] == pytest.approx(dirty)

    alter_config("min.cleanable.dirty.ratio=0.01", factory.zk_connect)
    wait_for_metric(broker, DIRTY, lambda v: v == 0, "the dirty part cleaned")
    assert scrape(broker)[SINCE_LAST_RUN] < 5_000


def alter_config(assignment: str, zk_connect: str) -> None:
    ok(
        "configs",
        "alter",
        "--topic",
        METERED,
        "--add-config",
        assignment,
        "--zookeeper",
        zk_connect,
    )


async def commit(bootstrap: list[tuple[str, int]], offset: int) -> None:
    async with KafkaAdminClient(bootstrap) as admin:
        await admin.commit_offsets(GROUP, {TopicPartition(LEDGER, 0): offset})


def test_groups_describe_names_the_coordinator_and_the_offsets_partition(
    factory: BrokerFactory,
) -> None:
    broker = factory.brokers[1]
    assert broker.kafka_address is not None
    run(create_topic(factory.bootstrap, LEDGER))
    run(commit([(broker.host, broker.kafka_port)], 0))
    server = ["--bootstrap-server", broker.kafka_address]

    described = json.loads(ok("groups", "describe", GROUP, "--json", *server))
    host, port = broker.kafka_address.rsplit(":", 1)
    partition = offsets_partition_for(GROUP, 50)
    assert described["coordinator"] == {
        "id": 1,
        "host": host,
        "port": int(port),
        "offsets_partition": partition,
    }
    first_line = ok("groups", "describe", GROUP, *server).splitlines()[0]
    expected = (
        f", coordinator {broker.kafka_address} (1), offsets in __consumer_offsets-{partition}"
    )
    assert first_line.endswith(expected), first_line
