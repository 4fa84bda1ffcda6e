"""The broker's side of login without a broker: the SASL session's order of steps,
what an unknown user costs, PLAIN alone, principals from certificates, and the delays
after failed logins."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import pytest

from brokerd.config.security import BrokerSecurity
from brokerd.serving.authentication import (
    ANONYMOUS,
    MAX_FAILURE_DELAY_S,
    FailedLogins,
    SaslSession,
    StoredUser,
    principal_of_certificate,
)
from spark_replica.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from spark_replica.security.scram import ScramClient, make_credential, plain_message
from spark_replica.wire.native import ApiKey
from spark_replica.wire.native.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

MECHANISM = "SCRAM-SHA-256"
STORED = {"alice": {MECHANISM: make_credential(MECHANISM, "pw")}}
KEY = b"cluster-key-" * 3


class Store:
    """The store as a session sees it: each lookup counted, hashing run inline."""

    def __init__(self) -> None:
        self.lookups: list[str] = []
        self.hashed = 0

    async def lookup(self, username: str) -> StoredUser:
        self.lookups.append(username)
        return StoredUser(STORED.get(username, {}), KEY)

    async def run_hashing(self, work: Callable[[], bool]) -> bool:
        self.hashed += 1
        return work()


def _session(store: Store | None = None, security: BrokerSecurity | None = None) -> SaslSession:
    store = Store() if store is None else store
    return SaslSession(security or BrokerSecurity(), store.lookup, store.run_hashing)


async def _login(session: SaslSession, username: str, password: str) -> None:
    await session.handle(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(MECHANISM))
    client = ScramClient(MECHANISM, username, password)
    first = await session.handle(
        ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(client.first_message())
    )
    final = await session.handle(
        ApiKey.SASL_AUTHENTICATE,
        SaslAuthenticateRequest(client.final_message(first.auth_bytes)),
    )
    client.verify_server_final(final.auth_bytes)


def test_a_scram_login_names_the_principal() -> None:
    session = _session()
    asyncio.run(_login(session, "alice", "pw"))
    assert session.principal == "User:alice"


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "pw")])
def test_wrong_password_and_unknown_user_fail_alike(user: str, password: str) -> None:
    session = _session()
    with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
        asyncio.run(_login(session, user, password))
    assert not session.authenticated


def test_steps_out_of_order_are_refused() -> None:
    session = _session()
    with pytest.raises(IllegalSaslStateError):
        asyncio.run(session.handle(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(b"x")))
    with pytest.raises(UnsupportedSaslMechanismError, match="GSSAPI"):
        asyncio.run(session.handle(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest("GSSAPI")))
    asyncio.run(_login(session, "alice", "pw"))
    with pytest.raises(IllegalSaslStateError, match="already"):
        asyncio.run(session.handle(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(MECHANISM)))


@pytest.mark.parametrize(("user", "password"), [("alice", "pw"), ("alice", "no"), ("ghost", "pw")])
def test_plain_alone_reads_once_and_hashes_once_for_any_user(user: str, password: str) -> None:
    security = replace(BrokerSecurity(), enabled_mechanisms=("PLAIN",))
    store = Store()
    session = _session(store, security)

    async def login() -> None:
        await session.handle(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest("PLAIN"))
        await session.handle(
            ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(plain_message(user, password))
        )

    if password == "pw" and user == "alice":
        asyncio.run(login())
        assert session.principal == "User:alice"
    else:
        with pytest.raises(SaslAuthenticationFailedError, match="invalid user name or password"):
            asyncio.run(login())
    assert (store.lookups, store.hashed) == ([user], 1)


@pytest.mark.parametrize("user", ["alice", "ghost"])
def test_a_scram_login_reads_the_store_once_for_any_user(user: str) -> None:
    store = Store()
    with pytest.raises(SaslAuthenticationFailedError):
        asyncio.run(_login(_session(store), user, "wrong"))
    assert store.lookups == [user]


def test_failed_logins_from_one_address_wait_longer_up_to_a_cap() -> None:
    failures = FailedLogins(0.1)
    delays = [failures.record("10.0.0.1", 1000.0 + n) for n in range(80)]
    assert delays[:3] == pytest.approx([0.1, 0.2, 0.3])
    assert max(delays) == MAX_FAILURE_DELAY_S
    assert failures.record("10.0.0.2", 1080.0) == pytest.approx(0.1)
    # A minute later the old failures no longer count.
    assert failures.record("10.0.0.1", 1200.0) == pytest.approx(0.1)


def test_the_principal_of_a_certificate_is_its_common_name() -> None:
    cert = {"subject": ((("organizationName", "replog"),), (("commonName", "broker"),))}
    assert principal_of_certificate(cert) == "User:broker"
    assert principal_of_certificate(None) == ANONYMOUS
    assert principal_of_certificate({}) == ANONYMOUS
