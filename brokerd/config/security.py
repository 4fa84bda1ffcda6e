"""The broker's security settings: its listener's protocol, TLS files, SASL mechanisms,
the authorizer, and how it logs in to other brokers and to ZooKeeper.

Kafka's config names, so that an operator's server.properties reads familiarly; values
are checked when the broker starts (a ConfigError names the key). Secrets (the broker's
SASL password, the ZooKeeper digest) come from the file given with `--config`, never from
the command line, where any local user could read them.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spark_replica.errors import ConfigError
from spark_replica.security.scram import MECHANISMS
from spark_replica.security.settings import (
    PLAINTEXT,
    SASL_PLAINTEXT,
    SASL_PROTOCOLS,
    SASL_SSL,
    SSL,
    TLS_PROTOCOLS,
    SecurityConfig,
)
from spark_replica.zk.session import split_digest

PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
PLAIN = "PLAIN"
CLIENT_AUTH = ("none", "requested", "required")
# Kafka's authorizer class names, and replog's short one.
AUTHORIZER_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "AclAuthorizer",
)

KEYS = (
    "listener.security.protocol",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.client.auth",
    "ssl.endpoint.identification.algorithm",
    "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.jaas.config",
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "zookeeper.set.acl",
    "zookeeper.digest",
    "connection.failed.authentication.delay.ms",
)


@dataclass(frozen=True)
class BrokerSecurity:
    protocol: str = PLAINTEXT
    keystore: Path | None = None  # the broker's key and certificate chain, one PEM file
    truststore: Path | None = None  # CA certificates (PEM) for other brokers and clients
    client_auth: str = "none"
    check_hostname: bool = True
    enabled_mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")
    inter_broker_mechanism: str = "SCRAM-SHA-512"
    jaas_config: str | None = field(default=None, repr=False)
    authorizer: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    zookeeper_set_acl: bool = False
    zookeeper_digest: str | None = field(default=None, repr=False)
    failed_authentication_delay_ms: int = 100  # Kafka's default

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol={self.protocol!r}: use one of {', '.join(PROTOCOLS)}"
            )
        if self.uses_tls and self.keystore is None:
            raise ConfigError(f"a {self.protocol} listener needs ssl.keystore.location")
        if self.client_auth not in CLIENT_AUTH:
            raise ConfigError(f"ssl.client.auth={self.client_auth!r}: use {', '.join(CLIENT_AUTH)}")
        for mechanism in self.enabled_mechanisms:
            if mechanism not in MECHANISMS and mechanism != PLAIN:
                raise ConfigError(
                    f"sasl.enabled.mechanisms: {mechanism} is not supported "
                    f"(supported: {', '.join([*MECHANISMS, PLAIN])})"
                )
        if self.uses_sasl and not self.enabled_mechanisms:
            raise ConfigError("sasl.enabled.mechanisms is empty on a SASL listener")
        if PLAIN in self.enabled_mechanisms and self.protocol == SASL_PLAINTEXT:
            raise ConfigError(
                "sasl.enabled.mechanisms: PLAIN sends the password itself, so it is only "
                "enabled on a SASL_SSL listener"
            )
        if self.uses_sasl and self.inter_broker_mechanism not in self.enabled_mechanisms:
            raise ConfigError(
                f"sasl.mechanism.inter.broker.protocol={self.inter_broker_mechanism} is not "
                "in sasl.enabled.mechanisms"
            )
        if self.uses_sasl and self.jaas_config is None:
            raise ConfigError(
                "a SASL listener needs sasl.jaas.config: the broker's own login to other brokers"
            )
        if self.zookeeper_set_acl and self.zookeeper_digest is None:
            raise ConfigError("zookeeper.set.acl=true needs zookeeper.digest=USER:PASSWORD")
        if self.zookeeper_digest is not None:
            split_digest(self.zookeeper_digest)
        if self.failed_authentication_delay_ms < 0:
            raise ConfigError("connection.failed.authentication.delay.ms must be 0 or more")
        # Built once, so that a bad file fails the start, not the first connection.
        object.__setattr__(self, "_inter_broker", self._build_inter_broker())

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    @property
    def zookeeper_login(self) -> str | None:
        """The digest the broker's ZooKeeper session logs in with (None: anonymous)."""
        return self.zookeeper_digest if self.zookeeper_set_acl else None

    def _build_inter_broker(self) -> SecurityConfig | None:
        if self.protocol == PLAINTEXT:
            return None
        props = {"security.protocol": self.protocol}
        if self.uses_tls:
            props["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else ""
            if self.truststore is not None:
                props["ssl.truststore.type"] = "PEM"
                props["ssl.truststore.location"] = str(self.truststore)
            if self.client_auth != "none" and self.keystore is not None:
                props["ssl.keystore.type"] = "PEM"
                props["ssl.keystore.location"] = str(self.keystore)
        if self.uses_sasl:
            assert self.jaas_config is not None
            props |= {
                "sasl.mechanism": self.inter_broker_mechanism,
                "sasl.jaas.config": self.jaas_config,
            }
        return SecurityConfig.from_properties(props)

    def inter_broker(self) -> SecurityConfig | None:
        """How this broker connects to the others (follower fetches, the controller's
        requests, controlled shutdown): the same protocol as its listener."""
        return self._inter_broker  # type: ignore[attr-defined, no-any-return]

    def server_ssl_context(self) -> ssl.SSLContext | None:
        if not self.uses_tls:
            return None
        assert self.keystore is not None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.keystore)
            if self.truststore is not None:
                context.load_verify_locations(self.truststore)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load the broker's TLS files: {exc}") from exc
        context.verify_mode = {
            "none": ssl.CERT_NONE,
            "requested": ssl.CERT_OPTIONAL,
            "required": ssl.CERT_REQUIRED,
        }[self.client_auth]
        return context

    def with_settings(self, settings: Mapping[str, str]) -> BrokerSecurity:
        """Apply Kafka-named settings (keys in KEYS); ConfigError on a bad value."""
        fields: dict[str, Any] = {}
        for key, raw in settings.items():
            value = raw.strip()
            if key == "listener.security.protocol":
                fields["protocol"] = value.upper()
            elif key in ("ssl.keystore.type", "ssl.truststore.type"):
                if value.upper() != "PEM":
                    raise ConfigError(f"{key}={value}: only PEM is supported")
            elif key == "ssl.keystore.location":
                fields["keystore"] = Path(value)
            elif key == "ssl.truststore.location":
                fields["truststore"] = Path(value)
            elif key == "ssl.client.auth":
                fields["client_auth"] = value.lower()
            elif key == "ssl.endpoint.identification.algorithm":
                if value.lower() not in ("https", ""):
                    raise ConfigError(f"{key}={value!r}: use https, or empty to turn it off")
                fields["check_hostname"] = value.lower() == "https"
            elif key == "sasl.enabled.mechanisms":
                fields["enabled_mechanisms"] = tuple(
                    m.strip().upper() for m in value.split(",") if m.strip()
                )
            elif key == "sasl.mechanism.inter.broker.protocol":
                fields["inter_broker_mechanism"] = value.upper()
            elif key == "sasl.jaas.config":
                fields["jaas_config"] = value
            elif key == "authorizer.class.name":
                if value and value not in AUTHORIZER_NAMES:
                    raise ConfigError(
                        f"authorizer.class.name={value}: use {AUTHORIZER_NAMES[0]} or leave it "
                        "empty (no authorizer)"
                    )
                fields["authorizer"] = bool(value)
            elif key == "super.users":
                fields["super_users"] = frozenset(
                    user.strip() for user in value.split(";") if user.strip()
                )
            elif key == "allow.everyone.if.no.acl.found":
                fields["allow_everyone_if_no_acl_found"] = _boolean(key, value)
            elif key == "zookeeper.set.acl":
                fields["zookeeper_set_acl"] = _boolean(key, value)
            elif key == "zookeeper.digest":
                fields["zookeeper_digest"] = value
            elif key == "connection.failed.authentication.delay.ms":
                try:
                    fields["failed_authentication_delay_ms"] = int(value)
                except ValueError:
                    raise ConfigError(f"{key}={value!r}: not an integer") from None
            else:
                raise ConfigError(f"unknown broker security config {key!r}")
        return replace(self, **fields)


def _boolean(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ConfigError(f"{key}={value!r}: use true or false")
    return value.lower() == "true"
