"""The controller's model of the cluster: what it believes, with no I/O.

Owned by the controller's event task alone (see controller.py); nothing else reads or
writes it. It holds the live brokers (with the epoch of each registration), the registrations of
brokers found dead before ZooKeeper ended their sessions (fenced), every
partition's assignment and leaderAndISR state with that state's zkVersion, and the
partition state table. Decisions are computed from it; they become true only once
written to ZooKeeper, after which the controller records them here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from brokerd.controller.states import PartitionState, ReplicaState, StateTable
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.metadata import NO_LEADER
from spark_replica.zk import znodes


@dataclass(frozen=True)
class LiveBroker:
    registration: znodes.BrokerRegistration
    epoch: int  # czxid of its /brokers/ids/N: changes with every incarnation


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leaderAndISR state as written, with the zkVersion of its znode and
    the zxid of the write that made it (the znode's mzxid)."""

    state: znodes.PartitionState
    zk_version: int
    zxid: int

    @property
    def leader(self) -> int:
        return self.state.leader

    @property
    def isr(self) -> list[int]:
        return self.state.isr


@dataclass
class ControllerContext:
    broker_id: int
    epoch: int
    epoch_zk_version: int
    live_brokers: dict[int, LiveBroker] = field(default_factory=dict)
    assignments: dict[TopicPartition, list[int]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    partition_states: StateTable[TopicPartition, PartitionState] = field(
        default_factory=lambda: StateTable(PartitionState.NON_EXISTENT)
    )
    replica_states: StateTable[tuple[TopicPartition, int], ReplicaState] = field(
        default_factory=lambda: StateTable(ReplicaState.NON_EXISTENT)
    )
    shutting_down: set[int] = field(default_factory=set)
    # Registrations (broker id -> broker epoch) whose process is known to be dead while
    # its ephemeral znode waits for the session to expire: not live, whatever ZooKeeper says.
    fenced: dict[int, int] = field(default_factory=dict)
    # Partitions being moved, with their target replicas (from /admin/reassign_partitions).
    reassignments: dict[TopicPartition, list[int]] = field(default_factory=dict)
    unclean_elections: int = 0
    last_config_change: int = -1  # sequence of the newest /config/changes notification read
    zk_round_trips: int = 0  # multi-ops written, for the failover log line and benchmarks

    @property
    def live_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def topics(self) -> set[str]:
        return {tp.topic for tp in self.assignments}

    def partitions_of_topic(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp.topic == topic)

    def partitions_with_replica_on(self, broker_ids: set[int]) -> list[TopicPartition]:
        return sorted(
            tp for tp, replicas in self.assignments.items() if broker_ids.intersection(replicas)
        )

    def partitions_led_by(self, broker_ids: set[int]) -> list[TopicPartition]:
        return sorted(tp for tp, li in self.leadership.items() if li.leader in broker_ids)

    def restarted_since_state(self, tp: TopicPartition) -> frozenset[int]:
        """The live replicas the state of `tp` counts on (leader and ISR) that registered
        after it was written: they restarted since (KIP-380's broker epoch, compared with
        the state's zxid), so they may have lost what they held when it was written.

        Empty for a state that names no leader: it was written because every ISR member
        was gone, so their return is what it waits for, not news it missed.
        """
        current = self.leadership.get(tp)
        if current is None or current.leader == NO_LEADER:
            return frozenset()
        return frozenset(
            replica
            for replica in {current.leader, *current.isr}
            if replica in self.live_brokers and self.live_brokers[replica].epoch > current.zxid
        )

    def fence(self, broker_id: int, broker_epoch: int) -> bool:
        """Record that the registration (`broker_id`, `broker_epoch`) belongs to a dead
        process; True if that is the registration held as live (False: already gone)."""
        live = self.live_brokers.get(broker_id)
        if live is None or live.epoch != broker_epoch:
            return False
        self.fenced[broker_id] = broker_epoch
        return True

    def unfenced(self, registered: dict[int, LiveBroker]) -> dict[int, LiveBroker]:
        """The registrations read from ZooKeeper that count as live brokers.

        A fenced registration stays dead until its znode goes; a broker that really
        restarts registers anew, with a new epoch, and is live again. Fences whose
        registration is gone or replaced are forgotten here.
        """
        self.fenced = {
            broker_id: epoch
            for broker_id, epoch in self.fenced.items()
            if broker_id in registered and registered[broker_id].epoch == epoch
        }
        return {b: live for b, live in registered.items() if self.fenced.get(b) != live.epoch}

    def unclean_enabled(self, topic: str) -> bool:
        value = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable", "false")
        return value.strip().lower() == "true"

    def mark_replicas(
        self, partitions: list[TopicPartition], brokers: set[int] | None, target: ReplicaState
    ) -> list[tuple[TopicPartition, int]]:
        """Move the replicas of `partitions` (on `brokers`, or all) to `target`.

        Returns the replicas whose current state does not allow it (left unchanged).
        """
        replicas = [
            (tp, broker)
            for tp in partitions
            for broker in self.assignments.get(tp, [])
            if brokers is None or broker in brokers
        ]
        new = [r for r in replicas if self.replica_states.get(r) is ReplicaState.NON_EXISTENT]
        self.replica_states.transition(new, ReplicaState.NEW)
        _, refused = self.replica_states.transition(replicas, target)
        return refused

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of_topic(topic):
            for broker in self.assignments.get(tp, []):
                self.replica_states.remove((tp, broker))
            self.assignments.pop(tp, None)
            self.leadership.pop(tp, None)
            self.partition_states.remove(tp)
        self.topic_configs.pop(topic, None)
        for tp in [tp for tp in self.reassignments if tp.topic == topic]:
            del self.reassignments[tp]
