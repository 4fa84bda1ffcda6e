"""Who is on the other end of a connection: the SASL exchange and the principal.

Each connection of a SASL listener starts unauthenticated: until its exchange succeeds
it may only ask for ApiVersions, SaslHandshake and SaslAuthenticate, and any other
request is answered ILLEGAL_SASL_STATE and the connection closed. A failed exchange is
answered SASL_AUTHENTICATION_FAILED, with the same message whether the user is unknown
or the password wrong, and the connection closed after a delay that grows with the
recent failures from the same address (connection.failed.authentication.delay.ms per
failure, at most MAX_FAILURE_DELAY_S), so that guessing passwords is slow.

The principal is `User:NAME` after SASL, `User:<CN>` of a TLS client certificate on an
SSL listener, and `User:ANONYMOUS` otherwise (as Kafka names them).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from typing import Any

from brokerd.security_config import PLAIN, BrokerSecurity
from spark_replica.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from spark_replica.protocol.apis import ApiKey
from spark_replica.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from spark_replica.security.scram import (
    ScramCredential,
    ScramServer,
    parse_plain,
    verify_password_or_decoy,
)

ANONYMOUS = "User:ANONYMOUS"
# What an unauthenticated connection of a SASL listener may ask.
BEFORE_LOGIN = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
MAX_FAILURE_DELAY_S = 5.0
FAILURE_WINDOW_S = 60.0

# (username, mechanism) -> the stored credential, or None: ZooKeeper I/O, done by the
# caller's thread pool.
CredentialLookup = Callable[[str, str], Awaitable[ScramCredential | None]]


def principal_of_certificate(peercert: dict[str, Any] | None) -> str:
    """`User:<CN>` of a verified client certificate; ANONYMOUS without one."""
    if not peercert:
        return ANONYMOUS
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return f"User:{value}"
    return ANONYMOUS


class FailedLogins:
    """Recent authentication failures per address, for the delay before closing."""

    def __init__(self, delay_per_failure_s: float) -> None:
        self.delay_per_failure_s = delay_per_failure_s
        self._failures: dict[str, collections.deque[float]] = {}

    def record(self, ip: str, now: float) -> float:
        """Count a failure from `ip`; return how long to wait before closing."""
        recent = self._failures.setdefault(ip, collections.deque())
        while recent and recent[0] < now - FAILURE_WINDOW_S:
            recent.popleft()
        recent.append(now)
        if len(self._failures) > 10_000:  # bounded: forget the quietest addresses
            for stale in [k for k, v in self._failures.items() if v[-1] < now - FAILURE_WINDOW_S]:
                del self._failures[stale]
        return min(self.delay_per_failure_s * len(recent), MAX_FAILURE_DELAY_S)


class SaslSession:
    """One connection's SASL state: handshake, then the mechanism's exchange."""

    def __init__(self, security: BrokerSecurity, lookup: CredentialLookup) -> None:
        self.security = security
        self.lookup = lookup
        self.principal: str | None = None
        self._mechanism: str | None = None
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    async def handle(self, api_key: ApiKey, request: Any) -> Any:
        """Answer a SASL request; raise the typed error that refuses it. After any error
        the server closes the connection."""
        if self.authenticated:
            raise IllegalSaslStateError("this connection is already authenticated")
        if api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(request)
        assert isinstance(request, SaslAuthenticateRequest)
        if self._mechanism is None:
            raise IllegalSaslStateError("SaslAuthenticate before SaslHandshake")
        if self._mechanism == PLAIN:
            return await self._plain(request.auth_bytes)
        return await self._scram_step(request.auth_bytes)

    def _handshake(self, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
        if self._mechanism is not None:
            raise IllegalSaslStateError("SaslHandshake sent twice")
        enabled = list(self.security.enabled_mechanisms)
        if request.mechanism not in enabled:
            raise UnsupportedSaslMechanismError(
                f"SASL mechanism {request.mechanism!r} is not enabled on this listener "
                f"(enabled: {', '.join(enabled)})"
            )
        self._mechanism = request.mechanism
        return SaslHandshakeResponse(enabled)

    async def _plain(self, token: bytes) -> SaslAuthenticateResponse:
        username, password = parse_plain(token)
        # PLAIN is checked against the user's SCRAM credential: one store of salted
        # secrets serves both mechanisms, and no password is kept in the clear. An
        # unknown user costs the same hashing, so timing does not tell who exists.
        credential = None
        for mechanism in self.security.enabled_mechanisms:
            if mechanism != PLAIN and credential is None:
                credential = await self.lookup(username, mechanism)
        if verify_password_or_decoy(credential, password):
            self.principal = f"User:{username}"
            return SaslAuthenticateResponse(b"")
        raise SaslAuthenticationFailedError("invalid user name or password")

    async def _scram_step(self, token: bytes) -> SaslAuthenticateResponse:
        assert self._mechanism is not None
        if self._scram is None:
            self._scram = ScramServer(self._mechanism)
            username = self._scram.receive_client_first(token)
            credential = await self.lookup(username, self._mechanism)
            return SaslAuthenticateResponse(self._scram.server_first(credential))
        final = self._scram.receive_client_final(token)
        assert self._scram.username is not None
        self.principal = f"User:{self._scram.username}"
        return SaslAuthenticateResponse(final)
