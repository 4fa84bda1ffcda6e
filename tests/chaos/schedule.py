"""Seeded random fault schedules for the chaos runner.

Pure: `generate(seed)` returns the same schedule for the same seed and settings, so a
schedule that found a problem is replayed from its seed alone. A schedule is a list of
faults, each starting at a time in the fault window and undone after its duration:

- kill: SIGKILL a broker, restart it after the duration;
- pause: SIGSTOP a broker for longer than the ZooKeeper session timeout, then SIGCONT
  (its session expires, it is declared dead while it still believes it leads);
- torn tail: SIGKILL a broker, cut bytes off or append garbage to the active segment of
  one of its partitions (a write torn by the crash), restart it; its recovery must cut
  the tail;
- ZooKeeper restart: stop the server, start it again (same data) after the duration.

With `netns` (ZooKeeper and each broker on a host of its own), network partitions join
them, each a set of cuts that drop packets silently, healed after the duration:

- isolate: a broker cut from everyone, clients included;
- cut from ZooKeeper: a broker cut from ZooKeeper only (its session may expire while it
  still serves clients and replicas);
- controller cut from brokers: the controller keeps ZooKeeper and clients, loses its
  brokers (its requests to them hang);
- one-way cut: a follower's packets to a partition's leader dropped, nothing else (the
  leader still reaches it);
- cut from clients: a broker the clients cannot reach, whole for everyone else.

Broker faults name their target by role (the leader of a partition, the controller) or
by id; roles are resolved when the fault fires, since who leads depends on what came
before, and the id stands in when the role's holder is already under a fault.

Limits, so that a schedule tests the promise of the log (an acknowledged record survives
any single failure) rather than more than it makes: fewer brokers faulted at once than
there are brokers, one ZooKeeper restart at a time, and nothing else at all while a torn
tail plays out. Kills, pauses and ZooKeeper restarts destroy no data, so they may pile
up; a torn tail destroys a replica's copy, which is the one failure the log absorbs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

T = TypeVar("T")


class FaultKind(StrEnum):
    KILL = "kill"
    PAUSE = "pause"
    TORN_TAIL = "torn_tail"
    ZOOKEEPER_RESTART = "zookeeper_restart"
    ISOLATE = "isolate"
    ZOOKEEPER_CUT = "cut_from_zookeeper"
    CONTROLLER_CUT = "controller_cut_from_brokers"
    ONE_WAY_CUT = "one_way_cut_to_leader"
    CLIENTS_CUT = "cut_from_clients"


NETWORK_KINDS = frozenset(
    {
        FaultKind.ISOLATE,
        FaultKind.ZOOKEEPER_CUT,
        FaultKind.CONTROLLER_CUT,
        FaultKind.ONE_WAY_CUT,
        FaultKind.CLIENTS_CUT,
    }
)


class Target(StrEnum):
    LEADER = "leader"
    CONTROLLER = "controller"
    BROKER = "broker"


class TearMode(StrEnum):
    TRUNCATE = "truncate"
    GARBAGE = "garbage"


@dataclass(frozen=True, slots=True)
class Tear:
    mode: TearMode
    byte_count: int


@dataclass(frozen=True, slots=True)
class Fault:
    at_s: float  # from the start of the fault window
    kind: FaultKind
    duration_s: float  # until the broker restarts / resumes, or ZooKeeper is back
    target: Target | None = None  # None for a ZooKeeper restart
    # For Target.BROKER; for a one-way cut, the follower whose packets to the leader drop.
    broker_id: int = 0
    partition: int = 0  # whose leader (Target.LEADER), and whose segment a tear cuts
    tear: Tear | None = None
    # When its effects are over, for the limits: later than ends_at_s, see settled_at().
    settled_s: float = 0.0

    @property
    def ends_at_s(self) -> float:
        return self.at_s + self.duration_s

    @property
    def on_broker(self) -> bool:
        return self.kind is not FaultKind.ZOOKEEPER_RESTART

    @property
    def on_network(self) -> bool:
        return self.kind in NETWORK_KINDS

    def overlaps(self, other: Fault) -> bool:
        return self.at_s < other.settled_s and other.at_s < self.settled_s

    def describe(self) -> str:
        if not self.on_broker:
            return f"{self.at_s:.1f}s zookeeper restart, down {self.duration_s:.1f}s"
        who = {
            Target.LEADER: f"leader of partition {self.partition}",
            Target.CONTROLLER: "controller",
            Target.BROKER: f"broker {self.broker_id}",
        }[self.target or Target.BROKER]
        if self.kind is FaultKind.ONE_WAY_CUT:
            who = f"broker {self.broker_id} -> {who}"
        text = f"{self.at_s:.1f}s {self.kind} {who} for {self.duration_s:.1f}s"
        if self.tear is not None:
            text += f" ({self.tear.mode} {self.tear.byte_count} bytes, partition {self.partition})"
        return text


@dataclass(frozen=True, slots=True)
class ScheduleSettings:
    brokers: int = 3
    partitions: int = 2
    window_s: float = 8.0
    session_timeout_s: float = 3.0
    min_faults: int = 2
    max_faults: int = 5
    netns: bool = False  # separate hosts: network partitions mixed in
    transactions: bool = False  # transactional producers and read_committed readers too


@dataclass(frozen=True, slots=True)
class Schedule:
    seed: int
    faults: tuple[Fault, ...]

    @property
    def ends_at_s(self) -> float:
        return max((f.ends_at_s for f in self.faults), default=0.0)

    def describe(self) -> list[str]:
        return [fault.describe() for fault in self.faults]


# What `run.py --netns` runs: on separate hosts a schedule is longer and busier, so that
# partitions meet each other and the other faults (about 30 s a schedule).
NETNS_SETTINGS = ScheduleSettings(window_s=20.0, min_faults=3, max_faults=8, netns=True)

KIND_WEIGHTS = {
    FaultKind.KILL: 35,
    FaultKind.PAUSE: 25,
    FaultKind.TORN_TAIL: 25,
    FaultKind.ZOOKEEPER_RESTART: 15,
}
# On separate hosts, partitions take about half the draws.
NETNS_KIND_WEIGHTS = {
    FaultKind.KILL: 16,
    FaultKind.PAUSE: 12,
    FaultKind.TORN_TAIL: 12,
    FaultKind.ZOOKEEPER_RESTART: 8,
    FaultKind.ISOLATE: 12,
    FaultKind.ZOOKEEPER_CUT: 12,
    FaultKind.CONTROLLER_CUT: 10,
    FaultKind.ONE_WAY_CUT: 10,
    FaultKind.CLIENTS_CUT: 8,
}
# Who a partition strikes: the kinds that name their own role are absent.
TARGET_WEIGHTS = {Target.LEADER: 40, Target.CONTROLLER: 25, Target.BROKER: 35}
EARLIEST_FAULT_S = 0.5
# Draws of a start time before a fault that fits nowhere is given up.
PLACEMENT_ATTEMPTS = 20
MAX_TEAR_BYTES = 300
BROKER_START_S = 1.0
ZOOKEEPER_START_S = 3.0
CATCH_UP_S = 2.0


def generate(seed: int, settings: ScheduleSettings | None = None) -> Schedule:
    """The schedule of `seed`: between min_faults and max_faults faults that fit the limits."""
    settings = settings or ScheduleSettings()
    rng = random.Random(seed)
    placed: list[Fault] = []
    kind_weights = NETNS_KIND_WEIGHTS if settings.netns else KIND_WEIGHTS
    for _ in range(rng.randint(settings.min_faults, settings.max_faults)):
        kind = _weighted(rng, kind_weights)
        for _ in range(PLACEMENT_ATTEMPTS):
            fault = _draw(rng, kind, settings)
            if fits(fault, placed, settings):
                placed.append(fault)
                break
    return Schedule(seed, tuple(sorted(placed, key=lambda f: f.at_s)))


def fits(fault: Fault, placed: list[Fault], settings: ScheduleSettings) -> bool:
    """Whether `fault` may join `placed` within the limits the module docstring names."""
    overlapping = [other for other in placed if other.overlaps(fault)]
    if any(FaultKind.TORN_TAIL in (f.kind, fault.kind) for f in overlapping):
        return False
    if not fault.on_broker:
        return all(other.on_broker for other in overlapping)
    return _most_brokers_at_once([*overlapping, fault]) < settings.brokers


def _most_brokers_at_once(faults: list[Fault]) -> int:
    broker_faults = [f for f in faults if f.on_broker]
    return max(
        (
            sum(1 for other in broker_faults if other.at_s <= f.at_s < other.settled_s)
            for f in broker_faults
        ),
        default=0,
    )


def _draw(rng: random.Random, kind: FaultKind, settings: ScheduleSettings) -> Fault:
    at_s = round(rng.uniform(EARLIEST_FAULT_S, settings.window_s), 2)
    if kind is FaultKind.ZOOKEEPER_RESTART:
        duration_s = round(rng.uniform(0.3, 2.5), 2)
        return Fault(at_s, kind, duration_s, settled_s=settled_at(kind, at_s, duration_s, settings))
    if kind is FaultKind.PAUSE:
        duration_s = settings.session_timeout_s * rng.uniform(1.15, 1.6)
    elif kind in NETWORK_KINDS:
        # Shorter and longer than a session: a cut heals before or after it expires.
        duration_s = settings.session_timeout_s * rng.uniform(0.4, 2.0)
    else:
        duration_s = rng.uniform(0.2, 3.0)
    target = _weighted(rng, TARGET_WEIGHTS)
    if kind is FaultKind.CONTROLLER_CUT:
        target = Target.CONTROLLER
    elif kind is FaultKind.ONE_WAY_CUT:
        target = Target.LEADER
    broker_id = rng.randint(1, settings.brokers)
    partition = rng.randrange(settings.partitions)
    tear = None
    if kind is FaultKind.TORN_TAIL:
        tear = Tear(rng.choice(list(TearMode)), rng.randint(1, MAX_TEAR_BYTES))
    duration_s = round(duration_s, 2)
    settled_s = settled_at(kind, at_s, duration_s, settings)
    return Fault(at_s, kind, duration_s, target, broker_id, partition, tear, settled_s)


def settled_at(
    kind: FaultKind, at_s: float, duration_s: float, settings: ScheduleSettings
) -> float:
    """When a fault's effects are over, as far as the limits go.

    A killed broker comes back only once its old session has expired; a restarted
    ZooKeeper is a JVM that takes seconds to start; a broker whose tail was torn has to
    fetch again what it lost before the next fault may strike; a healed broker may have
    to register again and catch up with what it missed.
    """
    ends_at_s = at_s + duration_s
    if kind is FaultKind.ZOOKEEPER_RESTART:
        return ends_at_s + ZOOKEEPER_START_S
    if kind is FaultKind.PAUSE:
        return ends_at_s
    if kind in NETWORK_KINDS:
        return ends_at_s + BROKER_START_S + CATCH_UP_S
    back_at_s = at_s + max(duration_s, settings.session_timeout_s) + BROKER_START_S
    if kind is FaultKind.TORN_TAIL:
        back_at_s += CATCH_UP_S
    return back_at_s


def _weighted(rng: random.Random, weights: dict[T, int]) -> T:
    return rng.choices(list(weights), weights=list(weights.values()))[0]
