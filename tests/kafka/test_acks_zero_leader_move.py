"""acks=0 producers follow a leader move on both listeners.

An acks=0 client reads no answers, so a broker that no longer leads a partition can only
tell it by closing the connection (Kafka's behaviour): the client then refreshes its
metadata and sends to the new leader. Without that, after `replog elect-leaders` the old
leader, still alive, answered nothing and dropped every record sent to it until the
client's next periodic metadata refresh, minutes later.

Each move is timed by when the cluster's metadata names the new leader; of the records
each client sent between 2 s and 2 s + WINDOW_S after it, at least 99% must be in the log.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import TopicPartition

from spark_replica.client import Cluster, Producer, ProducerConfig
from tests.kafka.clients import at_least, consume, kafka_consumer, kafka_producer, make_topic
from tests.support import BrokerFactory, leadership, replog, run, wait_for

TOPIC = "moving"
WINDOW_S = 3.0
SETTLE_S = 2.0
SEND_INTERVAL_S = 0.003
REQUIRED_SHARE = 0.99


class SendLog:
    """When each record was sent, by value; written by one sender thread."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.sent_at: dict[bytes, float] = {}

    def sent_between(self, start: float, end: float) -> set[bytes]:
        return {value for value, at in self.sent_at.items() if start <= at < end}


def send_with_confluent(bootstrap: str, log: SendLog, stop: threading.Event) -> None:
    config = {"bootstrap.servers": bootstrap, "acks": 0, "linger.ms": 5}
    with kafka_producer(config) as producer:
        sequence = 0
        while not stop.is_set():
            value = f"{log.prefix}{sequence}".encode()
            log.sent_at[value] = time.monotonic()
            producer.produce(TOPIC, value=value, partition=0)
            producer.poll(0)
            sequence += 1
            time.sleep(SEND_INTERVAL_S)
        producer.flush(10)


def send_with_replog(bootstrap: list[tuple[str, int]], log: SendLog, stop: threading.Event) -> None:
    async def sending() -> None:
        cluster = Cluster(bootstrap)
        producer = Producer(cluster, ProducerConfig(acks=0, delivery_timeout_ms=10_000))
        try:
            sequence = 0
            while not stop.is_set():
                value = f"{log.prefix}{sequence}".encode()
                log.sent_at[value] = time.monotonic()
                await producer.send(TOPIC, value, partition=0)
                sequence += 1
                await asyncio.sleep(SEND_INTERVAL_S)
            await producer.flush()
        finally:
            await producer.close()
            await cluster.close()

    run(sending(), timeout_s=300)


async def partition_state(bootstrap: list[tuple[str, int]]) -> tuple[int, list[int]]:
    """The partition's leader and ISR from metadata."""
    state = (await leadership(bootstrap, TOPIC))[0]
    leader, isr = state["leader"], state["isr"]
    assert isinstance(leader, int) and isinstance(isr, list)
    return leader, isr


def leader_is(bootstrap: list[tuple[str, int]], leader: int) -> Callable[[], object]:
    async def check() -> bool:
        return (await partition_state(bootstrap))[0] == leader

    return check


def windows_after(moved_at: float) -> tuple[float, float]:
    return moved_at + SETTLE_S, moved_at + SETTLE_S + WINDOW_S


@pytest.mark.slow
def test_acks_zero_records_follow_a_killed_and_an_elected_leader(
    brokers: BrokerFactory,
) -> None:
    for broker_id in (1, 2):
        brokers.start(broker_id, **{"auto.leader.rebalance.enable": "false"})
    make_topic(brokers, TOPIC, 1, rf=2)
    preferred, _ = run(partition_state(brokers.bootstrap))
    other = 3 - preferred
    other_only = [(brokers.brokers[other].host, brokers.brokers[other].port)]
    logs = [SendLog("kafka-"), SendLog("replog-")]
    stop = threading.Event()
    senders = [
        threading.Thread(
            target=send_with_confluent, args=(brokers.kafka_bootstrap(), logs[0], stop)
        ),
        threading.Thread(target=send_with_replog, args=(brokers.bootstrap, logs[1], stop)),
    ]
    windows: list[tuple[float, float]] = []
    for sender in senders:
        sender.start()
    try:
        time.sleep(1.0)
        brokers.brokers[preferred].kill()
        run(wait_for(leader_is(other_only, other), timeout_s=30, interval_s=0.1))
        windows.append(windows_after(time.monotonic()))
        time.sleep(SETTLE_S + WINDOW_S)

        brokers.start(preferred)

        async def back_in_sync() -> bool:
            return preferred in (await partition_state(brokers.bootstrap))[1]

        run(wait_for(back_in_sync, timeout_s=30))
        elected = replog("elect-leaders", "--topic", TOPIC, "--zookeeper", brokers.zk_connect)
        assert elected.returncode == 0, elected.stderr
        run(wait_for(leader_is(brokers.bootstrap, preferred), timeout_s=30, interval_s=0.1))
        windows.append(windows_after(time.monotonic()))
        time.sleep(SETTLE_S + WINDOW_S)
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=60)
    total = sum(len(log.sent_at) for log in logs)
    consumer_config = {
        "bootstrap.servers": brokers.kafka_bootstrap(),
        "group.id": "acks-zero-check",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    with kafka_consumer(consumer_config) as consumer:
        consumer.subscribe([TOPIC])
        _, end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
        stored = {record.value for record in consume(consumer, at_least(end), timeout_s=60)}
    assert 0 < end <= total
    for log in logs:
        for move, (start, finish) in zip(("kill", "elect-leaders"), windows, strict=True):
            sent = log.sent_between(start, finish)
            assert sent, f"{log.prefix} sent nothing after the {move}"
            kept = len(sent & stored) / len(sent)
            assert kept >= REQUIRED_SHARE, (
                f"{log.prefix}: {kept:.1%} of {len(sent)} acks=0 records sent 2 s after "
                f"the {move} are in the log"
            )
