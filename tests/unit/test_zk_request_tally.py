"""Round trips as the controller counts them: requests in flight together share one."""

from __future__ import annotations

from dataclasses import dataclass

from brokerd.controller.zk_requests import RequestTally, counting


@dataclass
class Answer:
    answered: bool = False

    def ready(self) -> bool:
        return self.answered


def test_requests_waited_for_one_by_one_are_a_round_trip_each() -> None:
    tally = RequestTally()
    for _ in range(3):
        answer = Answer()
        tally.sent(answer)
        answer.answered = True
    assert (tally.requests, tally.round_trips) == (3, 3)


def test_requests_sent_before_any_answer_share_one_round_trip() -> None:
    tally = RequestTally()
    answers = [Answer() for _ in range(1000)]
    for answer in answers:
        tally.sent(answer)
    assert (tally.requests, tally.round_trips) == (1000, 1)


def test_a_request_sent_while_some_are_pending_joins_their_round_trip() -> None:
    tally = RequestTally()
    first, second = Answer(), Answer()
    tally.sent(first)
    tally.sent(second)
    first.answered = True
    tally.sent(Answer())
    assert tally.round_trips == 1
    second.answered = True
    tally.sent(Answer())  # the third is still pending
    assert tally.round_trips == 1


def test_a_request_after_every_answer_starts_a_new_round_trip() -> None:
    tally = RequestTally()
    answers = [Answer(), Answer()]
    for answer in answers:
        tally.sent(answer)
    for answer in answers:
        answer.answered = True
    tally.sent(Answer())
    assert (tally.requests, tally.round_trips) == (3, 2)


def test_counting_tallies_are_separate_and_fresh() -> None:
    with counting() as outer:
        with counting() as inner:
            assert inner is not outer
        assert (inner.requests, outer.requests) == (0, 0)
