"""Reassignment plans (parsing, checks, proposals) and the controller's move decisions."""

from __future__ import annotations

import json

import pytest

from brokerd.controller.context import ControllerContext, LeaderAndIsr, LiveBroker
from brokerd.controller.reassignment import (
    epoch_bump_state,
    finishing_state,
    is_caught_up,
    is_finished,
    replicas_while_moving,
)
from spark_replica.errors import InvalidReplicaAssignmentError, UnknownTopicOrPartitionError
from spark_replica.reassignment import (
    PartitionMove,
    check_plan,
    generate_plan,
    parse_plan,
    plan_to_json,
)
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes

TP = TopicPartition("t", 0)


def plan(*entries: dict[str, object]) -> str:
    return json.dumps({"version": 1, "partitions": list(entries)})


def test_a_plan_round_trips_in_kafkas_layout() -> None:
    moves = parse_plan(plan({"topic": "t", "partition": 0, "replicas": [2, 3, 4]}))
    assert moves == [PartitionMove(TP, (2, 3, 4))]
    assert parse_plan(plan_to_json(moves)) == moves


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "not valid JSON"),
        ("[]", "JSON object"),
        (json.dumps({"version": 2, "partitions": []}), "version 2"),
        (plan(), "non-empty list"),
        (plan({"partition": 0, "replicas": [1]}), "topic name"),
        (plan({"topic": "t", "partition": -1, "replicas": [1]}), "partition number"),
        (plan({"topic": "t", "partition": 0, "replicas": []}), "non-empty 'replicas'"),
        (plan({"topic": "t", "partition": 0, "replicas": ["1"]}), "broker ids"),
        (plan({"topic": "t", "partition": 0, "replicas": [1, 2, 1]}), "lists a broker twice"),
        (
            plan(
                {"topic": "t", "partition": 0, "replicas": [1]},
                {"topic": "t", "partition": 0, "replicas": [2]},
            ),
            "listed twice",
        ),
    ],
)
def test_bad_plans_are_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match=says):
        parse_plan(text)


ASSIGNMENTS = {TP: [1, 2, 3], TopicPartition("t", 1): [2, 3, 5]}


def test_check_plan_names_unknown_and_dead_brokers() -> None:
    live = [1, 2, 3, 4]
    check_plan([PartitionMove(TP, (2, 3, 4))], ASSIGNMENTS, live, {})
    with pytest.raises(InvalidReplicaAssignmentError, match="broker 9 is unknown"):
        check_plan([PartitionMove(TP, (2, 3, 9))], ASSIGNMENTS, live, {})
    with pytest.raises(InvalidReplicaAssignmentError, match="broker 5 is down"):
        check_plan([PartitionMove(TP, (2, 3, 5))], ASSIGNMENTS, live, {})


def test_check_plan_refuses_missing_partitions_and_too_few_replicas() -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match="t-7 does not exist"):
        check_plan([PartitionMove(TopicPartition("t", 7), (1,))], ASSIGNMENTS, [1, 2, 3], {})
    with pytest.raises(InvalidReplicaAssignmentError, match=r"min\.insync\.replicas=2"):
        check_plan([PartitionMove(TP, (2,))], ASSIGNMENTS, [1, 2, 3], {"t": 2})


def test_generate_spreads_over_the_given_brokers_keeping_the_factor() -> None:
    moves = generate_plan(ASSIGNMENTS, ["t"], [4, 5, 6])
    assert [m.tp for m in moves] == [TP, TopicPartition("t", 1)]
    assert all(sorted(m.replicas) == [4, 5, 6] for m in moves)
    assert moves[0].replicas[0] != moves[1].replicas[0], "preferred leaders spread"
    with pytest.raises(InvalidReplicaAssignmentError, match="more than the 2 broker"):
        generate_plan(ASSIGNMENTS, ["t"], [4, 5])
    with pytest.raises(UnknownTopicOrPartitionError):
        generate_plan(ASSIGNMENTS, ["nope"], [4, 5, 6])


def context(live: list[int], replicas: list[int], leader: int, isr: list[int]) -> ControllerContext:
    ctx = ControllerContext(broker_id=1, epoch=7, epoch_zk_version=3)
    ctx.live_brokers = {
        b: LiveBroker(znodes.BrokerRegistration(b, "h", 9000 + b, "0"), epoch=100 + b) for b in live
    }
    ctx.assignments[TP] = replicas
    ctx.leadership[TP] = LeaderAndIsr(znodes.PartitionState(leader, 4, isr, 6), 5, zxid=500)
    return ctx


def test_while_moving_the_target_comes_first_then_the_leaving_replicas() -> None:
    assert replicas_while_moving([1, 2, 3], [2, 3, 4]) == [2, 3, 4, 1]
    assert replicas_while_moving([2, 3, 4, 1], [2, 3, 4]) == [2, 3, 4, 1]


def test_starting_bumps_the_epoch_and_keeps_leader_and_isr() -> None:
    ctx = context([1, 2, 3, 4], [2, 3, 4, 1], leader=1, isr=[1, 2, 3])
    write = epoch_bump_state(ctx, TP)
    assert write is not None and write.expected_version == 5
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (1, 5, [1, 2, 3])
    assert epoch_bump_state(context([2, 3, 4], [2, 3, 4, 1], 1, [1, 2, 3]), TP) is None


def test_finishing_waits_for_the_target_to_be_in_sync() -> None:
    ctx = context([1, 2, 3, 4], [2, 3, 4, 1], leader=1, isr=[1, 2, 3])
    assert not is_caught_up(ctx, TP, [2, 3, 4])
    ctx = context([1, 2, 3, 4], [2, 3, 4, 1], leader=1, isr=[1, 2, 3, 4])
    assert is_caught_up(ctx, TP, [2, 3, 4])


def test_finishing_moves_leadership_into_the_target_and_shrinks_the_isr() -> None:
    ctx = context([1, 2, 3, 4], [2, 3, 4, 1], leader=1, isr=[1, 2, 3, 4])
    write = finishing_state(ctx, TP, [2, 3, 4])
    assert write is not None
    assert (write.state.leader, write.state.leader_epoch, write.state.isr) == (2, 5, [2, 3, 4])


def test_a_staying_leader_keeps_leading() -> None:
    ctx = context([1, 2, 3, 4], [2, 3, 4, 1], leader=3, isr=[1, 2, 3, 4])
    write = finishing_state(ctx, TP, [2, 3, 4])
    assert write is not None and (write.state.leader, write.state.isr) == (3, [2, 3, 4])


def test_a_finished_state_needs_no_write() -> None:
    ctx = context([1, 2, 3, 4], [2, 3, 4, 1], leader=2, isr=[2, 3, 4])
    assert is_finished(ctx, TP, [2, 3, 4])
    assert finishing_state(ctx, TP, [2, 3, 4]) is None
