"""A secured broker setup for the security tests: a CA, broker certificates, SCRAM users
in ZooKeeper, and brokers on SASL_SSL listeners with the ACL authorizer on."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spark_replica.security.acl import (
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.security.certs import CaFiles, issue_server_cert, make_ca
from spark_replica.security.scram import make_credential
from spark_replica.security.settings import SecurityConfig
from spark_replica.zk.security_store import add_acls, write_credential
from spark_replica.zk.session import connect
from tests.support import BrokerFactory

ZK_DIGEST = "broker:zk-secret"
PASSWORDS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret"}


@dataclass
class SecureSetup:
    zk_connect: str
    ca: CaFiles
    directory: Path
    brokers: BrokerFactory

    def start(self, broker_id: int, protocol: str = "SASL_SSL", **extra: str) -> None:
        keystore = issue_server_cert(
            self.ca, self.directory / f"broker-{broker_id}.pem", common_name="broker"
        )
        settings = {
            "listener.security.protocol": protocol,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(self.ca.cert),
            "sasl.jaas.config": jaas("broker", PASSWORDS["broker"]),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:broker",
            "zookeeper.set.acl": "true",
            "zookeeper.digest": ZK_DIGEST,
            **extra,
        }
        self.brokers.start(broker_id, **settings)

    def client(self, user: str = "alice", password: str | None = None, **props: str):
        return SecurityConfig.from_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": jaas(user, PASSWORDS[user] if password is None else password),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.ca.cert),
                **props,
            }
        )

    def allow(self, principal: str, operation: Operation, topic: str, deny: bool = False) -> None:
        permission = Permission.DENY if deny else Permission.ALLOW
        zk = connect(self.zk_connect, digest=ZK_DIGEST)
        try:
            add_acls(
                zk,
                ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                [AclEntry(principal, "*", operation, permission)],
            )
        finally:
            zk.stop()
            zk.close()


def jaas(user: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";'
    )


@pytest.fixture
def secure(zk_connect: str, tmp_path: Path) -> Iterator[SecureSetup]:
    zk = connect(zk_connect, digest=ZK_DIGEST)
    try:
        for user, password in PASSWORDS.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                write_credential(zk, user, make_credential(mechanism, password))
    finally:
        zk.stop()
        zk.close()
    factory = BrokerFactory(zk_connect, tmp_path)
    try:
        yield SecureSetup(zk_connect, make_ca(tmp_path / "ca"), tmp_path, factory)
    finally:
        factory.stop_all()
