"""Security on the Kafka listener: the same TLS, SCRAM users and ACLs as the replog
listener, with confluent-kafka as the client (brokers on SASL_SSL, the authorizer on;
the setup is tests/security's)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_replica.security.acl import (
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.zk.security_store import add_acls
from spark_replica.zk.session import connect
from tests.security.conftest import PASSWORDS, ZK_DIGEST, SecureSetup, secure  # noqa: F401

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0


def _client(setup: SecureSetup, user: str, password: str | None = None) -> dict[str, object]:
    return {
        "bootstrap.servers": setup.brokers.kafka_bootstrap(),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(setup.ca.cert),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user] if password is None else password,
    }


def _allow_group(setup: SecureSetup, principal: str, group: str) -> None:
    zk = connect(setup.zk_connect, digest=ZK_DIGEST)
    try:
        add_acls(
            zk,
            ResourcePattern(ResourceType.GROUP, group, PatternType.LITERAL),
            [AclEntry(principal, "*", Operation.READ, Permission.ALLOW)],
        )
    finally:
        zk.stop()
        zk.close()


def _create(setup: SecureSetup, topic: str) -> None:
    admin = AdminClient(_client(setup, "admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=10).topics[topic]
        if described.error is None and described.partitions[0].leader >= 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} has no leader")


def test_scram_over_tls_and_acls_apply_on_the_kafka_port(secure: SecureSetup) -> None:  # noqa: F811
    secure.start(1)
    _create(secure, "allowed")
    _create(secure, "forbidden")
    secure.allow("User:alice", Operation.WRITE, "allowed")
    secure.allow("User:alice", Operation.READ, "allowed")
    # alice sees the forbidden topic, so it is the Produce that is refused.
    secure.allow("User:alice", Operation.DESCRIBE, "forbidden")

    _allow_group(secure, "User:alice", "readers")

    producer = Producer({**_client(secure, "alice"), "acks": "all"})
    outcomes: dict[str, KafkaError | None] = {}

    def delivered(error: KafkaError | None, message: object) -> None:
        outcomes[message.topic()] = error  # type: ignore[attr-defined]

    producer.produce("allowed", value=b"ok", on_delivery=delivered)
    producer.produce("forbidden", value=b"no", on_delivery=delivered)
    producer.flush(DEADLINE_S)
    assert outcomes["allowed"] is None
    forbidden = outcomes["forbidden"]
    assert forbidden is not None and forbidden.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    consumer = Consumer({**_client(secure, "alice"), "group.id": "readers"})
    try:
        consumer.assign([TopicPartition("allowed", 0, 0)])
        values = []
        deadline = time.monotonic() + DEADLINE_S
        while not values and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
        assert values == [b"ok"]
    finally:
        consumer.close()


def test_a_wrong_password_is_refused_on_the_kafka_port(secure: SecureSetup) -> None:  # noqa: F811
    secure.start(1)
    admin = AdminClient({**_client(secure, "alice", password="wrong")})
    with pytest.raises(KafkaException) as caught:
        admin.list_topics(timeout=8)
    assert caught.value.args[0].code() in (
        KafkaError._AUTHENTICATION,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
    )
