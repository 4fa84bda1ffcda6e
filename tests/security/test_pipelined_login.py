"""A SASL login sent ahead of the requests that need it (issue 25): the broker handles a
connection's requests in arrival order, so the login's steps change what the connection
may do before the request behind them is looked at, and a failed login ends the
connection before that request is served. Raw frames over TLS to a real broker."""

from __future__ import annotations

import ssl

import pytest

from spark_replica.wire.native import ApiKey, MetadataRequest
from spark_replica.wire.native.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from tests.security.conftest import PASSWORDS, SecureSetup
from tests.support_wire import RawConnection, body_of

pytestmark = pytest.mark.slow


def _tls_connection(setup: SecureSetup, address: tuple[str, int]) -> RawConnection:
    context = ssl.create_default_context(cafile=str(setup.ca.cert))
    context.check_hostname = False
    conn = RawConnection(address, timeout_s=30)
    conn.sock = context.wrap_socket(conn.sock)
    return conn


@pytest.mark.parametrize("password", [PASSWORDS["alice"], "wrong"])
def test_a_login_sent_ahead_of_requests_is_served_in_order(
    secure: SecureSetup, password: str
) -> None:
    secure.start(1, **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"})
    broker = secure.brokers.brokers[1]
    with _tls_connection(secure, (broker.host, broker.port)) as conn:
        handshake = conn.send_frame(
            int(ApiKey.SASL_HANDSHAKE), body_of(SaslHandshakeRequest("PLAIN"))
        )
        token = b"\x00alice\x00" + password.encode()
        login = conn.send_frame(
            int(ApiKey.SASL_AUTHENTICATE), body_of(SaslAuthenticateRequest(token))
        )
        metadata = conn.send_frame(int(ApiKey.METADATA), body_of(MetadataRequest(None)))
        first = conn.read_answer()
        assert first.correlation_id == handshake and first.error_code == 0
        second = conn.read_answer()
        assert second.correlation_id == login
        if password == "wrong":
            assert second.error_code != 0
            conn.assert_closed()  # the request sent behind a failed login is never served
            return
        assert second.error_code == 0, second.error_message
        third = conn.read_answer()
        assert third.correlation_id == metadata and third.error_code == 0
