"""The controller's decisions from its model alone: new partitions, failures, unclean."""

from __future__ import annotations

from brokerd.controller.context import ControllerContext, LeaderAndIsr, LiveBroker
from brokerd.controller.decisions import next_state, reelection_state
from brokerd.controller.states import ReplicaState
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes

TP = TopicPartition("t", 0)
# The zxid of the state's write: brokers registered before it have smaller epochs.
STATE_ZXID = 500


def context(
    live: list[int],
    state: znodes.PartitionState | None = None,
    restarted: tuple[int, ...] = (),
    **configs: str,
) -> ControllerContext:
    """`restarted` brokers are live with a registration newer than the state."""
    ctx = ControllerContext(broker_id=1, epoch=7, epoch_zk_version=3)
    ctx.live_brokers = {
        b: LiveBroker(
            znodes.BrokerRegistration(b, "h", 9000 + b, "0"),
            epoch=(STATE_ZXID if b in restarted else 0) + 100 + b,
        )
        for b in [*live, *restarted]
    }
    ctx.assignments[TP] = [1, 2, 3]
    ctx.topic_configs["t"] = dict(configs)
    if state is not None:
        ctx.leadership[TP] = LeaderAndIsr(state, zk_version=5, zxid=STATE_ZXID)
    return ctx


def test_new_partition_is_led_by_first_live_replica() -> None:
    write = next_state(context([2, 3]), TP)
    assert write is not None and write.expected_version is None
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (2, 0, [2, 3])
    assert write.state.controller_epoch == 7


def test_new_partition_with_no_live_replica_waits() -> None:
    assert next_state(context([]), TP) is None


def test_healthy_partition_needs_nothing() -> None:
    assert next_state(context([1, 2, 3], znodes.PartitionState(1, 4, [1, 2, 3], 6)), TP) is None


def test_dead_follower_leaves_the_isr_with_a_new_epoch() -> None:
    write = next_state(context([1, 3], znodes.PartitionState(1, 4, [1, 2, 3], 6)), TP)
    assert write is not None and write.expected_version == 5
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (1, 5, [1, 3])


def test_dead_leader_is_replaced_from_the_isr_in_assignment_order() -> None:
    write = next_state(context([2, 3], znodes.PartitionState(1, 4, [3, 1, 2], 6)), TP)
    assert write is not None and not write.unclean
    assert (write.state.leader, write.state.leader_epoch) == (2, 5)
    assert write.state.isr == [3, 2]


def test_no_isr_member_alive_records_no_leader_unless_unclean() -> None:
    state = znodes.PartitionState(1, 4, [1], 6)
    offline = next_state(context([2, 3], state), TP)
    assert offline is not None and offline.expected_version == 5
    assert (offline.state.leader, offline.state.leader_epoch, offline.state.isr) == (-1, 5, [1])
    assert next_state(context([2, 3], offline.state), TP) is None, "written once"
    write = next_state(context([3], state, **{"unclean.leader.election.enable": "true"}), TP)
    assert write is not None and write.unclean
    assert (write.state.leader, write.state.isr) == (3, [3])


def test_last_isr_member_returning_is_elected_at_a_new_epoch() -> None:
    write = next_state(context([1, 2, 3], znodes.PartitionState(-1, 5, [1], 7)), TP)
    assert write is not None
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (1, 6, [1])


def test_a_leader_that_stepped_down_is_elected_again_at_a_new_epoch() -> None:
    write = reelection_state(context([1, 3], znodes.PartitionState(1, 4, [1, 2, 3], 6)), TP)
    assert write is not None and write.expected_version == 5
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (1, 5, [1, 3])
    dead_leader = context([2, 3], znodes.PartitionState(1, 4, [1, 2], 6))
    assert reelection_state(dead_leader, TP) == next_state(dead_leader, TP)


def test_a_leader_restarted_since_the_state_is_replaced_at_a_new_epoch() -> None:
    write = next_state(context([1, 3], znodes.PartitionState(2, 4, [2, 3, 1], 6), (2,)), TP)
    assert write is not None and write.expected_version == 5 and not write.unclean
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (1, 5, [3, 1])


def test_a_follower_restarted_since_the_state_leaves_the_isr() -> None:
    write = next_state(context([1, 2], znodes.PartitionState(1, 4, [1, 3, 2], 6), (3,)), TP)
    assert write is not None
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (1, 5, [1, 2])


