"""Who may read a broker's /metrics: TLS and HTTP basic authentication, both optional.

The metrics name every topic, partition count and traffic figure of the cluster, so an
operator who exposes the port beyond a trusted network can require both (replog's own
configs; Kafka serves metrics over JMX and has no HTTP endpoint to configure):

- `metrics.ssl.keystore.location`: the endpoint serves HTTPS only, with this PEM file's
  key and certificate chain (as `ssl.keystore.location`);
- `metrics.basic.auth.username` and `metrics.basic.auth.password`: every request needs
  `Authorization: Basic` with these (Prometheus' `basic_auth` scrape setting). The
  password is a secret: give it in the `--config` file, never on the command line. Basic
  authentication sends the password itself, so it is only accepted with TLS (as PLAIN is
  only enabled on a SASL_SSL listener).

The check is pure (`authorized`) and compares in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spark_replica.errors import ConfigError

KEYSTORE_KEY = "metrics.ssl.keystore.location"
USERNAME_KEY = "metrics.basic.auth.username"
PASSWORD_KEY = "metrics.basic.auth.password"
KEYS = (KEYSTORE_KEY, USERNAME_KEY, PASSWORD_KEY)
REALM = "replog metrics"


@dataclass(frozen=True)
class MetricsAccess:
    keystore: Path | None = None  # PEM: key and certificate chain; None serves plain HTTP
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.username is None) != (self.password is None):
            raise ConfigError(f"give both {USERNAME_KEY} and {PASSWORD_KEY}, or neither")
        if self.username is not None and (not self.username or ":" in self.username):
            raise ConfigError(f"{USERNAME_KEY} must be non-empty and hold no ':'")
        if self.password == "":
            raise ConfigError(f"{PASSWORD_KEY} must not be empty")
        if self.requires_login and self.keystore is None:
            raise ConfigError(
                f"{USERNAME_KEY} needs {KEYSTORE_KEY}: basic authentication sends the "
                "password itself, so the metrics endpoint must serve HTTPS"
            )

    @property
    def requires_login(self) -> bool:
        return self.username is not None

    def with_settings(self, settings: Mapping[str, str]) -> MetricsAccess:
        """Apply `metrics.*` settings (keys in KEYS)."""
        fields: dict[str, Any] = {}
        for key, raw in settings.items():
            value = raw.strip()
            if key == KEYSTORE_KEY:
                fields["keystore"] = Path(value) if value else None
            elif key == USERNAME_KEY:
                fields["username"] = value
            elif key == PASSWORD_KEY:
                fields["password"] = raw
            else:
                raise ConfigError(f"unknown metrics config {key!r}")
        return replace(self, **fields)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server side of HTTPS, or None for plain HTTP; a bad file is a ConfigError."""
        if self.keystore is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.keystore)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{KEYSTORE_KEY}: cannot load {self.keystore}: {exc}") from exc
        return context

    def authorized(self, authorization: str | None) -> bool:
        """Whether a request with this Authorization header value may read the metrics."""
        if self.username is None or self.password is None:
            return True
        if authorization is None:
            return False
        scheme, _, encoded = authorization.strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            given = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        expected = f"{self.username}:{self.password}".encode()
        return hmac.compare_digest(given, expected)
