"""TransactionalId ACLs on both listeners, against a real secured broker: a
transactional producer needs Write on its TransactionalId (else its init_transactions
fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, at FindCoordinator without Describe and
at InitProducerId with Describe only), whether it is confluent-kafka's on the Kafka
listener or replog's TransactionalProducer on the replog listener, and ListTransactions,
through `replog transactions list`, shows a principal only the ids it may describe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from spark_replica.client import Cluster, ProducerConfig, TransactionalProducer
from spark_replica.errors import TransactionalIdAuthorizationFailedError
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
from tests.security.conftest import PASSWORDS, ZK_DIGEST, SecureSetup, jaas
from tests.support import replog, run

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0
ALICE_ID, ADMIN_ID = "alice-tx", "admin-tx"
# An id alice may describe (FindCoordinator answers her) but not write.
SEEN_ID = "seen-tx"


def _producer(setup: SecureSetup, user: str, transactional_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": setup.brokers.kafka_bootstrap(),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(setup.ca.cert),
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
            "transactional.id": transactional_id,
        }
    )


def _properties(setup: SecureSetup, user: str) -> Path:
    path = setup.directory / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.jaas.config={jaas(user, PASSWORDS[user])}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={setup.ca.cert}\n"
    )
    return path


def _listed(setup: SecureSetup, user: str) -> set[str]:
    done = replog(
        "transactions",
        "list",
        "--json",
        "--bootstrap-server",
        setup.brokers.kafka_bootstrap(),
        "--command-config",
        str(_properties(setup, user)),
    )
    assert done.returncode == 0, done.stderr.decode()
    return {entry["transactional_id"] for entry in json.loads(done.stdout)}


async def _native_inits(setup: SecureSetup) -> None:
    """alice's native producers: refused for the ids she may not write, served for hers."""
    cluster = Cluster(setup.brokers.bootstrap, security=setup.client("alice"))
    try:
        for refused_id in (ADMIN_ID, SEEN_ID):
            refused = TransactionalProducer(cluster, ProducerConfig(transactional_id=refused_id))
            with pytest.raises(TransactionalIdAuthorizationFailedError):
                await refused.init_transactions()
        allowed = TransactionalProducer(cluster, ProducerConfig(transactional_id=ALICE_ID))
        await allowed.init_transactions()
    finally:
        await cluster.close()


def test_transactional_ids_need_write_and_are_listed_only_to_who_may_describe_them(
    secure: SecureSetup,
) -> None:
    zk = connect(secure.zk_connect, digest=ZK_DIGEST)
    try:
        add_acls(
            zk,
            ResourcePattern(ResourceType.TRANSACTIONAL_ID, ALICE_ID, PatternType.LITERAL),
            [AclEntry("User:alice", "*", Operation.WRITE, Permission.ALLOW)],
        )
        add_acls(
            zk,
            ResourcePattern(ResourceType.TRANSACTIONAL_ID, SEEN_ID, PatternType.LITERAL),
            [AclEntry("User:alice", "*", Operation.DESCRIBE, Permission.ALLOW)],
        )
    finally:
        zk.stop()
    secure.start(1)

    for refused_id in (ADMIN_ID, SEEN_ID):
        refused = _producer(secure, "alice", refused_id)
        with pytest.raises(KafkaException) as raised:
            refused.init_transactions(DEADLINE_S)
        assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    _producer(secure, "alice", ALICE_ID).init_transactions(DEADLINE_S)
    run(_native_inits(secure), DEADLINE_S)
    _producer(secure, "admin", ADMIN_ID).init_transactions(DEADLINE_S)
    assert _listed(secure, "admin") >= {ALICE_ID, ADMIN_ID}
    assert _listed(secure, "alice") == {ALICE_ID}
