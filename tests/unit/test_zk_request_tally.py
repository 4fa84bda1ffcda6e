"""Round trips as the controller counts them: the requests sent between two waits for
an answer share one, however fast the answers come."""

from __future__ import annotations

from brokerd.controller.zk_requests import RequestTally, counting


def test_requests_waited_for_one_by_one_are_a_round_trip_each() -> None:
    tally = RequestTally()
    for _ in range(3):
        tally.sent()
        tally.waited()
    assert (tally.requests, tally.round_trips) == (3, 3)


def test_requests_sent_before_any_wait_share_one_round_trip() -> None:
    tally = RequestTally()
    for _ in range(1000):
        tally.sent()
    for _ in range(1000):
        tally.waited()
    assert (tally.requests, tally.round_trips) == (1000, 1)


def test_a_request_after_a_wait_starts_a_new_round_trip() -> None:
    tally = RequestTally()
    tally.sent()
    tally.sent()
    tally.waited()
    tally.sent()
    tally.sent()
    assert (tally.requests, tally.round_trips) == (4, 2)


def test_counting_tallies_are_separate_and_fresh() -> None:
    with counting() as outer:
        with counting() as inner:
            assert inner is not outer
        assert (inner.requests, outer.requests) == (0, 0)
