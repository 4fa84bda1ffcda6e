"""Partition health as Kafka's metrics define it, from plain values (no I/O, no state).

A broker reports only the partitions it leads: a follower's view of the ISR is not
kept (it learns leaders, not ISRs), and counting each partition once, on its leader,
makes the cluster's total the sum over brokers.

- under-replicated: the leader's ISR is smaller than the replica list.
- under min ISR: the leader's ISR is smaller than min.insync.replicas (acks=all
  produce is refused).
- offline (the controller's count): the partition has a leaderAndISR state, and its
  leader is not a live broker (NO_LEADER included). A partition that never had a state
  is new, not offline, as in Kafka.
- preferred-replica imbalance (the controller's count): the leader is not the first
  assigned replica.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from spark_replica.topics import TopicPartition


@dataclass(frozen=True, slots=True)
class LeaderHealth:
    under_replicated: bool
    under_min_isr: bool


def leader_health(isr_size: int, replica_count: int, min_insync_replicas: int) -> LeaderHealth:
    return LeaderHealth(
        under_replicated=isr_size < replica_count,
        under_min_isr=isr_size < min_insync_replicas,
    )


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    """What the controller counts over every partition it knows."""

    topics: int
    partitions: int
    offline: int
    preferred_imbalance: int


def cluster_health(
    assignments: Mapping[TopicPartition, Sequence[int]],
    leaders: Mapping[TopicPartition, int],
    live_brokers: Collection[int],
) -> ClusterHealth:
    """Counts from each partition's replicas (first = preferred) and the leader its
    leaderAndISR state names."""
    offline = imbalanced = 0
    for tp, replicas in assignments.items():
        leader = leaders.get(tp)
        if leader is None:
            continue
        if leader not in live_brokers:
            offline += 1
        if not replicas or leader != replicas[0]:
            imbalanced += 1
    topics = len({tp.topic for tp in assignments})
    return ClusterHealth(topics, len(assignments), offline, imbalanced)


@dataclass(frozen=True, slots=True)
class IsrChange:
    shrank: bool  # a member left
    expanded: bool  # a member joined


def isr_change(before: Iterable[int], after: Iterable[int]) -> IsrChange:
    old, new = set(before), set(after)
    return IsrChange(shrank=bool(old - new), expanded=bool(new - old))
