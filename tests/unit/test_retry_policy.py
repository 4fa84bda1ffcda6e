"""The client's one retry policy and its per-operation attempt counter, with plain values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_replica.client.retry import Attempts, RetryPolicy
from spark_replica.errors import (
    ConfigError,
    ConnectionLostError,
    FencedLeaderEpochError,
    InvalidRecordError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)

STALE_LEADER = [
    NotLeaderOrFollowerError("moved"),
    UnknownTopicOrPartitionError("not here"),
    FencedLeaderEpochError("old epoch"),
    ConnectionLostError("reset"),
]


@pytest.mark.parametrize("error", STALE_LEADER, ids=lambda e: type(e).__name__)
def test_first_retry_after_a_stale_leader_is_immediate(error: Exception) -> None:
    policy = RetryPolicy(backoff_s=0.1, max_backoff_s=1.0)
    assert policy.delay_s(1, error) == 0.0
    assert policy.delay_s(2, error) == pytest.approx(0.1)
    assert policy.delay_s(3, error) == pytest.approx(0.2)


def test_other_errors_wait_from_the_first_retry_doubling_up_to_the_cap() -> None:
    policy = RetryPolicy(backoff_s=0.1, max_backoff_s=1.0)
    error = NotEnoughReplicasError("isr too small")
    delays = [policy.delay_s(attempt, error) for attempt in range(1, 7)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert policy.delay_s(1, None) == pytest.approx(0.1)


def test_huge_attempt_numbers_stay_at_the_cap() -> None:
    policy = RetryPolicy(backoff_s=0.05, max_backoff_s=2.0)
    assert policy.delay_s(10_000, RequestTimedOutError("slow")) == 2.0


def test_retries_are_numbered_from_one() -> None:
    with pytest.raises(ValueError):
        RetryPolicy().delay_s(0, None)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="0 or more"):
        RetryPolicy(backoff_s=-0.1)
    with pytest.raises(ConfigError, match="maximum"):
        RetryPolicy(backoff_s=2.0, max_backoff_s=1.0)


def test_from_ms_keeps_the_maximum_at_least_the_backoff() -> None:
    assert RetryPolicy.from_ms(100) == RetryPolicy(0.1, 1.0)
    assert RetryPolicy.from_ms(2000) == RetryPolicy(2.0, 2.0)
    assert RetryPolicy.from_ms(50, 400) == RetryPolicy(0.05, 0.4)


def test_attempts_counts_only_the_retries_that_waited() -> None:
    attempts = Attempts(RetryPolicy(backoff_s=0.1, max_backoff_s=1.0), deadline=100.0)
    assert attempts.next_delay(NotLeaderOrFollowerError("moved"), now=0.0) == 0.0
    # A different kind of error next: it is the first retry that waits.
    assert attempts.next_delay(RequestTimedOutError("slow"), now=1.0) == pytest.approx(0.1)
    assert attempts.next_delay(NotLeaderOrFollowerError("moved"), now=2.0) == pytest.approx(0.2)


def test_attempts_wait_from_the_first_retry_when_it_was_not_a_stale_leader() -> None:
    attempts = Attempts(RetryPolicy(backoff_s=0.1, max_backoff_s=1.0), deadline=100.0)
    assert attempts.next_delay(RequestTimedOutError("slow"), now=0.0) == pytest.approx(0.1)
    assert attempts.next_delay(NotLeaderOrFollowerError("moved"), now=1.0) == pytest.approx(0.2)


def test_attempts_give_up_on_a_non_retriable_error_or_past_the_deadline() -> None:
    attempts = Attempts(RetryPolicy(), deadline=10.0)
    assert attempts.next_delay(InvalidRecordError("bad"), now=0.0) is None
    assert attempts.next_delay(RequestTimedOutError("slow"), now=10.0) is None
    assert isinstance(attempts.last_error, RequestTimedOutError)


def test_a_wait_past_the_deadline_is_shortened_to_it() -> None:
    attempts = Attempts(RetryPolicy(backoff_s=1.0, max_backoff_s=1.0), deadline=10.0)
    assert attempts.next_delay(RequestTimedOutError("slow"), now=9.75) == pytest.approx(0.25)


def test_success_starts_the_backoff_afresh() -> None:
    attempts = Attempts(RetryPolicy(backoff_s=0.1, max_backoff_s=1.0), deadline=100.0)
    for now in range(4):
        attempts.next_delay(RequestTimedOutError("slow"), now=float(now))
    attempts.succeeded()
    assert attempts.next_delay(NotLeaderOrFollowerError("moved"), now=5.0) == 0.0


@given(
    backoff=st.floats(0.0, 5.0),
    extra=st.floats(0.0, 10.0),
    attempt=st.integers(1, 200),
    stale=st.booleans(),
)
def test_delays_are_never_negative_nor_above_the_cap(
    backoff: float, extra: float, attempt: int, stale: bool
) -> None:
    policy = RetryPolicy(backoff, backoff + extra)
    error = NotLeaderOrFollowerError("x") if stale else RequestTimedOutError("x")
    delay = policy.delay_s(attempt, error)
    assert 0.0 <= delay <= policy.max_backoff_s
    assert delay <= policy.delay_s(attempt + 1, error)
