"""Crashed brokers are failed over at once; paused ones only when their session times out.

The brokers here run with ZooKeeper session timeouts far longer than the deadlines the
tests wait: a killed broker whose partitions move within those deadlines was noticed by
its refused connections, not by its session. A paused (SIGSTOPped) broker still accepts
connections, so nothing but its session timing out may move its partitions.
"""

from __future__ import annotations

import time

import pytest

from tests.support import BrokerFactory, controller_of, create, leadership, run, start_cluster

pytestmark = pytest.mark.slow

TOPIC = "crash"
PARTITIONS = 3
LONG_SESSION_MS = 30_000
# Far below LONG_SESSION_MS, and generous for a busy 2-core machine.
FAST_FAILOVER_DEADLINE_S = 10.0
PAUSE_SESSION_MS = 6_000
# Most of PAUSE_SESSION_MS: a paused broker's partitions must keep their leader this long.
PAUSED_HOLD_S = 4.0
POLL_S = 0.1


def current_controller(brokers: BrokerFactory) -> int:
    return controller_of(brokers.zk_connect)


def survivors(brokers: BrokerFactory, victim: int) -> list[tuple[str, int]]:
    return [(b.host, b.port) for i, b in brokers.brokers.items() if i != victim]


def leaders(bootstrap: list[tuple[str, int]]) -> list[int]:
    return [p["leader"] for p in run(leadership(bootstrap, TOPIC), timeout_s=15)]


def wait_for_leaders_other_than(
    brokers: BrokerFactory, victim: int, deadline_s: float
) -> tuple[float, list[int]]:
    """Seconds until every partition is led by a broker other than `victim`, and the
    leaders, as the other brokers' metadata says (polled from now)."""
    started = time.monotonic()
    seen: list[int] = []
    while time.monotonic() - started < deadline_s:
        seen = leaders(survivors(brokers, victim))
        if all(leader not in (victim, -1) for leader in seen):
            return time.monotonic() - started, seen
        time.sleep(POLL_S)
    raise AssertionError(f"leaders still {seen} {deadline_s:.0f} s after broker {victim} went")


def start_with_topic(brokers: BrokerFactory, session_ms: int) -> list[int]:
    """Three brokers, a topic with one partition led by each; its leaders."""
    start_cluster(brokers, **{"zookeeper.session.timeout.ms": str(session_ms)})
    run(create(brokers.bootstrap, TOPIC, partitions=PARTITIONS, rf=3))
    started = time.monotonic()
    while True:
        found = leaders(brokers.bootstrap)
        if sorted(found) == [1, 2, 3]:
            return found
        assert time.monotonic() - started < 30, f"leaders never spread out: {found}"
        time.sleep(POLL_S)


@pytest.mark.parametrize("role", ["leader", "controller"])
def test_killed_broker_is_failed_over_well_before_its_session_times_out(
    brokers: BrokerFactory, role: str
) -> None:
    start_with_topic(brokers, LONG_SESSION_MS)
    controller = current_controller(brokers)
    victim = controller if role == "controller" else next(b for b in (1, 2, 3) if b != controller)
    brokers.brokers[victim].kill()

    _, new_leaders = wait_for_leaders_other_than(brokers, victim, FAST_FAILOVER_DEADLINE_S)

    assert all(leader != victim for leader in new_leaders)
    if role == "controller":
        assert current_controller(brokers) != victim


@pytest.mark.parametrize("role", ["leader", "controller"])
def test_paused_broker_is_failed_over_only_when_its_session_times_out(
    brokers: BrokerFactory, role: str
) -> None:
    before = start_with_topic(brokers, PAUSE_SESSION_MS)
    controller = current_controller(brokers)
    victim = controller if role == "controller" else next(b for b in (1, 2, 3) if b != controller)
    paused = brokers.brokers[victim]
    paused.pause()
    try:
        held_until = time.monotonic() + PAUSED_HOLD_S
        while time.monotonic() < held_until:
            assert leaders(survivors(brokers, victim)) == before
            time.sleep(POLL_S)

        wait_for_leaders_other_than(brokers, victim, PAUSE_SESSION_MS / 1000 + 20)
    finally:
        paused.resume()
    paused.stop()


def test_new_controller_takes_its_killed_predecessor_out_of_every_isr(
    brokers: BrokerFactory,
) -> None:
    """The killed controller also followed the partitions other brokers lead. Its
    successor finds it dead before its session expires and must take it out of those
    ISRs too, at once: acks=all writes would otherwise wait for the leaders' own lag
    check (replica.lag.time.max.ms, as long as the session here)."""
    slow = str(LONG_SESSION_MS)
    start_cluster(
        brokers, **{"zookeeper.session.timeout.ms": slow, "replica.lag.time.max.ms": slow}
    )
    run(create(brokers.bootstrap, TOPIC, partitions=PARTITIONS, rf=3))
    victim = current_controller(brokers)
    brokers.brokers[victim].kill()

    started = time.monotonic()
    states: list[tuple[object, object]] = []
    while time.monotonic() - started < FAST_FAILOVER_DEADLINE_S:
        partitions = run(leadership(survivors(brokers, victim), TOPIC), timeout_s=15)
        states = [(p["leader"], p["isr"]) for p in partitions]
        if all(leader != victim and victim not in isr for leader, isr in states):  # type: ignore[operator]
            return
        time.sleep(POLL_S)
    raise AssertionError(f"(leader, ISR) still {states} {FAST_FAILOVER_DEADLINE_S:.0f} s later")
