"""Bind side and advertised side with real brokers: clients go where the registration says.

Broker 1 binds every listener on 0.0.0.0 and advertises 127.0.0.2; broker 2 is started as
an operator would, from a properties file binding each listener on its own host (REPLOG
on 0.0.0.0 with nothing advertised, KAFKA on 127.0.0.3 only, METRICS on 127.0.0.4 only).
Broker 2's Kafka listener answers on 127.0.0.3 alone, so a Kafka client that reads from
it learnt that address from the metadata, which the controller passed on.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from brokerd.serving.host_addresses import reachable_host
from spark_replica.client import Cluster
from spark_replica.client import Producer as ReplogProducer
from spark_replica.tools.launcher.brokers import BrokerProcess, free_port
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.session import connect
from tests.support import (
    TEST_BROKER_OVERRIDES,
    BrokerFactory,
    create,
    http_get,
    read_everything,
    run,
    run_broker_command,
)

pytestmark = pytest.mark.slow

DEADLINE_S = 30.0
TOPIC = "advertised"


def start_brokers(brokers: BrokerFactory, tmp_path: Path) -> tuple[BrokerProcess, BrokerProcess]:
    first = BrokerProcess(
        1,
        free_port(),
        tmp_path / "broker-1",
        brokers.zk_connect,
        host="0.0.0.0",
        advertised_host="127.0.0.2",
        overrides=dict(TEST_BROKER_OVERRIDES),
        kafka_port=free_port(),
        metrics_port=free_port(),
    )
    brokers.brokers[1] = first
    first.start()
    replog_port, kafka_port, metrics_port = free_port(), free_port(), free_port()
    properties = tmp_path / "server.properties"
    properties.write_text(
        "broker.id=2\n"
        f"log.dirs={tmp_path / 'broker-2'}\n"
        f"zookeeper.connect={brokers.zk_connect}\n"
        f"listeners=REPLOG://0.0.0.0:{replog_port},KAFKA://127.0.0.3:{kafka_port},"
        f"METRICS://127.0.0.4:{metrics_port}\n"
        "zookeeper.session.timeout.ms=3000\n"
    )
    second = run_broker_command(brokers, 2, tmp_path / "broker-2", "--config", str(properties))
    second.port, second.kafka_port, second.metrics_port = replog_port, kafka_port, metrics_port
    return first, second


def registrations(zk_connect: str) -> dict[int, dict[str, object]]:
    zk = connect(zk_connect)
    try:
        return {
            b: json.loads(zk.get(znodes.broker_path(b))[0]) for b in topic_store.live_broker_ids(zk)
        }
    finally:
        zk.stop()
        zk.close()


async def replog_round_trip(bootstrap: list[tuple[str, int]]) -> dict[int, tuple[str, int]]:
    """Produce to both partitions (one led by each broker) through replog's client; the
    brokers as its metadata names them."""
    await create(bootstrap, TOPIC, partitions=2, rf=2)
    cluster = Cluster(bootstrap)
    try:
        await cluster.refresh([TOPIC])
        producer = ReplogProducer(cluster)
        for partition in (0, 1):
            await producer.send_records(TOPIC, [f"replog-{partition}"], partition=partition)
        return {b.broker_id: (b.host, b.port) for b in cluster.brokers.values()}
    finally:
        await cluster.close()


def kafka_round_trip(bootstrap: str) -> tuple[dict[int, str], list[bytes]]:
    """Kafka's client: the brokers its metadata names, and every value read back after
    producing one more to each partition."""
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=DEADLINE_S)
    brokers = {b.id: f"{b.host}:{b.port}" for b in listed.brokers.values()}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition in (0, 1):
        producer.produce(TOPIC, f"kafka-{partition}".encode(), partition=partition)
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(values) < 4 and time.monotonic() < deadline:
            for message in consumer.consume(10, timeout=1):
                assert message.error() is None, message.error()
                values.append(message.value() or b"")
    finally:
        consumer.close()
    return brokers, sorted(values)


def refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_clients_and_the_registration_follow_the_advertised_listeners(
    brokers: BrokerFactory, tmp_path: Path
) -> None:
    first, second = start_brokers(brokers, tmp_path)
    machine = reachable_host()
    assert machine not in ("0.0.0.0", "::")

    registered = registrations(brokers.zk_connect)
    assert registered[1]["endpoints"] == [
        f"REPLOG://127.0.0.2:{first.port}",
        f"KAFKA://127.0.0.2:{first.kafka_port}",
    ]
    assert (registered[1]["host"], registered[1]["metrics_host"]) == ("127.0.0.2", "127.0.0.2")
    assert registered[2]["endpoints"] == [
        f"REPLOG://{machine}:{second.port}",
        f"KAFKA://127.0.0.3:{second.kafka_port}",
    ]
    assert (registered[2]["metrics_host"], registered[2]["metrics_port"]) == (
        "127.0.0.4",
        second.metrics_port,
    )

    # Bootstrapped through 127.0.0.1 (broker 1 binds every address); told the advertised ones.
    seen = run(replog_round_trip([("127.0.0.1", first.port)]), DEADLINE_S * 2)
    assert seen == {1: ("127.0.0.2", first.port), 2: (machine, second.port)}

    kafka_brokers, values = kafka_round_trip(f"127.0.0.1:{first.kafka_port}")
    assert kafka_brokers == {
        1: f"127.0.0.2:{first.kafka_port}",
        2: f"127.0.0.3:{second.kafka_port}",
    }
    assert values == [b"kafka-0", b"kafka-1", b"replog-0", b"replog-1"]
    assert refused("127.0.0.1", second.kafka_port), "broker 2's Kafka listener binds 127.0.0.3"

    assert http_get(f"http://127.0.0.4:{second.metrics_port}", "/metrics")[0] == 200
    assert refused("127.0.0.1", second.metrics_port)
    rows = run(read_everything([("127.0.0.2", first.port)], TOPIC, 4), DEADLINE_S * 2)
    assert sorted(bytes(r["value"]) for r in rows) == values  # type: ignore[call-overload]
