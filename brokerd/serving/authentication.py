"""Who is on the other end of a connection: the SASL exchange and the principal.

Each connection of a SASL listener starts unauthenticated: until its exchange succeeds
it may only ask for ApiVersions, SaslHandshake and SaslAuthenticate (the table is
brokerd/serving/connection_state.py). A failed exchange is answered SASL_AUTHENTICATION_FAILED, with
the same message whether the user is unknown or the password wrong, and the connection
closed after a delay that grows with the recent failures from the same address
(connection.failed.authentication.delay.ms per failure, at most MAX_FAILURE_DELAY_S), so
that guessing passwords is slow.

An unknown user costs what a known one does: one read of the user's znode, and a fake
credential from the cluster's key (spark_replica.security.scram.fake_credential) where
the user's own would be, so the exchange takes the same steps and the same hashing.
SASL/PLAIN's PBKDF2 runs on a worker thread, a bounded number at a time (`HashingRunner`,
given by the server), never on the event loop.

The principal is `User:NAME` after SASL, `User:<CN>` of a TLS client certificate on an
SSL listener, and `User:ANONYMOUS` otherwise (as Kafka names them).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from brokerd.config.security import PLAIN, BrokerSecurity
from spark_replica.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from spark_replica.security.scram import (
    ScramCredential,
    ScramServer,
    fake_credential,
    parse_plain,
    plain_credential,
    verify_password,
)
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

ANONYMOUS = "User:ANONYMOUS"
MAX_FAILURE_DELAY_S = 5.0
FAILURE_WINDOW_S = 60.0


@dataclass(frozen=True)
class StoredUser:
    """What a login learns from the store about a name: its SCRAM credentials by
    mechanism (none for an unknown user) and the cluster's fake-credential key."""

    credentials: Mapping[str, ScramCredential]
    fake_key: bytes


# username -> StoredUser: ZooKeeper I/O, done off the event loop by the caller.
CredentialLookup = Callable[[str], Awaitable[StoredUser]]
# Runs CPU-heavy work (PBKDF2) on a worker thread, a bounded number at a time.
HashingRunner = Callable[[Callable[[], bool]], Awaitable[bool]]


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

    def __init__(
        self, security: BrokerSecurity, lookup: CredentialLookup, run_hashing: HashingRunner
    ) -> None:
        self.security = security
        self.lookup = lookup
        self.run_hashing = run_hashing
        self.principal: str | None = None
        self._mechanism: str | None = None
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    async def handle(self, api_key: ApiKey, request: Any) -> Any:
        """Answer a SASL request of the replog listener (its request types); raise the
        typed error that refuses it. After any error the server closes the connection."""
        if api_key == ApiKey.SASL_HANDSHAKE:
            assert isinstance(request, SaslHandshakeRequest)
            return SaslHandshakeResponse(await self.handshake(request.mechanism))
        assert isinstance(request, SaslAuthenticateRequest)
        return SaslAuthenticateResponse(await self.authenticate(request.auth_bytes))

    async def handshake(self, mechanism: str) -> list[str]:
        """Choose the mechanism; the listener's enabled mechanisms, or the typed error."""
        if self.authenticated:
            raise IllegalSaslStateError("this connection is already authenticated")
        if self._mechanism is not None:
            raise IllegalSaslStateError("SaslHandshake sent twice")
        enabled = list(self.security.enabled_mechanisms)
        if mechanism not in enabled:
            raise UnsupportedSaslMechanismError(
                f"SASL mechanism {mechanism!r} is not enabled on this listener "
                f"(enabled: {', '.join(enabled)})"
            )
        self._mechanism = mechanism
        return enabled

    async def authenticate(self, token: bytes) -> bytes:
        """One step of the chosen mechanism's exchange: the server's token, or the typed
        error."""
        if self.authenticated:
            raise IllegalSaslStateError("this connection is already authenticated")
        if self._mechanism is None:
            raise IllegalSaslStateError("SaslAuthenticate before SaslHandshake")
        if self._mechanism == PLAIN:
            return await self._plain(token)
        return await self._scram_step(token)

    async def _plain(self, token: bytes) -> bytes:
        username, password = parse_plain(token)
        # PLAIN is checked against the user's SCRAM credential, whichever mechanisms the
        # listener enables: one store of salted secrets serves both, and no password is
        # kept in the clear. An unknown user costs the same read and the same hashing.
        stored = await self.lookup(username)
        credential, exists = plain_credential(stored.credentials, stored.fake_key, username)
        matches = await self.run_hashing(lambda: verify_password(credential, password))
        if matches and exists:
            self.principal = f"User:{username}"
            return b""
        raise SaslAuthenticationFailedError("invalid user name or password")

    async def _scram_step(self, token: bytes) -> bytes:
        assert self._mechanism is not None
        if self._scram is None:
            self._scram = ScramServer(self._mechanism)
            username = self._scram.receive_client_first(token)
            stored = await self.lookup(username)
            credential = stored.credentials.get(self._mechanism)
            exists = credential is not None
            if credential is None:
                credential = fake_credential(stored.fake_key, self._mechanism, username)
            return self._scram.server_first(credential, exists=exists)
        final = self._scram.receive_client_final(token)
        assert self._scram.username is not None
        self.principal = f"User:{self._scram.username}"
        return final
