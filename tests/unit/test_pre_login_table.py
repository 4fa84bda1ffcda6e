"""The pre-login table: what each phase decodes, how large a frame it reads, and when a
connection that has not logged in is closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.serving.connection_limits import ConnectionLimits, reap_reason
from brokerd.serving.connection_state import LOGIN_APIS, Phase, PhaseLimits, admits, phase_of
from spark_replica.wire.native.apis import ApiKey

LIMITS = PhaseLimits(
    max_frame_bytes=100 << 20, max_receive_before_login=524_288, login_timeout_ms=10_000
)


@pytest.mark.parametrize(
    ("plaintext_on_tls", "uses_sasl", "logged_in", "phase"),
    [
        (True, True, False, Phase.TLS_REQUIRED),
        (True, False, False, Phase.TLS_REQUIRED),
        (False, True, False, Phase.BEFORE_LOGIN),
        (False, True, True, Phase.SERVING),
        (False, False, False, Phase.SERVING),
    ],
)
def test_the_phase_of_a_connection(
    plaintext_on_tls: bool, uses_sasl: bool, logged_in: bool, phase: Phase
) -> None:
    assert phase_of(plaintext_on_tls, uses_sasl, logged_in) is phase


def test_before_login_only_the_login_apis_are_decoded() -> None:
    assert {key for key in range(-1, 100) if admits(Phase.BEFORE_LOGIN, key)} == set(LOGIN_APIS)
    assert {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} == LOGIN_APIS
    assert not any(admits(Phase.TLS_REQUIRED, key) for key in range(-1, 100))
    assert all(admits(Phase.SERVING, key) for key in range(-1, 100))


def test_frames_before_login_are_capped_and_so_is_their_share_of_the_budget() -> None:
    assert LIMITS.frame_bytes(Phase.BEFORE_LOGIN) == 524_288
    assert LIMITS.frame_bytes(Phase.TLS_REQUIRED) == 524_288
    assert LIMITS.frame_bytes(Phase.SERVING) == 100 << 20
    small = PhaseLimits(1000, 524_288, 10_000)
    assert small.frame_bytes(Phase.BEFORE_LOGIN) == 1000


def test_a_connection_not_logged_in_by_its_deadline_is_closed_whatever_it_does() -> None:
    limits = ConnectionLimits(10, 10, 600_000, 30_000, 10_000)
    deadline = LIMITS.login_deadline_s(Phase.BEFORE_LOGIN, accepted_s=100.0)
    assert deadline == 110.0
    assert LIMITS.login_deadline_s(Phase.SERVING, accepted_s=100.0) is None
    assert reap_reason(limits, 109.0, 109.0, None, busy=False, login_deadline_s=deadline) is None
    for receiving, busy in [(None, False), (109.5, False), (None, True)]:
        reason = reap_reason(limits, 110.5, 110.4, receiving, busy, login_deadline_s=deadline)
        assert reason is not None and "sasl.server.authentication.timeout.ms=10000" in reason
    assert limits.sweep_interval_s == 1.0
    assert ConnectionLimits(10, 10, 600_000, 30_000, 2_000).sweep_interval_s == 0.5


def test_the_pre_login_configs_take_kafkas_name_and_replogs_own() -> None:
    config = BrokerConfig(1, Path("logs"), "h:1")
    assert (config.sasl_server_max_receive_size, config.sasl_server_authentication_timeout_ms) == (
        524_288,
        10_000,
    )
    config = config.with_overrides(
        {"sasl.server.max.receive.size": "1000", "sasl.server.authentication.timeout.ms": "500"}
    )
    assert (config.sasl_server_max_receive_size, config.sasl_server_authentication_timeout_ms) == (
        1000,
        500,
    )
