"""The chaos checker with plain values: each anomaly is found, a clean history is clean."""

from __future__ import annotations

from tests.chaos.checker import UNKNOWN_OFFSET, Counts, Send, Stored, check


def stored(partition: int, offset: int, value: str, key: str = "k") -> Stored:
    return Stored(partition, offset, key.encode(), value.encode())


def acked(value: str, offset: int, partition: int = 0, key: str = "k") -> Send:
    return Send(key.encode(), value.encode(), partition, offset)


def failed(value: str, key: str = "k") -> Send:
    return Send(key.encode(), value.encode())


CLEAN_LOG = [stored(0, 0, "a"), stored(0, 1, "b"), stored(1, 0, "x", key="j")]
CLEAN_SENDS = [[acked("a", 0), acked("b", 1)], [acked("x", 0, partition=1, key="j")]]


def test_a_clean_history_counts_nothing() -> None:
    counts = check(CLEAN_SENDS, observed=CLEAN_LOG, final=CLEAN_LOG)
    assert counts == Counts()
    assert counts.clean


def test_an_acknowledged_record_missing_from_the_log_is_lost() -> None:
    counts = check(CLEAN_SENDS, observed=[], final=[stored(0, 0, "a"), stored(1, 0, "x", "j")])
    assert counts == Counts(lost=1)


def test_a_failed_send_may_be_stored_or_not() -> None:
    sends = [[acked("a", 0), failed("maybe"), acked("b", 2)]]
    with_it = [stored(0, 0, "a"), stored(0, 1, "maybe"), stored(0, 2, "b")]
    twice = [*with_it, stored(0, 3, "maybe")]
    assert check(sends, [], with_it) == Counts()
    assert check(sends, [], twice) == Counts()
    assert check([[acked("a", 0), failed("maybe")]], [], [stored(0, 0, "a")]) == Counts()


def test_an_acknowledged_record_stored_twice_is_one_duplicate_per_extra_copy() -> None:
    log = [stored(0, 0, "a"), stored(0, 1, "b"), stored(0, 2, "a"), stored(0, 3, "a")]
    assert check([[acked("a", 0), acked("b", 1)]], [], log) == Counts(duplicated=2)


def test_records_of_a_key_stored_out_of_send_order_are_reordered() -> None:
    sends = [[acked("a", 1), acked("b", 0), acked("c", 2)]]
    log = [stored(0, 0, "b"), stored(0, 1, "a"), stored(0, 2, "c")]
    assert check(sends, [], log) == Counts(reordered=1)


def test_order_is_per_key_and_ignores_failed_sends() -> None:
    sends = [
        [
            acked("k1-first", 1, key="k1"),
            acked("k2-first", 0, key="k2"),
            failed("k1-failed", key="k1"),
            acked("k1-second", 3, key="k1"),
        ]
    ]
    log = [
        stored(0, 0, "k2-first", "k2"),
        stored(0, 1, "k1-first", "k1"),
        stored(0, 2, "k1-failed", "k1"),
        stored(0, 3, "k1-second", "k1"),
    ]
    assert check(sends, [], log) == Counts()
    failed_lands_last = [
        stored(0, 0, "k2-first", "k2"),
        stored(0, 1, "k1-first", "k1"),
        stored(0, 3, "k1-second", "k1"),
        stored(0, 4, "k1-failed", "k1"),
    ]
    assert check(sends, [], failed_lands_last) == Counts()


def test_a_read_record_replaced_later_is_a_phantom_read() -> None:
    observed = [stored(0, 0, "a"), stored(0, 1, "seen-then-gone")]
    counts = check(CLEAN_SENDS, observed, CLEAN_LOG)
    assert counts == Counts(phantom_reads=1)


def test_a_read_record_past_the_final_end_is_a_phantom_read() -> None:
    observed = [stored(1, 0, "x", key="j"), stored(1, 1, "beyond-the-end", key="j")]
    assert check(CLEAN_SENDS, observed, CLEAN_LOG) == Counts(phantom_reads=1)


def test_an_acknowledged_record_at_another_offset_is_misplaced() -> None:
    log = [stored(0, 0, "b"), stored(0, 1, "a")]
    counts = check([[acked("b", 0), acked("a", 0)]], [], log)
    assert counts == Counts(misplaced=1)


def test_a_duplicate_answered_without_an_offset_is_not_misplaced() -> None:
    log = [stored(0, 0, "a")]
    assert check([[acked("a", UNKNOWN_OFFSET)]], [], log) == Counts()


def test_counts_add_up_across_schedules() -> None:
    assert Counts(lost=1, phantom_reads=2) + Counts(lost=3, misplaced=1) == Counts(
        lost=4, phantom_reads=2, misplaced=1
    )
    assert not Counts(reordered=1).clean
