"""`replog console`'s JSON against one live 3-broker cluster (shared by the module): the
panels' freshness on a healthy cluster, the topics' config overrides and preferred
leaders, the Kafka consumer groups with their members and lag, and what a console
started with --bootstrap only says it cannot show."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_replica.client import Cluster, Producer, ProducerConfig
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support import (
    BrokerFactory,
    create,
    http_get,
    run,
    running_console,
    start_cluster,
)

pytestmark = pytest.mark.slow

DEADLINE_S = 40.0
GROUP = "console-group"
RECORDS_PER_PARTITION = 10
# The records' timestamps: one second apart from here.
FIRST_TIMESTAMP_MS = 1_700_000_000_000


async def fill_orders(bootstrap: list[tuple[str, int]]) -> None:
    """Ten records in each partition of `orders`: keyed, with a header, a second apart;
    in partition 0 the last value is not text."""
    cluster = Cluster(bootstrap)
    try:
        producer = Producer(cluster, ProducerConfig(acks=-1, delivery_timeout_ms=30_000))
        for partition in (0, 1):
            for i in range(RECORDS_PER_PARTITION):
                last_binary = partition == 0 and i == RECORDS_PER_PARTITION - 1
                await producer.send(
                    "orders",
                    b"\x00\xff\x10" if last_binary else f"order-{partition}-{i}",
                    key=f"k{i}",
                    partition=partition,
                    timestamp_ms=FIRST_TIMESTAMP_MS + i * 1000,
                    headers=[("trace", f"t{i}".encode())],
                )
        await producer.flush()
        await producer.close()
    finally:
        await cluster.close()


@dataclass(frozen=True)
class Live:
    brokers: BrokerFactory
    url: str


@pytest.fixture(scope="module")
def live(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    brokers = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("console-api"),
    )
    try:
        start_cluster(brokers)
        run(create(brokers.bootstrap, "orders", partitions=2, **{"retention.ms": "60000"}))
        run(create(brokers.bootstrap, "plain", partitions=1))
        run(fill_orders(brokers.bootstrap))
        with running_console("--zookeeper", brokers.zk_connect, "--interval", "0.5") as url:
            yield Live(brokers, url)
    finally:
        brokers.stop_all()


def get_json(url: str, path: str) -> tuple[int, dict]:
    status, content_type, body = http_get(url, path)
    assert content_type == "application/json", body
    return status, json.loads(body)


def wait_for_document(url: str, path: str, check) -> dict:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        status, document = get_json(url, path)
        assert status == 200, document
        if check(document):
            return document
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never passed the check; last: {document}")
        time.sleep(0.25)


def test_a_healthy_cluster_is_fresh_with_configs_and_preferred_leaders(live: Live) -> None:
    cluster = wait_for_document(
        live.url,
        "/api/cluster",
        lambda d: not any(p["stale"] for p in d["panels"].values()) and len(d["topics"]) == 2,
    )
    for panel in cluster["panels"].values():
        assert panel["read_ms"] <= time.time() * 1000
        assert (panel["stale_reason"], panel["failures"]) == (None, 0)
    topics = {t["topic"]: t for t in cluster["topics"]}
    assert topics["orders"]["config"] == {"retention.ms": "60000"}
    assert topics["plain"]["config"] == {}
    for partition in topics["orders"]["partitions"]:
        assert partition["dead_replicas"] == []
        assert partition["preferred_leader"] == partition["replicas"][0]
        assert partition["leader_not_preferred"] is (
            partition["leader"] != partition["replicas"][0]
        )
    groups = wait_for_document(live.url, "/api/groups", lambda d: d["available"])
    assert groups["panels"]["groups"]["stale"] is False


def test_consumer_groups_show_state_members_and_lag(live: Live) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": live.brokers.kafka_bootstrap(),
            "group.id": GROUP,
            "client.id": "console-test",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.subscribe(["orders"])
        deadline = time.monotonic() + DEADLINE_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer was never assigned partitions"
            consumer.poll(0.2)
        committed = [KafkaTopicPartition("orders", 0, 10), KafkaTopicPartition("orders", 1, 4)]
        consumer.commit(offsets=committed, asynchronous=False)

        def described(document: dict) -> bool:
            # A refresh whose ListOffsets a leader did not answer in time shows the lag
            # unknown (None); the next one has it.
            group = next((g for g in document["groups"] if g["group"] == GROUP), None)
            return (
                group is not None
                and len(group.get("partitions", [])) == 2
                and group.get("total_lag") is not None
            )

        document = wait_for_document(live.url, "/api/groups", described)
        group = next(g for g in document["groups"] if g["group"] == GROUP)
        assert (group["state"], group["error"], group["total_lag"]) == ("Stable", None, 6)
        assert [m["client_id"] for m in group["members"]] == ["console-test"]
        rows = [
            (p["partition"], p["current_offset"], p["log_end_offset"], p["lag"], p["client_id"])
            for p in group["partitions"]
        ]
        assert rows == [(0, 10, 10, 0, "console-test"), (1, 4, 10, 6, "console-test")]
    finally:
        consumer.close()


def test_with_bootstrap_only_groups_and_configs_say_why_they_are_missing(live: Live) -> None:
    bootstrap = ",".join(f"{host}:{port}" for host, port in live.brokers.bootstrap)
    with running_console("--bootstrap", bootstrap, "--interval", "0.5") as url:
        # The module's groups made the brokers' own __consumer_offsets too.
        cluster = wait_for_document(url, "/api/cluster", lambda d: len(_user_topics(d)) == 2)
        assert [t["config"] for t in _user_topics(cluster)] == [None, None]
        groups = wait_for_document(url, "/api/groups", lambda d: d["reason"] != "not read yet")
        assert groups["available"] is False
        assert "--zookeeper" in groups["reason"]
        assert groups["panels"]["groups"]["stale"] is False


def _user_topics(cluster: dict) -> list[dict]:
    return [t for t in cluster["topics"] if not t["topic"].startswith("__")]


def records(url: str, query: str) -> tuple[int, dict]:
    return get_json(url, f"/api/records?{query}")


def test_records_from_an_offset_as_text_with_keys_headers_and_times(live: Live) -> None:
    status, page = records(live.url, "topic=orders&partition=1&offset=2&limit=3")
    assert status == 200, page
    assert (page["log_start_offset"], page["high_watermark"]) == (0, RECORDS_PER_PARTITION)
    assert (page["start_offset"], page["next_offset"], page["capped_by_bytes"]) == (2, 5, False)
    assert [
        (r["offset"], r["timestamp_ms"], r["key"]["data"], r["value"]["data"])
        for r in page["records"]
    ] == [(i, FIRST_TIMESTAMP_MS + i * 1000, f"k{i}", f"order-1-{i}") for i in (2, 3, 4)]
    assert page["records"][0]["headers"] == [
        {"key": "trace", "value": {"data": "t2", "size": 2, "truncated": False}}
    ]


def test_records_from_a_time_stop_at_the_high_watermark(live: Live) -> None:
    for stamp in (str(FIRST_TIMESTAMP_MS + 6500), "2023-11-14T22:13:27Z"):
        status, page = records(live.url, f"topic=orders&partition=1&timestamp={stamp}")
        assert status == 200, page
        assert [r["offset"] for r in page["records"]] == [7, 8, 9], stamp
    status, page = records(live.url, f"topic=orders&partition=1&timestamp={10**13}")
    assert (status, page["start_offset"], page["records"]) == (200, RECORDS_PER_PARTITION, [])


def test_records_as_hex_and_bytes_that_are_not_text(live: Live) -> None:
    status, page = records(live.url, "topic=orders&partition=0&offset=9&format=hex")
    assert status == 200, page
    (record,) = page["records"]
    assert record["value"] == {"data": "00ff10", "size": 3, "truncated": False}
    assert record["key"]["data"] == b"k9".hex()
    _, as_text = records(live.url, "topic=orders&partition=0&offset=9")
    assert "\ufffd" in as_text["records"][0]["value"]["data"]


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ("topic=nope&partition=0&offset=0", 404, "topic 'nope' does not exist"),
        ("topic=orders&partition=7&offset=0", 404, "has no partition 7 (it has 2: 0 to 1)"),
        ("topic=orders&partition=0&offset=50", 400, "offset 50 is outside orders-0"),
        ("topic=orders&partition=0&offset=abc", 400, "offset must be a whole number"),
        ("partition=0&offset=0", 400, "name a topic"),
        ("topic=orders&partition=0", 400, "say where to start"),
        ("topic=orders&partition=0&offset=0&timestamp=1", 400, "not both"),
        ("topic=orders&partition=0&offset=0&limit=1000", 400, "limit must be at most 100"),
        ("topic=orders&partition=0&timestamp=yesterday", 400, "ISO 8601"),
        ("topic=orders&partition=0&offset=0&format=base64", 400, "format must be text or hex"),
    ],
)
def test_bad_record_queries_get_a_json_error_that_says_why(
    live: Live, query: str, status: int, says: str
) -> None:
    answered, document = records(live.url, query)
    assert (answered, document["status"]) == (status, status)
    assert says in document["error"]
    assert "\n" not in document["error"] and "Traceback" not in document["error"]
