"""A leader's ISR writes (brokerd/isr_writer.write_isrs) on a real ZooKeeper: many at
once, each conditional on its own zkVersion, the refused ones settled by reading back."""

from __future__ import annotations

from kazoo.client import KazooClient

from brokerd.controller import zk_requests
from brokerd.replication.isr_writer import IsrWrite, write_isrs
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes

LEADER = 1
EPOCH = 4


def state(isr: list[int], leader: int = LEADER, epoch: int = EPOCH) -> znodes.PartitionState:
    return znodes.PartitionState(leader, epoch, isr, 1)


def test_each_write_is_settled_on_its_own(counted_zk: KazooClient) -> None:
    tps = [TopicPartition("t", p) for p in range(5)]
    for tp in tps[:4]:
        counted_zk.create(
            znodes.partition_state_path(tp.topic, tp.partition),
            state([1, 2]).encode(),
            makepath=True,
        )
    # 1: our own write whose answer was lost (the znode holds it, one version on);
    # 2: the controller moved on (another leader); 3: ours at an older epoch.
    counted_zk.set(znodes.partition_state_path("t", 1), state([1, 2, 3]).encode())
    counted_zk.set(znodes.partition_state_path("t", 2), state([2, 3], leader=2, epoch=5).encode())
    counted_zk.set(znodes.partition_state_path("t", 3), state([1], epoch=EPOCH - 1).encode())
    writes = [IsrWrite(tp, state([1, 2, 3]), 0) for tp in tps]

    with zk_requests.counting() as tally:
        held = write_isrs(counted_zk, writes)

    assert held == [(state([1, 2, 3]), 1), (state([1, 2, 3]), 1), None, None, None]
    assert tally.round_trips == 2  # the writes, then the read-back of the three refused
    assert write_isrs(counted_zk, []) == []
