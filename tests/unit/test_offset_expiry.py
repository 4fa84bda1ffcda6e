"""Kafka's expiry rules for committed offsets, pure: when an empty group's offsets go,
and which offsets a group with members keeps."""

from __future__ import annotations

from brokerd.groups.offset_expiry import expired_offsets, subscribed_topics
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.offsets_records import OffsetValue
from spark_replica.wire.primitives import Writer

DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def _offsets(**commit_times: int) -> dict[TopicPartition, OffsetValue]:
    by_name = {"a0": A0, "a1": A1, "b0": B0}
    return {by_name[k]: OffsetValue(1, commit_timestamp_ms=t) for k, t in commit_times.items()}


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
