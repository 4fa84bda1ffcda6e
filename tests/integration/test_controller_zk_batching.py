"""The controller's ZooKeeper reads and writes for many partitions: few round trips,
same outcome (real ZooKeeper, no brokers)."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from brokerd.controller import zk_requests, zk_store
from brokerd.controller.decisions import StateWrite
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes

TOPIC = "many"
PARTITIONS = 1200  # more than two multi-ops' worth (zk_store.MAX_OPS_PER_MULTI)


def new_states(epoch: int) -> list[StateWrite]:
    return [
        StateWrite(TopicPartition(TOPIC, p), znodes.PartitionState(1, 0, [1, 2], epoch), None)
        for p in range(PARTITIONS)
    ]


def test_creating_and_rewriting_many_states_takes_a_few_round_trips(
    counted_zk: KazooClient,
) -> None:
    won = zk_store.try_become_controller(counted_zk, 1)
    assert won is not None
    epoch, epoch_version = won
    with zk_requests.counting() as tally:
        created = zk_store.write_states(counted_zk, epoch_version, new_states(epoch))
    assert len(created.written) == PARTITIONS and not created.conflicts
    assert tally.round_trips <= 4, tally.round_trips
    with zk_requests.counting() as tally:
        read = zk_store.read_states(counted_zk, list(created.written))
    assert read == created.written
    assert tally.round_trips <= 2, tally.round_trips

    moved = [
        StateWrite(tp, znodes.PartitionState(2, 1, [2], epoch), li.zk_version)
        for tp, li in read.items()
    ]
    stale = moved[700]
    # A leader's write:
    counted_zk.set(znodes.partition_state_path(TOPIC, stale.tp.partition), b"{}")
    with zk_requests.counting() as tally:
        outcome = zk_store.write_states(counted_zk, epoch_version, moved)
    assert outcome.conflicts == [stale.tp]
    assert set(outcome.written) == {w.tp for w in moved} - {stale.tp}
    assert all(li.zk_version == 1 and li.leader == 2 for li in outcome.written.values())
    assert tally.round_trips <= 3, tally.round_trips


def test_a_deposed_controller_writes_nothing(counted_zk: KazooClient) -> None:
    won = zk_store.try_become_controller(counted_zk, 1)
    assert won is not None
    epoch, epoch_version = won
    counted_zk.set(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(epoch + 1))
    with pytest.raises(zk_store.ControllerMovedError):
        zk_store.write_states(counted_zk, epoch_version, new_states(epoch))
    assert counted_zk.exists(znodes.partition_state_path(TOPIC, 0)) is None
