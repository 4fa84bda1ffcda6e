"""The connection-state table with plain values: which api keys and versions each phase
decodes, refuses or answers as unsupported."""

from __future__ import annotations

import pytest

from brokerd.serving.connection_state import (
    LOGIN_APIS,
    Admission,
    Phase,
    PhaseLimits,
    admission,
    admits,
    phase_of,
)

# api key -> (lowest, highest): a registry's versions
SERVED = {0: (0, 9), 18: (0, 3), 17: (0, 1), 36: (0, 2)}


def test_a_connection_whose_answer_ends_it_is_closing_whatever_else_holds() -> None:
    for plaintext_on_tls in (False, True):
        for logged_in in (False, True):
            assert phase_of(plaintext_on_tls, True, logged_in, closing=True) is Phase.CLOSING
    assert not any(admits(Phase.CLOSING, key) for key in range(-1, 100))


@pytest.mark.parametrize(
    ("phase", "key", "version", "verdict"),
    [
        (Phase.SERVING, 0, 9, Admission.DECODE),
        (Phase.SERVING, 0, 10, Admission.UNSUPPORTED),
        (Phase.SERVING, 0, -1, Admission.UNSUPPORTED),
        (Phase.SERVING, 1, 0, Admission.UNSUPPORTED),
        (Phase.SERVING, 18, 3, Admission.DECODE),
        (Phase.BEFORE_LOGIN, 18, 3, Admission.DECODE),
        (Phase.BEFORE_LOGIN, 18, 4, Admission.UNSUPPORTED),
        (Phase.BEFORE_LOGIN, 36, 2, Admission.DECODE),
        (Phase.BEFORE_LOGIN, 0, 0, Admission.REFUSE),
        (Phase.BEFORE_LOGIN, 1, 99, Admission.REFUSE),
        (Phase.TLS_REQUIRED, 18, 0, Admission.REFUSE),
        (Phase.CLOSING, 0, 0, Admission.REFUSE),
        (Phase.CLOSING, 18, 0, Admission.REFUSE),
    ],
)
def test_admission_checks_the_phase_first_then_the_versions_served(
    phase: Phase, key: int, version: int, verdict: Admission
) -> None:
    assert admission(phase, key, version, SERVED) is verdict


def test_before_login_a_served_login_api_is_decoded_at_every_version_served() -> None:
    decoded = {
        (key, version)
        for key in range(-1, 100)
        for version in range(-1, 12)
        if admission(Phase.BEFORE_LOGIN, key, version, SERVED) is Admission.DECODE
    }
    assert decoded == {
        (key, version)
        for key, (low, high) in SERVED.items()
        if key in LOGIN_APIS
        for version in range(low, high + 1)
    }


def test_a_closing_connection_has_no_login_deadline_and_the_small_frame_limit() -> None:
    limits = PhaseLimits(100 << 20, 524_288, 10_000)
    assert limits.login_deadline_s(Phase.CLOSING, accepted_s=5.0) is None
    assert limits.frame_bytes(Phase.CLOSING) == 524_288
