"""The transactional chaos checker with hand-made histories: each broken promise is
counted, a clean history counts nothing."""

from __future__ import annotations

from tests.chaos.transaction_checker import (
    Outcome,
    Read,
    Transaction,
    TransactionCounts,
    check_transactions,
)

COMMITTED = Transaction((b"c1", b"c2"), Outcome.COMMITTED, commit_asked_at=10.0)
ABORTED = Transaction((b"a1", b"a2"), Outcome.ABORTED)
UNKNOWN = Transaction((b"u1", b"u2"), Outcome.UNKNOWN)


def test_a_clean_history_counts_nothing() -> None:
    reads = [Read(b"c1", 11.0), Read(b"c2", 11.5)]
    counts = check_transactions([COMMITTED, ABORTED], reads, [b"c1", b"c2"])
    assert counts == TransactionCounts()
    assert counts.clean


def test_a_committed_record_missing_from_the_final_read_is_lost() -> None:
    assert check_transactions([COMMITTED], [], [b"c1"]) == TransactionCounts(lost=1)


def test_each_extra_copy_of_a_committed_record_is_a_duplicate() -> None:
    final = [b"c1", b"c2", b"c2", b"c2"]
    assert check_transactions([COMMITTED], [], final) == TransactionCounts(duplicated=2)


def test_aborted_records_read_during_the_run_or_at_the_end_are_seen_aborted() -> None:
    reads = [Read(b"a1", 1.0)]
    counts = check_transactions([ABORTED], reads, [b"a2"])
    assert counts == TransactionCounts(aborted_seen=2)


def test_a_record_read_before_its_commit_was_asked_is_uncommitted_seen() -> None:
    reads = [Read(b"c1", 9.0), Read(b"c2", 10.5)]
    counts = check_transactions([COMMITTED], reads, [b"c1", b"c2"])
    assert counts == TransactionCounts(uncommitted_seen=1)


def test_an_unanswered_transaction_is_judged_by_the_final_read() -> None:
    whole = check_transactions([UNKNOWN], [Read(b"u1", 1.0)], [b"u1", b"u2"])
    assert whole == TransactionCounts()
    absent = check_transactions([UNKNOWN], [Read(b"u1", 1.0)], [])
    assert absent == TransactionCounts(uncommitted_seen=1)
    assert check_transactions([UNKNOWN], [], []) == TransactionCounts()


def test_records_of_no_transaction_are_not_judged_here() -> None:
    counts = check_transactions([COMMITTED], [Read(b"plain", 0.0)], [b"c1", b"c2", b"plain"])
    assert counts == TransactionCounts()


def test_counts_add_up() -> None:
    total = TransactionCounts(lost=1, aborted_seen=2) + TransactionCounts(lost=3, duplicated=1)
    assert total == TransactionCounts(lost=4, duplicated=1, aborted_seen=2)
    assert not total.clean
