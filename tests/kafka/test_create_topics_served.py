"""Kafka's CreateTopics and CreatePartitions are answered once the answering broker serves
what they made, as Kafka's are: the very next Metadata request to that broker names a
leader for every partition. Stream processors rely on it (Faust creates a table's
changelog topic and reads its partition count straight away), so both are asked here
with aiokafka's own client, on one connection to one broker, with no wait in between.
DeleteTopics likewise is answered once the topic is gone, so that the name can be
created again straight away (tests and tools that reset a topic do so).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from aiokafka.protocol.metadata import MetadataRequest

from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support import BrokerFactory, module_brokers, run

pytestmark = pytest.mark.slow

# Many partitions: the more the controller has to elect, the longer an answer that does
# not wait for its UpdateMetadata comes before it.
PARTITIONS = 24
GROWN_TO = 48
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def kafka_broker(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string, tmp_path_factory.mktemp("create-topics-served")
    ) as brokers:
        yield brokers


def leaders(metadata: dict[str, Any], topic: str) -> list[int]:
    """The leader of each partition of `topic` in a Metadata answer, in partition order."""
    (found,) = [t for t in metadata["topics"] if t["topic"] == topic]
    assert found["error_code"] == 0, f"Metadata answered error {found['error_code']}"
    partitions = sorted(found["partitions"], key=lambda p: p["partition"])
    return [p["leader"] for p in partitions]


async def create_then_grow(bootstrap: str, topic: str) -> tuple[list[int], list[int]]:
    """The leaders Metadata names right after CreateTopics, and right after CreatePartitions."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS * 2)
    await client.bootstrap()
    try:
        (node,) = [broker.nodeId for broker in client.cluster.brokers()]
        created = await client.send(
            node, CreateTopicsRequest([(topic, PARTITIONS, 1, [], [])], TIMEOUT_MS, False)
        )
        assert [t["error_code"] for t in created.to_object()["topic_errors"]] == [0]
        after_create = await client.send(node, MetadataRequest([topic]))
        grown = await client.send(
            node, CreatePartitionsRequest([(topic, (GROWN_TO, None))], TIMEOUT_MS, False)
        )
        assert [t["error_code"] for t in grown.to_object()["topic_errors"]] == [0]
        after_growth = await client.send(node, MetadataRequest([topic]))
        return (
            leaders(after_create.to_object(), topic),
            leaders(after_growth.to_object(), topic),
        )
    finally:
        await client.close()


def test_topics_are_served_when_their_creation_is_answered(kafka_broker: BrokerFactory) -> None:
    topic = f"served-{uuid.uuid4().hex[:8]}"
    after_create, after_growth = run(create_then_grow(kafka_broker.kafka_bootstrap(), topic))
    assert after_create == [1] * PARTITIONS
    assert after_growth == [1] * GROWN_TO


async def delete_then_create(bootstrap: str, topic: str) -> tuple[list[int], list[int]]:
    """The error codes of a DeleteTopics and of the CreateTopics sent right after it."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS * 2)
    await client.bootstrap()
    try:
        (node,) = [broker.nodeId for broker in client.cluster.brokers()]
        create = CreateTopicsRequest([(topic, 2, 1, [], [])], TIMEOUT_MS, False)
        first = await client.send(node, create)
        assert [t["error_code"] for t in first.to_object()["topic_errors"]] == [0]
        deleted = await client.send(node, DeleteTopicsRequest([topic], TIMEOUT_MS))
        again = await client.send(node, create)
        return (
            [t["error_code"] for t in deleted.to_object()["topic_error_codes"]],
            [t["error_code"] for t in again.to_object()["topic_errors"]],
        )
    finally:
        await client.close()


def test_a_deleted_topic_can_be_created_again_as_soon_as_the_deletion_is_answered(
    kafka_broker: BrokerFactory,
) -> None:
    topic = f"reset-{uuid.uuid4().hex[:8]}"
    deleted, created = run(delete_then_create(kafka_broker.kafka_bootstrap(), topic))
    assert (deleted, created) == ([0], [0])
