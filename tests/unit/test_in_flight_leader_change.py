"""A retry waiting after a stale-leader error goes as soon as another leader shows.

The rule behind a producer following a crashed leader (in_flight.py's on_leader): the
backoff spares the broker that failed, so metadata naming another leader, or the same
broker re-elected with a newer epoch, makes the retry due at once; the same leader, no
leader, or a retry that waits for any other reason changes nothing.
"""

from __future__ import annotations

from spark_replica.client.in_flight import PartitionWindow, WindowBatch
from spark_replica.client.retry import RetryPolicy
from spark_replica.errors import ConnectionLostError, NotEnoughReplicasError

OLD_LEADER = (3, 0)


def waiting_after(error: Exception) -> tuple[PartitionWindow[str], WindowBatch[str]]:
    """A window whose one batch went to OLD_LEADER twice and now waits its backoff (1 s or more)."""
    w: PartitionWindow[str] = PartitionWindow(
        idempotent=True, max_in_flight=5, policy=RetryPolicy(1.0, 10.0)
    )
    batch = WindowBatch("b", 1, deadline=100.0)
    w.start(batch)
    batch.leader = OLD_LEADER
    assert w.on_error(batch, error, now=0.0) == []
    w.resend(batch)
    assert w.on_error(batch, error, now=0.0, sent=False) == []
    assert w.due_retry(0.5) is None
    return w, batch


def test_a_new_leader_makes_the_waiting_retry_due_at_once() -> None:
    w, batch = waiting_after(ConnectionLostError("refused"))
    assert w.awaits_leader(0.05)
    assert not w.on_leader(OLD_LEADER, 0.05), "the metadata still names the dead leader"
    assert w.due_retry(0.05) is None
    assert w.on_leader((1, 1), 0.1)
    assert w.due_retry(0.1) is batch
    assert not w.awaits_leader(0.1)


def test_the_same_broker_elected_again_counts_as_a_new_leader() -> None:
    w, batch = waiting_after(ConnectionLostError("refused"))
    assert w.on_leader((3, 1), 0.1)
    assert w.due_retry(0.1) is batch


def test_no_leader_changes_nothing() -> None:
    w, _ = waiting_after(ConnectionLostError("refused"))
    assert not w.on_leader((-1, 1), 0.1)
    assert w.due_retry(0.1) is None


def test_a_retry_waiting_for_another_reason_keeps_its_backoff() -> None:
    w, _ = waiting_after(NotEnoughReplicasError("ISR too small"))
    assert not w.awaits_leader(0.05)
    assert not w.on_leader((1, 1), 0.1)
    assert w.due_retry(0.1) is None
