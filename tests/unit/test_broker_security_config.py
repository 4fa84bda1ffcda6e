"""The broker's security configs are checked at start-up, each mistake named."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from spark_replica.errors import ConfigError

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="pw";'
)


def _config(**settings: str) -> BrokerConfig:
    return BrokerConfig(1, Path("/nonexistent"), "127.0.0.1:2181").with_overrides(settings)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"listener.security.protocol": "TLS"}, "listener.security.protocol"),
        ({"listener.security.protocol": "SSL"}, "ssl.keystore.location"),
        ({"listener.security.protocol": "SASL_PLAINTEXT"}, "sasl.jaas.config"),
        (
            {
                "listener.security.protocol": "SASL_PLAINTEXT",
                "sasl.jaas.config": JAAS,
                "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            },
            "PLAIN",
        ),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
        ({"ssl.keystore.type": "JKS"}, "PEM"),
        ({"authorizer.class.name": "com.example.Custom"}, "authorizer.class.name"),
        ({"zookeeper.set.acl": "true"}, "zookeeper.digest"),
        ({"zookeeper.digest": "no-colon"}, "zookeeper.digest"),
        ({"allow.everyone.if.no.acl.found": "yes"}, "allow.everyone.if.no.acl.found"),
    ],
)
def test_bad_security_settings_are_named(settings: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        _config(**settings)


def test_a_sasl_listener_logs_in_to_other_brokers_with_its_own_settings() -> None:
    security = _config(
        **{
            "listener.security.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin; User:broker",
        }
    ).security
    inter_broker = security.inter_broker()
    assert inter_broker is not None
    assert (inter_broker.protocol, inter_broker.sasl_mechanism, inter_broker.username) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "broker",
    )
    assert security.authorizer and security.super_users == {"User:admin", "User:broker"}
    assert "pw" not in repr(security)
