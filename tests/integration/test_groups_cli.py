"""`replog groups` against a real broker's Kafka listener: a confluent-kafka consumer in a
group commits, then the command describes the group's lag, refuses to reset or delete
it while the consumer is in it, and resets and deletes it once the consumer left."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_replica.client import Cluster, Producer, ProducerConfig
from spark_replica.tools.cli.main import main
from tests.support import BrokerFactory, create, run

pytestmark = pytest.mark.slow

TOPIC = "events"
GROUP = "g"
RECORDS_PER_PARTITION = 10
DEADLINE_S = 60.0


async def fill(bootstrap: list[tuple[str, int]]) -> None:
    cluster = Cluster(bootstrap)
    try:
        producer = Producer(cluster, ProducerConfig(acks=-1, delivery_timeout_ms=30_000))
        for partition in (0, 1):
            values = [f"v{i}" for i in range(RECORDS_PER_PARTITION)]
            await producer.send_records(TOPIC, values, partition=partition)
    finally:
        await cluster.close()


class GroupsCli:
    def __init__(self, bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.bootstrap = bootstrap
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(["groups", *argv, "--bootstrap-server", self.bootstrap, "--timeout", "30"])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *argv: str) -> dict:
        code, out, err = self(*argv, "--json")
        assert code == 0, err
        return json.loads(out)

    def partitions(self) -> dict[int, dict]:
        return {row["partition"]: row for row in self.json("describe", GROUP)["partitions"]}


def consume_all(consumer: Consumer, count: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    seen = 0
    while seen < count:
        assert time.monotonic() < deadline, f"read {seen} of {count} records"
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            seen += 1


def test_describe_reset_and_delete_a_group(
    brokers: BrokerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    brokers.start(1)
    run(create(brokers.bootstrap, TOPIC, partitions=2, rf=1))
    run(fill(brokers.bootstrap))
    groups = GroupsCli(brokers.kafka_bootstrap(), capsys)
    consumer = Consumer(
        {
            "bootstrap.servers": brokers.kafka_bootstrap(),
            "group.id": GROUP,
            "client.id": "groups-cli-test",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        consume_all(consumer, 2 * RECORDS_PER_PARTITION)
        committed = [KafkaTopicPartition(TOPIC, 0, 10), KafkaTopicPartition(TOPIC, 1, 7)]
        consumer.commit(offsets=committed, asynchronous=False)

        described = groups.json("describe", GROUP)
        assert described["state"] == "Stable" and len(described["members"]) == 1
        rows = {row["partition"]: row for row in described["partitions"]}
        assert [(rows[p]["current_offset"], rows[p]["log_end_offset"]) for p in (0, 1)] == [
            (10, 10),
            (7, 10),
        ]
        assert [rows[p]["lag"] for p in (0, 1)] == [0, 3]
        assert {rows[p]["client_id"] for p in (0, 1)} == {"groups-cli-test"}
        code, out, _ = groups("describe", GROUP)
        assert code == 0 and "CURRENT-OFFSET" in out and "groups-cli-test" in out
        code, out, _ = groups("list")
        assert code == 0 and GROUP in out.split()
        capsys.readouterr()
        assert main(["groups", "list", "--zookeeper", brokers.zk_connect]) == 0
        assert GROUP in capsys.readouterr().out.split()

        code, _, err = groups("reset-offsets", GROUP, "--all-topics", "--to-earliest", "--execute")
        assert code == 1 and "active member" in err
        code, _, err = groups("delete", GROUP)
        assert code == 1 and "still has members" in err
    finally:
        consumer.close()

    deadline = time.monotonic() + DEADLINE_S
    while groups.json("describe", GROUP)["members"]:
        assert time.monotonic() < deadline, "the consumer did not leave its group"
        time.sleep(0.2)

    dry_run = groups.json("reset-offsets", GROUP, "--topic", f"{TOPIC}:1", "--to-offset", "2")
    assert dry_run["executed"] is False
    assert dry_run["partitions"] == [
        {"topic": TOPIC, "partition": 1, "current_offset": 7, "new_offset": 2}
    ]
    assert groups.partitions()[1]["current_offset"] == 7

    shifted = groups.json("reset-offsets", GROUP, "--all-topics", "--shift-by", "-4", "--execute")
    assert [p["new_offset"] for p in shifted["partitions"]] == [6, 3]
    rows = groups.partitions()
    assert [(rows[p]["current_offset"], rows[p]["lag"]) for p in (0, 1)] == [(6, 4), (3, 7)]
    assert rows[0]["consumer_id"] is None

    code, out, err = groups("delete", GROUP)
    assert code == 0, err
    code, out, _ = groups("list")
    assert code == 0 and GROUP not in out.split()
