"""Group ACLs on the Kafka listener (SASL_SSL brokers with the authorizer on, set up as
tests/security does): a group needs Read to join and commit, and ListGroups shows a
principal only the groups it may describe."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
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


def _client(setup: SecureSetup, user: str) -> dict[str, object]:
    return {
        "bootstrap.servers": setup.brokers.kafka_bootstrap(),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(setup.ca.cert),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
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


def _first_event(consumer: Consumer) -> KafkaError | bytes:
    """The first record's value or the first error the consumer reports."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        error = message.error()
        return error if error is not None else message.value()
    raise AssertionError("the consumer saw nothing")


def test_group_acls_on_the_kafka_port(secure: SecureSetup) -> None:  # noqa: F811
    secure.start(1, **{"group.min.session.timeout.ms": "1000"})
    admin = AdminClient(_client(secure, "admin"))
    admin.create_topics([NewTopic("readable", 1, 1)])["readable"].result(DEADLINE_S)
    secure.allow("User:alice", Operation.READ, "readable")
    settings = {
        **_client(secure, "alice"),
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 2_000,
    }

    refused = Consumer({**settings, "group.id": "closed"})
    try:
        refused.subscribe(["readable"])
        error = _first_event(refused)
        assert isinstance(error, KafkaError)
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    finally:
        refused.close()

    _allow_group(secure, "User:alice", "open")
    member = Consumer({**settings, "group.id": "open"})
    try:
        member.subscribe(["readable"])
        deadline = time.monotonic() + DEADLINE_S
        while not member.assignment():
            assert time.monotonic() < deadline, "alice never joined group open"
            member.poll(0.2)
        member.commit(offsets=[TopicPartition("readable", 0, 0)], asynchronous=False)
        (committed,) = member.committed([TopicPartition("readable", 0)], timeout=20)
        assert committed.offset == 0 and committed.error is None
        alice_admin = AdminClient(_client(secure, "alice"))
        visible = alice_admin.list_consumer_groups().result(20)
        assert [g.group_id for g in visible.valid] == ["open"], visible.errors
        everything = admin.list_consumer_groups().result(20)
        assert {g.group_id for g in everything.valid} == {"open"}
    finally:
        member.close()
