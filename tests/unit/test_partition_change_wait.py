"""Waiting for a change on many partitions at once: the idle fetch's long poll.

A follower's fetch names thousands of partitions and waits on all of them with one
future; these tests hold it to waking on any one change and to leaving nothing behind
in the partitions however the wait ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.core.fetch import long_poll
from brokerd.replication.partition import Partition, wait_for_change
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.errors import RequestTimedOutError
from spark_replica.records import build_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.controller_requests import PartitionLeaderState
from spark_replica.wire.native.produce import ACKS_ALL

PARTITIONS = 200
# Far beyond how long a woken wait takes, however busy the machine: a test that waits
# this long has missed its wake-up.
LONG_WAIT_S = 30.0


@pytest.fixture
def led(tmp_path: Path) -> Iterator[list[Partition]]:
    """Partitions this broker (1) leads, with followers 2 and 3 in the ISR."""
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    partitions = []
    for number in range(PARTITIONS):
        partition = manager.ensure_partition(TopicPartition("t", number), {}, now_ms=0)
        state = PartitionLeaderState(number, 1, 1, [1, 2, 3], 0, [1, 2, 3])
        manager.apply_leader_and_isr(partition, state, controller_epoch=1, now_ms=0)
        partitions.append(partition)
    yield partitions
    manager.close()


def registered(partitions: list[Partition]) -> int:
    return sum(p.change_waiters for p in partitions)


def test_a_change_of_any_one_partition_wakes_the_wait_and_it_leaves_every_partition(
    led: list[Partition],
) -> None:
    async def scenario() -> tuple[bool, int]:
        wait = asyncio.create_task(wait_for_change(led, LONG_WAIT_S))
        await asyncio.sleep(0)
        during = registered(led)
        led[137].apply_isr([1, 2], zk_version=1)
        return await asyncio.wait_for(wait, LONG_WAIT_S / 2), during

    changed, during = asyncio.run(scenario())
    assert changed is True
    assert during == PARTITIONS
    assert registered(led) == 0


def test_a_timed_out_wait_leaves_no_waiter_behind(led: list[Partition]) -> None:
    changed = asyncio.run(wait_for_change(led, 0.05))
    assert changed is False
    assert registered(led) == 0


def test_a_cancelled_wait_leaves_no_waiter_behind(led: list[Partition]) -> None:
    async def scenario() -> None:
        wait = asyncio.create_task(wait_for_change(led, LONG_WAIT_S))
        await asyncio.sleep(0)
        assert registered(led) == PARTITIONS
        wait.cancel()
        with pytest.raises(asyncio.CancelledError):
            await wait

    asyncio.run(scenario())
    assert registered(led) == 0


def test_waits_on_the_same_partitions_are_all_woken(led: list[Partition]) -> None:
    async def scenario() -> list[bool]:
        waits = [asyncio.create_task(wait_for_change(led[i::3], LONG_WAIT_S)) for i in range(3)]
        await asyncio.sleep(0)
        for partition in led[:3]:
            partition.apply_isr([1, 2], zk_version=1)
        return await asyncio.wait_for(asyncio.gather(*waits), LONG_WAIT_S / 2)

    assert asyncio.run(scenario()) == [True, True, True]
    assert registered(led) == 0


def test_long_poll_reads_again_when_one_watched_partition_changes(led: list[Partition]) -> None:
    """An idle fetch of every partition answers the read after the change, long before
    max_wait, and leaves no waiter in the partitions it watched."""
    reads: list[int] = []

    def read_all() -> tuple[int, int, list[Partition]]:
        reads.append(len(reads))
        return len(reads), (1 if len(reads) > 1 else 0), led

    async def scenario() -> int:
        poll = asyncio.create_task(long_poll(read_all, int(LONG_WAIT_S * 1000), 1))
        await asyncio.sleep(0)
        led[PARTITIONS - 1].make_follower(2, 2, [1, 2, 3], controller_epoch=1)
        return await asyncio.wait_for(poll, LONG_WAIT_S / 2)

    assert asyncio.run(scenario()) == 2
    assert registered(led) == 0


def test_long_poll_cancelled_while_waiting_leaves_no_waiter_behind(
    led: list[Partition],
) -> None:
    """A fetch whose connection closes is cancelled mid-wait."""

    async def scenario() -> None:
        poll = asyncio.create_task(long_poll(lambda: (None, 0, led), int(LONG_WAIT_S * 1000), 1))
        await asyncio.sleep(0)
        assert registered(led) == PARTITIONS
        poll.cancel()
        with pytest.raises(asyncio.CancelledError):
            await poll

    asyncio.run(scenario())
    assert registered(led) == 0


def test_an_acks_all_wait_times_out_and_leaves_no_waiter_behind(led: list[Partition]) -> None:
    partition = led[0]
    with pytest.raises(RequestTimedOutError):
        asyncio.run(partition.wait_for_high_watermark(1, timeout_s=0.05))
    assert partition.change_waiters == 0


def test_a_follower_wait_is_not_woken_by_the_high_watermark_alone(led: list[Partition]) -> None:
    """The HW that followers' fetches move wakes consumers' waits (and acks=all
    producers'), not the followers' own: they learn it from their next answer, instead of
    one more round trip per follower for every append."""
    partition = led[0]
    partition.append_as_leader(build_batch([b"x"]), ACKS_ALL, now_ms=0)

    async def scenario() -> tuple[bool, bool, bool]:
        consumer = asyncio.create_task(wait_for_change([partition], LONG_WAIT_S))
        follower = asyncio.create_task(wait_for_change([partition], 0.2, high_watermark=False))
        await asyncio.sleep(0)
        for replica in (2, 3):
            partition.record_follower_fetch(replica, 1, now_ms=0)
        assert partition.high_watermark == 1
        woken = await asyncio.wait_for(consumer, LONG_WAIT_S / 2)
        not_woken = await follower
        appended = asyncio.create_task(
            wait_for_change([partition], LONG_WAIT_S, high_watermark=False)
        )
        await asyncio.sleep(0)
        partition.append_as_leader(build_batch([b"y"]), ACKS_ALL, now_ms=0)
        return woken, not_woken, await asyncio.wait_for(appended, LONG_WAIT_S / 2)

    assert asyncio.run(scenario()) == (True, False, True)
    assert registered(led) == 0
