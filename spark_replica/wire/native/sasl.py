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
from spark_replica.wire.primitives import Reader, Writer


@dataclass(slots=True)
class SaslHandshakeRequest:
    API_KEY = ApiKey.SASL_HANDSHAKE
    mechanism: str

    def write(self, w: Writer) -> None:
        w.string(self.mechanism)

    @classmethod
    def read(cls, r: Reader) -> SaslHandshakeRequest:
        return cls(r.required_string())


@dataclass(slots=True)
class SaslHandshakeResponse:
    mechanisms: list[str]

    def write(self, w: Writer) -> None:
        w.array(self.mechanisms, w.string)

    @classmethod
    def read(cls, r: Reader) -> SaslHandshakeResponse:
        return cls(r.required_array(r.required_string))


@dataclass(slots=True)
class SaslAuthenticateRequest:
    API_KEY = ApiKey.SASL_AUTHENTICATE
    auth_bytes: bytes

    def write(self, w: Writer) -> None:
        w.bytes_(self.auth_bytes)

    @classmethod
    def read(cls, r: Reader) -> SaslAuthenticateRequest:
        return cls(bytes(r.records() or b""))


@dataclass(slots=True)
class SaslAuthenticateResponse:
    auth_bytes: bytes

    def write(self, w: Writer) -> None:
        w.bytes_(self.auth_bytes)

    @classmethod
    def read(cls, r: Reader) -> SaslAuthenticateResponse:
        return cls(bytes(r.records() or b""))
