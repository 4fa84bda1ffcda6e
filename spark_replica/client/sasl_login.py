"""The client's side of SASL: the handshake and one mechanism's exchange on a fresh
connection, before any other request is sent on it.

Both dialects log in the same way and differ only in how the two requests look on the
wire, so this module holds the order of the steps and each connection supplies a
SaslExchange that sends them: BrokerConnection on the replog listener, KafkaConnection
on the Kafka listener.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from spark_replica.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from spark_replica.security.scram import MECHANISMS, ScramClient, plain_message

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig


class SaslExchange(Protocol):
    """The two SASL requests of one dialect, on one connection."""

    async def handshake(self, mechanism: str) -> None:
        """Ask for `mechanism`; raise UnsupportedSaslMechanismError if it is not enabled."""

    async def authenticate(self, auth_bytes: bytes) -> bytes:
        """Send one message of the exchange and return the broker's; raise
        SaslAuthenticationFailedError if the broker refuses."""


async def sasl_login(exchange: SaslExchange, security: SecurityConfig, address: str) -> None:
    """Authenticate with `security`'s mechanism and credentials; raise a typed
    AuthenticationError naming the broker when the broker refuses."""
    mechanism = security.sasl_mechanism
    try:
        await exchange.handshake(mechanism)
    except UnsupportedSaslMechanismError as exc:
        raise UnsupportedSaslMechanismError(f"broker {address}: {exc}") from None
    username, password = security.username or "", security.password or ""
    try:
        if mechanism == "PLAIN":
            await exchange.authenticate(plain_message(username, password))
            return
        if mechanism not in MECHANISMS:
            raise UnsupportedSaslMechanismError(f"SASL mechanism {mechanism} is not supported")
        client = ScramClient(mechanism, username, password)
        first = await exchange.authenticate(client.first_message())
        final = await exchange.authenticate(client.final_message(first))
        client.verify_server_final(final)
    except SaslAuthenticationFailedError as exc:
        raise SaslAuthenticationFailedError(
            f"authentication as {username!r} ({mechanism}) with broker {address} failed: {exc}"
        ) from None
