"""Topic admin writes that race another change of the same topic, on a real ZooKeeper.

Each race is played out deterministically: a client wrapper makes the competing change
(a deletion, another writer) on the real server just before the write under test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from functools import partial
from types import SimpleNamespace
from typing import Any, cast

import pytest
from kazoo.client import KazooClient

from brokerd.core.context import BrokerContext
from brokerd.native.topic_admin import _run
from spark_replica.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.session import connect

pytestmark = pytest.mark.slow


class ChangedBeforeSet:
    """A real client whose `set` lets a competing change happen on the server first."""

    def __init__(self, zk: KazooClient, change: Callable[[KazooClient], None], times: int) -> None:
        self._zk = zk
        self._change = change
        self._times = times

    def __getattr__(self, name: str) -> Any:
        return getattr(self._zk, name)

    def set(self, path: str, value: bytes, version: int = -1) -> object:
        if self._times > 0:
            self._times -= 1
            self._change(self._zk)
        return self._zk.set(path, value, version=version)


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KazooClient]:
    client = connect(zk_connect)
    try:
        client.ensure_path(znodes.BROKER_IDS_PATH)
        for broker_id in (1, 2, 3):
            client.create(znodes.broker_path(broker_id), b"{}", ephemeral=True)
        topic_store.create_topic(client, "raced", partitions=2, replication_factor=2)
        yield client
    finally:
        client.stop()
        client.close()


def delete_topic(zk: KazooClient) -> None:
    topic_store.remove_topic_znodes(zk, "raced")


def grow_topic(zk: KazooClient) -> None:
    """Another writer's change of the assignment (here: the same replicas, written again)."""
    data, _ = zk.get(znodes.topic_path("raced"))
    zk.set(znodes.topic_path("raced"), data)


def test_create_partitions_of_a_topic_deleted_meanwhile_is_unknown_topic(zk: KazooClient) -> None:
    raced = cast(KazooClient, ChangedBeforeSet(zk, delete_topic, times=1))
    with pytest.raises(UnknownTopicOrPartitionError):
        topic_store.add_partitions(raced, "raced", 4)
    context = cast(BrokerContext, SimpleNamespace(zk=ChangedBeforeSet(zk, delete_topic, times=1)))
    topic_store.create_topic(zk, "raced", partitions=2, replication_factor=2)
    write = partial(topic_store.add_partitions, topic="raced", count=4)
    result = asyncio.run(_run("raced", None, write, context))
    assert result.error_code == UnknownTopicOrPartitionError.code


def test_create_partitions_retries_a_concurrent_assignment_change(zk: KazooClient) -> None:
    raced = cast(KazooClient, ChangedBeforeSet(zk, grow_topic, times=2))
    grown = topic_store.add_partitions(raced, "raced", 4)
    assert sorted(grown.partitions) == [0, 1, 2, 3]
    assignment = topic_store.read_assignment(zk, "raced")
    assert assignment is not None and sorted(assignment.partitions) == [0, 1, 2, 3]


def test_create_partitions_that_keeps_conflicting_is_a_retriable_error(zk: KazooClient) -> None:
    raced = cast(KazooClient, ChangedBeforeSet(zk, grow_topic, times=1_000))
    with pytest.raises(RequestTimedOutError) as raised:
        topic_store.add_partitions(raced, "raced", 4)
    assert raised.value.retriable


def test_create_partitions_raced_by_a_larger_growth_is_invalid_partitions(
    zk: KazooClient,
) -> None:
    def grow_to_5(client: KazooClient) -> None:
        topic_store.add_partitions(client, "raced", 5)

    raced = cast(KazooClient, ChangedBeforeSet(zk, grow_to_5, times=1))
    with pytest.raises(InvalidPartitionsError, match="has 5 partitions"):
        topic_store.add_partitions(raced, "raced", 4)


def test_create_partitions_of_a_topic_queued_for_deletion_is_refused(zk: KazooClient) -> None:
    topic_store.delete_topic(zk, "raced")
    with pytest.raises(InvalidTopicError, match="queued for deletion"):
        topic_store.add_partitions(zk, "raced", 4)
    assignment = topic_store.read_assignment(zk, "raced")
    assert assignment is not None and sorted(assignment.partitions) == [0, 1]
