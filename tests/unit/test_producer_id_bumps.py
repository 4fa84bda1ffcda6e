"""KIP-360's rule for InitProducerId with an existing identity (brokerd/producer_ids.py):
the epoch is bumped only when the one named is the id's current epoch; anything else
gets a new id, so a stale or foreign identity fences nobody."""

from __future__ import annotations

from brokerd.core.producer_ids import MAX_PRODUCER_EPOCH, next_identity
from spark_replica.wire.native.init_producer_id import NO_PRODUCER_ID

NEW_ID = (NO_PRODUCER_ID, 0)


def test_the_current_epoch_is_bumped() -> None:
    assert next_identity(7, 0, 0) == (7, 1)
    assert next_identity(7, 41, 41) == (7, 42)


def test_a_stale_future_or_unknown_epoch_gets_a_new_id() -> None:
    assert next_identity(7, 0, 1) == NEW_ID, "an epoch already bumped past"
    assert next_identity(7, 5, 1) == NEW_ID, "an epoch never handed out"
    assert next_identity(7, 0, None) == NEW_ID, "an id whose current epoch is not known"


def test_an_epoch_that_cannot_grow_gets_a_new_id() -> None:
    assert next_identity(7, MAX_PRODUCER_EPOCH, MAX_PRODUCER_EPOCH) == NEW_ID
    assert next_identity(7, MAX_PRODUCER_EPOCH - 1, MAX_PRODUCER_EPOCH - 1) == (
        7,
        MAX_PRODUCER_EPOCH,
    )
