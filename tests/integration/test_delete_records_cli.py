"""`replog topics delete-records --offset-json-file F` as a user runs it, against a real
broker: Kafka's file layout, one outcome per partition, exit codes 0, 1 and 2."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_replica.client import Cluster
from spark_replica.client.list_offsets import EARLIEST, list_offsets
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition
from tests.support import BrokerFactory, create_topic, produce, replog, run

pytestmark = pytest.mark.slow

TOPIC = "trimmed"
RECORDS = 10


@pytest.fixture(scope="module")
def broker(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """One broker holding TOPIC: two partitions, RECORDS records in partition 0."""
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("delete-records-cli"),
    )
    try:
        started = factory.start(1)
        run(create_topic(factory.bootstrap, TOPIC, partitions=2))
        run(produce(factory.bootstrap, TOPIC, [f"v{i}" for i in range(RECORDS)]))
        yield started
    finally:
        factory.stop_all()


def offset_file(directory: Path, entries: list[tuple[str, int, int]]) -> Path:
    path = directory / f"offsets-{uuid.uuid4().hex[:8]}.json"
    partitions = [{"topic": t, "partition": p, "offset": o} for t, p, o in entries]
    path.write_text(json.dumps({"partitions": partitions, "version": 1}))
    return path


def delete_records(broker: BrokerProcess, path: Path, *flags: str) -> tuple[int, str, str]:
    done = replog(
        "topics",
        "delete-records",
        "--offset-json-file",
        str(path),
        "--bootstrap",
        broker.address,
        *flags,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def log_starts(broker: BrokerProcess) -> dict[int, int]:
    async def ask() -> dict[int, int]:
        cluster = Cluster([(broker.host, broker.port)])
        try:
            tps = [TopicPartition(TOPIC, p) for p in (0, 1)]
            found = await list_offsets(cluster, tps, EARLIEST, wait_s=10)
            return {tp.partition: offset for tp, (offset, _) in found.items()}
        finally:
            await cluster.close()

    return run(ask())


def test_each_partition_has_its_own_outcome(broker: BrokerProcess, tmp_path: Path) -> None:
    path = offset_file(tmp_path, [(TOPIC, 0, 3), (TOPIC, 1, -1), ("absent", 0, 0)])
    code, stdout, stderr = delete_records(broker, path, "--json")
    assert code == 1, stderr
    document = json.loads(stdout)
    rows = {(row["topic"], row["partition"]): row for row in document["partitions"]}
    assert rows[(TOPIC, 0)] == {"topic": TOPIC, "partition": 0, "low_watermark": 3}
    assert rows[(TOPIC, 1)] == {"topic": TOPIC, "partition": 1, "low_watermark": 0}
    assert "UnknownTopicOrPartitionError" in rows[("absent", 0)]["error"]
    assert log_starts(broker) == {0: 3, 1: 0}

    path = offset_file(tmp_path, [(TOPIC, 0, 7)])
    code, stdout, stderr = delete_records(broker, path)
    assert code == 0, stderr
    assert "LOW-WATERMARK" in stdout and "7" in stdout
    assert log_starts(broker) == {0: 7, 1: 0}

    path = offset_file(tmp_path, [(TOPIC, 0, RECORDS + 1)])
    code, stdout, _ = delete_records(broker, path, "--json")
    assert code == 1
    (row,) = json.loads(stdout)["partitions"]
    assert "OffsetOutOfRangeError" in row["error"] and "high watermark 10" in row["error"]
    assert log_starts(broker) == {0: 7, 1: 0}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not JSON"),
        ('{"partitions": [{"topic": "t", "partition": 0, "offset": -2}]}', "or -1"),
    ],
)
def test_a_malformed_file_is_refused_in_one_line_before_anything_is_sent(
    broker: BrokerProcess, tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "offsets.json"
    path.write_text(text)
    code, stdout, stderr = delete_records(broker, path)
    assert code == 2
    assert says in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert stdout == ""
