"""A panel's freshness: live after a read, stale from the first failed read (with the
reason and a count of failures), stale when no read has answered for too long, and live
again after the next good read."""

from __future__ import annotations

from spark_replica.tools.console.freshness import NOT_READ_YET, Freshness

MAX_AGE_MS = 5_000


def test_never_read_is_stale() -> None:
    shown = Freshness().as_json(1_000, MAX_AGE_MS)
    assert shown["stale"] is True
    assert shown["stale_reason"] == NOT_READ_YET
    assert shown["read_ms"] is None


def test_a_good_read_is_live_until_it_ages() -> None:
    freshness = Freshness()
    freshness.succeeded(10_000)
    assert freshness.as_json(14_000, MAX_AGE_MS) == {
        "read_ms": 10_000,
        "stale": False,
        "stale_since_ms": None,
        "stale_reason": None,
        "stale_detail": None,
        "failures": 0,
    }
    aged = freshness.as_json(16_000, MAX_AGE_MS)
    assert (aged["stale"], aged["stale_since_ms"]) == (True, 15_000)
    assert aged["stale_reason"] == "no answer for over 5 s"


def test_failures_keep_the_first_time_and_the_last_reason() -> None:
    freshness = Freshness()
    freshness.succeeded(10_000)
    freshness.failed(11_000, "ZooKeeper unreachable", "ZooKeeper: ConnectionLoss")
    freshness.failed(12_000, "ZooKeeper unreachable", "no answer in 5 s")
    shown = freshness.as_json(12_500, MAX_AGE_MS)
    assert shown == {
        "read_ms": 10_000,
        "stale": True,
        "stale_since_ms": 11_000,
        "stale_reason": "ZooKeeper unreachable",
        "stale_detail": "no answer in 5 s",
        "failures": 2,
    }


def test_a_good_read_after_failures_is_live_again() -> None:
    freshness = Freshness()
    freshness.failed(1_000, "brokers unreachable")
    freshness.succeeded(2_000)
    shown = freshness.as_json(2_100, MAX_AGE_MS)
    assert (shown["stale"], shown["failures"], shown["stale_reason"]) == (False, 0, None)
