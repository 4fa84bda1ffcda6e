"""How a leader settles an ISR write whose outcome it is unsure of, with plain values."""

from __future__ import annotations

from dataclasses import replace

from brokerd.replication.isr_writer import is_own_write
from spark_replica.zk import znodes

WRITTEN = znodes.PartitionState(leader=1, leader_epoch=4, isr=[1, 3], controller_epoch=2)


def test_the_znode_holding_exactly_the_write_is_ours() -> None:
    assert is_own_write(WRITTEN, replace(WRITTEN))


def test_an_earlier_write_of_ours_is_ours() -> None:
    """Same leader, same epoch: only this leader writes at its epoch."""
    assert is_own_write(WRITTEN, replace(WRITTEN, isr=[1, 2, 3]))


def test_a_newer_epoch_or_another_leader_is_someone_elses() -> None:
    assert not is_own_write(WRITTEN, replace(WRITTEN, leader_epoch=5))
    assert not is_own_write(WRITTEN, replace(WRITTEN, leader=3))


def test_step_down_notification_round_trips_and_plain_ones_stay_kafka_shaped() -> None:
    path = f"{znodes.ISR_CHANGE_PREFIX}0000000001"
    plain = znodes.IsrChangeNotification([("t", 0)])
    assert b"leader_stepped_down" not in plain.encode()
    assert znodes.IsrChangeNotification.decode(path, plain.encode()) == plain
    stepped = znodes.IsrChangeNotification([("t", 0), ("u", 2)], leader_stepped_down=True)
    assert znodes.IsrChangeNotification.decode(path, stepped.encode()) == stepped
