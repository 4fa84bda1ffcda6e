"""DeleteRecords on the Kafka listener needs the Delete operation on the topic, as in
Kafka: a principal that may only describe the topic is refused, and deletes once allowed.
Brokers on SASL_SSL with the authorizer on; the setup is tests/security's."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_replica.security.acl import Operation
from tests.security.conftest import PASSWORDS, SecureSetup, secure  # noqa: F401

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0
TOPIC = "guarded"


def kafka_client(setup: SecureSetup, user: str) -> dict[str, object]:
    return {
        "bootstrap.servers": setup.brokers.kafka_bootstrap(),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(setup.ca.cert),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def wait_until_acl_applies(delete: object) -> int:
    """Retry while the broker has not yet seen the new ACL (it follows ZooKeeper's change
    notifications); the low watermark once it has."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return delete()  # type: ignore[operator]
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_AUTHORIZATION_FAILED" or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_delete_records_needs_delete_on_the_topic(secure: SecureSetup) -> None:  # noqa: F811
    secure.start(1)
    admin = AdminClient(kafka_client(secure, "admin"))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(DEADLINE_S)
    producer = Producer({**kafka_client(secure, "admin"), "acks": "all"})
    for i in range(5):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=0)
    assert producer.flush(DEADLINE_S) == 0
    secure.allow("User:alice", Operation.DESCRIBE, TOPIC)
    alice = AdminClient(kafka_client(secure, "alice"))

    def delete() -> int:
        futures = alice.delete_records([TopicPartition(TOPIC, 0, 3)])
        return next(iter(futures.values())).result(DEADLINE_S).low_watermark

    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        delete()
    secure.allow("User:alice", Operation.DELETE, TOPIC)
    assert wait_until_acl_applies(delete) == 3