def test_a_restarted_replica_alone_is_not_elected_from_a_stale_isr() -> None:
    state = znodes.PartitionState(2, 4, [2, 3, 1], 6)
    offline = next_state(context([], state, (3,)), TP)
    assert offline is not None and not offline.unclean
    assert (offline.state.leader, offline.state.leader_epoch, offline.state.isr) == (-1, 5, [2, 1])
    unclean = next_state(context([], state, (3,), **{"unclean.leader.election.enable": "true"}), TP)
    assert unclean is not None and unclean.unclean
    assert (unclean.state.leader, unclean.state.isr) == (3, [3])


def test_when_every_isr_member_restarted_they_all_stay_eligible() -> None:
    write = next_state(context([], znodes.PartitionState(2, 4, [2, 3], 6), (3, 2)), TP)
    assert write is not None and not write.unclean
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (2, 5, [2, 3])


def test_members_returning_to_a_state_without_leader_are_eligible() -> None:
    """A NO_LEADER state was written because its ISR members were gone: registrations
    newer than it are their expected return, not a restart it missed."""
    write = next_state(context([3], znodes.PartitionState(-1, 5, [2, 1], 7), (1,)), TP)
    assert write is not None
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (1, 6, [1])


def test_a_restarted_leader_that_stepped_down_is_not_elected_again() -> None:
    ctx = context([1, 3], znodes.PartitionState(2, 4, [2, 3, 1], 6), (2,))
    assert reelection_state(ctx, TP) == next_state(ctx, TP)
    write = reelection_state(context([1, 2], znodes.PartitionState(1, 4, [1, 3, 2], 6), (3,)), TP)
    assert write is not None
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (1, 5, [1, 2])


def test_a_restarted_preferred_replica_is_not_moved_back_to() -> None:
    ctx = context([2, 3], znodes.PartitionState(2, 4, [2, 3, 1], 6), (1,))
    assert next_preferred(ctx) is None


def test_next_state_does_not_change_the_context() -> None:
    ctx = context([2, 3], znodes.PartitionState(1, 4, [1], 6))
    before = (dict(ctx.leadership), ctx.unclean_elections)
    next_state(ctx, TP)
    assert (dict(ctx.leadership), ctx.unclean_elections) == before


def test_replica_states_follow_brokers() -> None:
    ctx = context([1, 2, 3])
    assert ctx.mark_replicas([TP], None, ReplicaState.ONLINE) == []
    assert ctx.replica_states.get((TP, 2)) is ReplicaState.ONLINE
    assert ctx.mark_replicas([TP], {2}, ReplicaState.OFFLINE) == []
    assert ctx.replica_states.get((TP, 2)) is ReplicaState.OFFLINE
    refused = ctx.mark_replicas([TP], {2}, ReplicaState.REPLICA_DELETION_SUCCESSFUL)
    assert refused == [(TP, 2)], "OFFLINE cannot jump to deletion-successful"
    ctx.remove_topic("t")
    assert ctx.replica_states.get((TP, 2)) is ReplicaState.NON_EXISTENT


def test_preferred_state_moves_leadership_back_when_possible() -> None:
    ctx = context([1, 2, 3], znodes.PartitionState(2, 4, [2, 3, 1], 6))
    write = next_preferred(ctx)
    assert write is not None
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (1, 5, [2, 3, 1])
    assert next_preferred(context([2, 3], znodes.PartitionState(2, 4, [2, 3, 1], 6))) is None
    assert next_preferred(context([1, 2, 3], znodes.PartitionState(2, 4, [2, 3], 6))) is None
    assert next_preferred(context([1, 2, 3], znodes.PartitionState(1, 4, [1, 2], 6))) is None


def next_preferred(ctx: ControllerContext) -> object:
    from brokerd.controller.decisions import preferred_state

    return preferred_state(ctx, TP)


def test_imbalance_counts_misplaced_leaders_per_preferred_broker() -> None:
    from brokerd.controller.decisions import imbalanced_brokers

    ctx = context([1, 2, 3])
    for p in range(10):
        tp = TopicPartition("t", p)
        ctx.assignments[tp] = [1, 2, 3]
        leader = 2 if p < 2 else 1
        ctx.leadership[tp] = LeaderAndIsr(
            znodes.PartitionState(leader, 0, [1, 2, 3], 1), 0, STATE_ZXID
        )
    assert imbalanced_brokers(ctx, 10) == {1: [TopicPartition("t", 0), TopicPartition("t", 1)]}
    assert imbalanced_brokers(ctx, 20) == {}, "2 of 10 is not over 20%"
