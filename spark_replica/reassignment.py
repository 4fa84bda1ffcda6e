"""Partition reassignment plans: parsing, checking against the cluster, and proposing one.

A plan has the JSON layout of Kafka's reassignment file, so plans written for
kafka-reassign-partitions work here::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}

Everything here is pure: the CLI gathers the facts (assignments, registered brokers,
topic configs) and these functions decide. A plan is checked whole before anything is
written, so a bad plan leaves no trace in ZooKeeper.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from spark_replica.errors import (
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    UnknownTopicOrPartitionError,
)
from spark_replica.topics import TopicPartition

PLAN_VERSION = 1


@dataclass(frozen=True, slots=True)
class PartitionMove:
    """Where one partition's replicas should be, the first one preferred."""

    tp: TopicPartition
    replicas: tuple[int, ...]


def _fail(message: str) -> InvalidReplicaAssignmentError:
    return InvalidReplicaAssignmentError(f"reassignment plan: {message}")


def plan_from_json(value: object) -> list[PartitionMove]:
    """The moves of a decoded plan; raise InvalidReplicaAssignmentError saying what is wrong.

    Checks what needs no cluster: the layout, replica lists that are empty or repeat a
    broker, and a partition listed twice.
    """
    if not isinstance(value, dict):
        raise _fail("expected a JSON object with a 'partitions' list")
    version = value.get("version", PLAN_VERSION)
    if version != PLAN_VERSION:
        raise _fail(f"version {version!r} is not supported (use {PLAN_VERSION})")
    entries = value.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise _fail("'partitions' must be a non-empty list")
    moves: list[PartitionMove] = []
    seen: set[TopicPartition] = set()
    for n, entry in enumerate(entries):
        where = f"entry {n}"
        if not isinstance(entry, dict):
            raise _fail(f"{where} is not an object")
        topic, partition, replicas = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("replicas"),
        )
        if not isinstance(topic, str) or not topic:
            raise _fail(f"{where} needs a topic name")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise _fail(f"{where} ({topic}) needs a partition number >= 0")
        tp = TopicPartition(topic, partition)
        if not isinstance(replicas, list) or not replicas:
            raise _fail(f"{tp} needs a non-empty 'replicas' list")
        if not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in replicas):
            raise _fail(f"{tp} replicas must be broker ids (integers >= 0), not {replicas}")
        if len(set(replicas)) != len(replicas):
            raise _fail(f"{tp} lists a broker twice: {replicas}")
        if tp in seen:
            raise _fail(f"{tp} is listed twice")
        seen.add(tp)
        moves.append(PartitionMove(tp, tuple(replicas)))
    return moves


def parse_plan(text: str) -> list[PartitionMove]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(f"not valid JSON: {exc}") from exc
    return plan_from_json(value)


def plan_to_json(moves: list[PartitionMove]) -> str:
    return json.dumps(
        {
            "version": PLAN_VERSION,
            "partitions": [
                {"topic": m.tp.topic, "partition": m.tp.partition, "replicas": list(m.replicas)}
                for m in moves
            ],
        }
    )


def check_plan(
    moves: list[PartitionMove],
    assignments: Mapping[TopicPartition, list[int]],
    live_brokers: Collection[int],
    min_insync: Mapping[str, int],
) -> None:
    """Refuse a plan the cluster cannot carry out, naming the first problem.

    A broker that holds replicas today but is not registered is down; one that appears
    nowhere is unknown. A replica list shorter than the topic's min.insync.replicas would
    leave acks=all producers failing forever, so it is refused too.
    """
    known = {b for replicas in assignments.values() for b in replicas} | set(live_brokers)
    for move in moves:
        if move.tp not in assignments:
            raise UnknownTopicOrPartitionError(f"reassignment plan: {move.tp} does not exist")
        for broker in move.replicas:
            if broker not in known:
                raise _fail(f"{move.tp}: broker {broker} is unknown (no broker has that id)")
            if broker not in live_brokers:
                raise _fail(f"{move.tp}: broker {broker} is down")
        needed = min_insync.get(move.tp.topic, 1)
        if len(move.replicas) < needed:
            raise _fail(
                f"{move.tp}: {len(move.replicas)} replica(s) is below the topic's "
                f"min.insync.replicas={needed}"
            )


def assign_replicas(
    brokers: list[int], partitions: int, replication_factor: int, start: int = 0
) -> dict[int, list[int]]:
    """Round-robin replicas so that leaders (first replicas) and followers spread evenly.

    Partition p's preferred replica is broker (start + p) mod n. Follower j sits
    1 + (shift + j - 1) mod (n - 1) places after it, where the shift grows by one every
    n partitions: followers are always distinct from each other and from the leader,
    and the same pairs of brokers are not always together.
    """
    count = len(brokers)
    if replication_factor > count:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {count} live broker(s)"
        )
    assignment: dict[int, list[int]] = {}
    for p in range(partitions):
        first = (start + p) % count
        shift = p // count
        replicas = [brokers[first]]
        for j in range(1, replication_factor):
            distance = 1 + (shift + j - 1) % (count - 1)
            replicas.append(brokers[(first + distance) % count])
        assignment[p] = replicas
    return assignment


def generate_plan(
    assignments: Mapping[TopicPartition, list[int]], topics: Collection[str], brokers: list[int]
) -> list[PartitionMove]:
    """Spread the partitions of `topics` over `brokers`, keeping each replication factor.

    Like creation, replicas go round robin so that preferred leaders spread evenly; the
    proposal is only printed, for the user to review and run with --plan.
    """
    if not brokers or len(set(brokers)) != len(brokers):
        raise _fail(f"--brokers must list distinct broker ids, not {brokers}")
    moves: list[PartitionMove] = []
    for topic in sorted(topics):
        partitions = sorted(tp for tp in assignments if tp.topic == topic)
        if not partitions:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        factor = len(assignments[partitions[0]])
        if factor > len(brokers):
            raise _fail(
                f"topic {topic!r} has {factor} replicas per partition, more than the "
                f"{len(brokers)} broker(s) given"
            )
        proposal = assign_replicas(sorted(brokers), len(partitions), factor)
        moves.extend(PartitionMove(tp, tuple(proposal[tp.partition])) for tp in partitions)
    return moves
