"""SaslHandshake and SaslAuthenticate: how a connection authenticates before anything else.

As in Kafka: the client names a mechanism (the broker answers with the ones it enables,
and an error in the frame header if the one asked for is not among them), then sends the
mechanism's tokens one SaslAuthenticate request at a time until the exchange ends. A
failed step is answered with SASL_AUTHENTICATION_FAILED and its message, after which the
broker closes the connection.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import wire_field
from spark_replica.wire.schema import Tabled, tabled


@tabled(wire_field("mechanism", "string"))
@dataclass(slots=True)
class SaslHandshakeRequest(Tabled):
    API_KEY = ApiKey.SASL_HANDSHAKE
    mechanism: str


@tabled(wire_field("mechanisms", "[]string"))
@dataclass(slots=True)
class SaslHandshakeResponse(Tabled):
    mechanisms: list[str]


@tabled(wire_field("auth_bytes", "bytes", empty_if_null=True))
@dataclass(slots=True)
class SaslAuthenticateRequest(Tabled):
    API_KEY = ApiKey.SASL_AUTHENTICATE
    auth_bytes: bytes


@tabled(wire_field("auth_bytes", "bytes", empty_if_null=True))
@dataclass(slots=True)
class SaslAuthenticateResponse(Tabled):
    auth_bytes: bytes
