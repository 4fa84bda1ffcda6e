"""The client's side of SASL: the handshake and one mechanism's exchange on a fresh
connection, before any other request is sent on it.

Kept apart from BrokerConnection so that the connection stays about frames and
correlation ids; this module only knows the order of the steps.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from spark_replica.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from spark_replica.security.scram import MECHANISMS, ScramClient, plain_message
from spark_replica.wire.native.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
)

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig

Send = Callable[[Any], Awaitable[Any]]


async def sasl_login(send: Send, security: SecurityConfig, address: str) -> None:
    """Authenticate with `security`'s mechanism and credentials; raise a typed
    AuthenticationError naming the broker when the broker refuses."""
    mechanism = security.sasl_mechanism
    try:
        await send(SaslHandshakeRequest(mechanism))
    except UnsupportedSaslMechanismError as exc:
        raise UnsupportedSaslMechanismError(f"broker {address}: {exc}") from None
    username, password = security.username or "", security.password or ""
    try:
        if mechanism == "PLAIN":
            await send(SaslAuthenticateRequest(plain_message(username, password)))
            return
        if mechanism not in MECHANISMS:
            raise UnsupportedSaslMechanismError(f"SASL mechanism {mechanism} is not supported")
        client = ScramClient(mechanism, username, password)
        first: SaslAuthenticateResponse = await send(
            SaslAuthenticateRequest(client.first_message())
        )
        final: SaslAuthenticateResponse = await send(
            SaslAuthenticateRequest(client.final_message(first.auth_bytes))
        )
        client.verify_server_final(final.auth_bytes)
    except SaslAuthenticationFailedError as exc:
        raise SaslAuthenticationFailedError(
            f"authentication as {username!r} ({mechanism}) with broker {address} failed: {exc}"
        ) from None
