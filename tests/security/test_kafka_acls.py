"""ACLs as Kafka writes them, against a real secured broker: an IdempotentWrite ACL (as
`kafka-acls --producer --idempotent` leaves it) and unreadable ACL data in ZooKeeper never
stop a DENY from applying, at once and after a restart; Kafka's AdminClient creates,
describes and deletes the ACLs the broker enforces."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from spark_replica.zk.session import connect
from tests.security.conftest import PASSWORDS, ZK_DIGEST, SecureSetup, jaas
from tests.support import http_get, replog_in_process

pytestmark = pytest.mark.slow

DEADLINE_S = 30.0
# The bound: a DENY added with `replog acls add` applies within this.
DENY_APPLIES_WITHIN_S = 5.0
GARBAGE_PATH = "/kafka-acl/Topic/garbage"
UNREADABLE_GAUGE = b"kafka_server_kafka_security_authorizer_metrics_acls_unreadable_count 1.0"


def _client(setup: SecureSetup, user: str) -> dict[str, object]:
    return {
        "bootstrap.servers": setup.brokers.kafka_bootstrap(),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(setup.ca.cert),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def _create_topic(setup: SecureSetup, topic: str) -> None:
    admin = AdminClient(_client(setup, "admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=10).topics[topic]
        if described.error is None and described.partitions[0].leader >= 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} has no leader")


class Sender:
    """One producer of a user's, sending one record at a time and telling how it went."""

    def __init__(self, setup: SecureSetup, user: str) -> None:
        self._producer = Producer({**_client(setup, user), "acks": "all", "linger.ms": 0})

    def send(self, topic: str) -> int | None:
        """The record's error code, None when it was written."""
        outcomes: list[KafkaError | None] = []
        self._producer.produce(topic, value=b"v", on_delivery=lambda e, _: outcomes.append(e))
        self._producer.flush(DEADLINE_S)
        assert outcomes, "no delivery report"
        error = outcomes[0]
        return None if error is None else error.code()

    def refused_within(self, topic: str, seconds: float) -> float:
        """Send until a record is refused for authorization; how long that took."""
        start = time.monotonic()
        while (code := self.send(topic)) != KafkaError.TOPIC_AUTHORIZATION_FAILED:
            assert code is None, code
            elapsed = time.monotonic() - start
            assert elapsed < seconds, f"still written {elapsed:.1f} s after the DENY"
            time.sleep(0.1)
        return time.monotonic() - start


def _write_kafka_acl_json(setup: SecureSetup) -> None:
    """What Kafka's own tools leave in ZooKeeper: IdempotentWrite on the cluster for alice
    (`kafka-acls --producer --idempotent`), and a znode no tool could have written."""
    idempotent = {
        "principal": "User:alice",
        "permissionType": "Allow",
        "operation": "IdempotentWrite",
        "host": "*",
    }
    zk = connect(setup.zk_connect, digest=ZK_DIGEST)
    try:
        zk.create(
            "/kafka-acl/Cluster/kafka-cluster",
            json.dumps({"version": 1, "acls": [idempotent]}).encode(),
            makepath=True,
        )
        zk.create(GARBAGE_PATH, b"\x00 not ACL JSON", makepath=True)
    finally:
        zk.stop()
        zk.close()


def _admin_properties(setup: SecureSetup) -> Path:
    path = setup.directory / "admin.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.jaas.config={jaas('admin', PASSWORDS['admin'])}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={setup.ca.cert}\n"
    )
    return path


def test_a_deny_applies_beside_kafka_written_and_unreadable_acls_also_after_a_restart(
    secure: SecureSetup,
) -> None:
    _write_kafka_acl_json(secure)
    secure.start(1, **{"allow.everyone.if.no.acl.found": "true"})
    broker = secure.brokers.brokers[1]
    _create_topic(secure, "t")
    alice = Sender(secure, "alice")
    assert alice.send("t") is None  # no ACL on t: allow.everyone.if.no.acl.found

    added = replog_in_process(
        "acls", "add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "t",
        "--bootstrap", broker.address, "--command-config", str(_admin_properties(secure)),
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    alice.refused_within("t", DENY_APPLIES_WITHIN_S)

    log = (broker.log_dir / "broker.log").read_text()
    assert any("WARNING" in line and GARBAGE_PATH in line for line in log.splitlines())
    assert broker.metrics_url is not None
    assert UNREADABLE_GAUGE in http_get(broker.metrics_url, "/metrics")[2]

    broker.stop()
    broker.start()
    assert Sender(secure, "alice").send("t") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _alice_on_orders(operation: AclOperation) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


def test_kafka_admin_client_creates_describes_and_deletes_the_acls_enforced(
    secure: SecureSetup,
) -> None:
    secure.start(1)
    _create_topic(secure, "orders")
    admin = AdminClient(_client(secure, "admin"))
    write = _alice_on_orders(AclOperation.WRITE)
    idempotent = AclBinding(
        ResourceType.BROKER,
        "kafka-cluster",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.IDEMPOTENT_WRITE,
        AclPermissionType.ALLOW,
    )
    for created in admin.create_acls([write, idempotent]).values():
        created.result(DEADLINE_S)

    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    described = admin.describe_acls(everything).result(DEADLINE_S)
    assert sorted(described) == sorted([write, idempotent])

    alice = Sender(secure, "alice")
    deadline = time.monotonic() + DEADLINE_S
    while alice.send("orders") is not None:
        assert time.monotonic() < deadline, "alice's Write never applied"
        time.sleep(0.2)

    # Creating ACLs needs Alter on the cluster, describing them Describe: alice has
    # neither. (librdkafka drops DescribeAcls's error code: a refusal reads as empty.)
    alice_admin = AdminClient(_client(secure, "alice"))
    read = _alice_on_orders(AclOperation.READ)
    with pytest.raises(KafkaException) as refused:
        alice_admin.create_acls([read])[read].result(DEADLINE_S)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert alice_admin.describe_acls(everything).result(DEADLINE_S) == []

    writes = AclBindingFilter(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.WRITE,
        AclPermissionType.ANY,
    )
    deleted = admin.delete_acls([writes])[writes].result(DEADLINE_S)
    assert deleted == [write]
    assert admin.describe_acls(everything).result(DEADLINE_S) == [idempotent]
    alice.refused_within("orders", DEADLINE_S)
