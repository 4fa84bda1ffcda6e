"""Consumer groups on the Kafka listener with real clients (confluent-kafka, aiokafka)
against real brokers: partitions split and handed over, commits resumed from, and the
coordinator's failure survived."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import Consumer, KafkaException, TopicPartition

from tests.support import (
    BrokerFactory,
    create,
    create_topic,
    group_coordinator,
    produce,
    run,
    start_cluster,
)

pytestmark = pytest.mark.slow

# Sessions of 2 s (the broker's minimum lowered to allow it) keep expiry and
# rebalances quick; heartbeats every 300 ms.
GROUP_OVERRIDES = {
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}
DEADLINE_S = 45.0


def consumer(bootstrap: str, group: str, **extra: str | int | bool) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": 2_000,
            "heartbeat.interval.ms": 300,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1_000,
            **extra,
        }
    )


@pytest.fixture
def closing() -> Iterator[Callable[[Consumer], Consumer]]:
    """Close every consumer a test opened, even when it fails."""
    opened: list[Consumer] = []

    def track(c: Consumer) -> Consumer:
        opened.append(c)
        return c

    yield track
    for c in opened:
        with contextlib.suppress(KafkaException, RuntimeError):
            c.close()


def poll_until(consumers: list[Consumer], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, "the group did not settle in time"
        for c in consumers:
            c.poll(0.1)


def partitions_of(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def read(c: Consumer, count: int) -> list[int]:
    """Offsets of the next `count` records."""
    offsets: list[int] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(offsets) < count:
        assert time.monotonic() < deadline, f"read {len(offsets)} of {count} records"
        message = c.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            offsets.append(message.offset())
    return offsets


def test_two_consumers_split_the_partitions_and_one_gets_all_when_the_other_leaves(
    brokers: BrokerFactory, closing: Callable[[Consumer], Consumer]
) -> None:
    brokers.start(1, **GROUP_OVERRIDES)
    run(create_topic(brokers.bootstrap, "split", partitions=4))
    first = closing(consumer(brokers.kafka_bootstrap(), "splitters"))
    first.subscribe(["split"])
    poll_until([first], lambda: partitions_of(first) == {0, 1, 2, 3})
    second = closing(consumer(brokers.kafka_bootstrap(), "splitters"))
    second.subscribe(["split"])
    poll_until(
        [first, second],
        lambda: len(partitions_of(first)) == 2 and len(partitions_of(second)) == 2,
    )
    assert partitions_of(first) | partitions_of(second) == {0, 1, 2, 3}
    second.close()
    poll_until([first], lambda: partitions_of(first) == {0, 1, 2, 3})


# A member in another process that is killed: it never leaves, its session expires.
_MEMBER_SCRIPT = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": 2000, "heartbeat.interval.ms": 300})
c.subscribe([sys.argv[3]])
announced = False
while True:
    c.poll(0.1)
    if c.assignment() and not announced:
        print("assigned", flush=True)
        announced = True
"""


def test_a_killed_member_expires_and_its_partitions_move(
    brokers: BrokerFactory, closing: Callable[[Consumer], Consumer]
) -> None:
    brokers.start(1, **GROUP_OVERRIDES)
    run(create_topic(brokers.bootstrap, "expiry", partitions=2))
    first = closing(consumer(brokers.kafka_bootstrap(), "expirers"))
    first.subscribe(["expiry"])
    poll_until([first], lambda: partitions_of(first) == {0, 1})
    other = subprocess.Popen(
        [sys.executable, "-c", _MEMBER_SCRIPT, brokers.kafka_bootstrap(), "expirers", "expiry"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        poll_until([first], lambda: len(partitions_of(first)) == 1)
        other.kill()
        other.wait(timeout=10)
        started = time.monotonic()
        poll_until([first], lambda: partitions_of(first) == {0, 1})
        # Handed over by the session's expiry (2 s), not by a departure.
        assert time.monotonic() - started > 1.0
    finally:
        other.kill()
        other.wait(timeout=10)
        assert other.stdout is not None
        other.stdout.close()


def test_commit_close_restart_resumes_from_the_commit(
    brokers: BrokerFactory, closing: Callable[[Consumer], Consumer]
) -> None:
    brokers.start(1, **GROUP_OVERRIDES)
    run(create_topic(brokers.bootstrap, "resume", partitions=1))
    run(produce(brokers.bootstrap, "resume", [f"v{i}" for i in range(100)]))
    first = closing(consumer(brokers.kafka_bootstrap(), "resumers"))
    first.subscribe(["resume"])
    assert read(first, 40) == list(range(40))
    first.commit(asynchronous=False)
    committed = first.committed([TopicPartition("resume", 0)], timeout=10)
    assert committed[0].offset == 40
    first.close()
    again = closing(consumer(brokers.kafka_bootstrap(), "resumers"))
    again.subscribe(["resume"])
    assert read(again, 60) == list(range(40, 100))


def test_committed_offsets_survive_the_coordinators_death(
    brokers: BrokerFactory, closing: Callable[[Consumer], Consumer]
) -> None:
    start_cluster(brokers, 3, **GROUP_OVERRIDES)
    run(create(brokers.bootstrap, "failover", partitions=1, rf=3))
    run(produce(brokers.bootstrap, "failover", [f"v{i}" for i in range(150)]))
    group = "survivors"
    member = closing(consumer(brokers.kafka_bootstrap(), group))
    member.subscribe(["failover"])
    assert read(member, 50) == list(range(50))
    member.commit(asynchronous=False)
    brokers.brokers[group_coordinator(brokers.bootstrap, group)].kill()
    # The new coordinator, the new leader of the group's offsets partition, loaded it.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            committed = member.committed([TopicPartition("failover", 0)], timeout=5)
            if committed[0].offset == 50:
                break
        except KafkaException:
            pass
        assert time.monotonic() < deadline, "the committed offset was not found again"
    assert read(member, 50) == list(range(50, 100))
    member.commit(asynchronous=False)
    member.close()
    restarted = closing(consumer(brokers.kafka_bootstrap(), group))
    restarted.subscribe(["failover"])
    assert read(restarted, 50) == list(range(100, 150))


def test_aiokafka_consumer_in_a_group_commits_and_resumes(brokers: BrokerFactory) -> None:
    brokers.start(1, **GROUP_OVERRIDES)
    run(create_topic(brokers.bootstrap, "aio", partitions=1))
    run(produce(brokers.bootstrap, "aio", [f"v{i}" for i in range(30)]))
    partition = AioPartition("aio", 0)

    async def consume(count: int) -> list[int]:
        client = AIOKafkaConsumer(
            "aio",
            bootstrap_servers=brokers.kafka_bootstrap(),
            group_id="aio-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=2_000,
            heartbeat_interval_ms=300,
        )
        await client.start()
        try:
            offsets: list[int] = []
            while len(offsets) < count:
                records = (await client.getmany(timeout_ms=500)).get(partition, [])
                offsets.extend(r.offset for r in records[: count - len(offsets)])
            await client.commit({partition: offsets[-1] + 1})
            return offsets
        finally:
            await client.stop()

    assert run(consume(10), DEADLINE_S) == list(range(10))
    assert run(consume(20), DEADLINE_S) == list(range(10, 30))
