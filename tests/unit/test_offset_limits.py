"""Pure parts of the offsets' bounds: multi-op planning by encoded bytes, the group id and
metadata limits, and Kafka's expiry rules."""

from __future__ import annotations

import pytest

from brokerd.groups.offset_expiry import expired_offsets, subscribed_topics
from spark_replica.errors import InvalidGroupIdError
from spark_replica.topics import TopicPartition
from spark_replica.wire.primitives import Writer
from spark_replica.zk import group_store
from spark_replica.zk.group_store import (
    MAX_TRANSACTION_BYTES,
    CommittedOffset,
    fits_one_transaction,
    op_bytes,
    plan_chunks,
)

DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_chunks_stay_under_the_byte_bound_counting_checks() -> None:
    # 60 offsets of 4 KiB metadata JSON-escaped six-fold: about 24 KiB each.
    stored = CommittedOffset(1, metadata="\x01" * 4096).encode()
    assert len(stored) > 6 * 4096
    sizes = [("wide", op_bytes(f"/consumers/g/offsets/wide/{p}", stored)) for p in range(60)]
    fixed = op_bytes("/consumers/g/offsets")
    runs = plan_chunks(sizes, fixed)
    assert [i for run in runs for i in run] == list(range(60))
    assert len(runs) > 1
    for run in runs:
        total = fixed + op_bytes("/brokers/topics/wide") + sum(sizes[i][1] for i in run)
        assert total <= MAX_TRANSACTION_BYTES


def test_chunks_respect_the_operation_count_and_each_topic_check() -> None:
    runs = plan_chunks([("t", 1)] * 1001, 0, max_bytes=10**9, max_ops=500)
    assert [len(r) for r in runs] == [500, 500, 1]
    # Three topics of 100 bytes each and a check per topic: two topics fit 500 bytes.
    check = op_bytes("/brokers/topics/x")
    runs = plan_chunks([("x", 100), ("y", 100), ("z", 100)], 0, max_bytes=2 * (100 + check))
    assert [list(r) for r in runs] == [[0, 1], [2]]
    with pytest.raises(ValueError):
        plan_chunks([("x", 10**6)], 0)


def test_an_offset_that_cannot_fit_one_write_is_too_large() -> None:
    assert fits_one_transaction("g", A0, CommittedOffset(1, metadata="\x01" * 4096))
    assert not fits_one_transaction("g", A0, CommittedOffset(1, metadata="\x01" * 50_000))


def test_group_ids_are_bounded() -> None:
    group_store.check_group_id("g" * group_store.MAX_GROUP_ID_BYTES)
    for bad in ("", "g" * (group_store.MAX_GROUP_ID_BYTES + 1), "é" * 600):
        with pytest.raises(InvalidGroupIdError):
            group_store.check_group_id(bad)


def _offsets(**commit_times: int) -> dict[TopicPartition, CommittedOffset]:
    by_name = {"a0": A0, "a1": A1, "b0": B0}
    return {by_name[k]: CommittedOffset(1, commit_timestamp_ms=t) for k, t in commit_times.items()}


def test_an_empty_group_expires_retention_after_it_emptied() -> None:
    offsets = _offsets(a0=0, b0=DAY_MS)
    now = 2 * DAY_MS + WEEK_MS
    assert (
        expired_offsets(offsets, now - 1, WEEK_MS, has_members=False, empty_since_ms=2 * DAY_MS)
        == set()
    )
    assert expired_offsets(offsets, now, WEEK_MS, has_members=False, empty_since_ms=2 * DAY_MS) == {
        A0,
        B0,
    }
    # A commit after the group emptied (an admin's reset) is kept a retention from then.
    late = _offsets(a0=0, b0=5 * DAY_MS)
    assert expired_offsets(late, now, WEEK_MS, has_members=False, empty_since_ms=2 * DAY_MS) == {A0}


def test_without_the_emptying_each_offset_expires_by_its_commit() -> None:
    offsets = _offsets(a0=0, a1=DAY_MS, b0=-1)
    assert expired_offsets(offsets, WEEK_MS, WEEK_MS, has_members=False) == {A0}
    assert expired_offsets(offsets, WEEK_MS + DAY_MS, WEEK_MS, has_members=False) == {A0, A1}


def test_a_group_with_members_keeps_its_subscribed_topics() -> None:
    offsets = _offsets(a0=0, b0=0)
    now = 2 * WEEK_MS
    assert expired_offsets(offsets, now, WEEK_MS, has_members=True) == set()
    assert expired_offsets(offsets, now, WEEK_MS, has_members=True, subscribed_topics={"a"}) == {B0}


def _subscription(*topics: str) -> bytes:
    writer = Writer()
    writer.int16(1)
    writer.array_length(len(topics))
    for topic in topics:
        writer.required_string(topic)
    writer.bytes_(None)
    return writer.getvalue()


def test_subscribed_topics_are_read_from_the_members_subscriptions() -> None:
    assert subscribed_topics([_subscription("a"), _subscription("a", "c")]) == {"a", "c"}
    assert subscribed_topics([_subscription("a"), b"\x00"]) is None
