"""The chaos schedule generator: seeded, and within its limits for every seed."""

from __future__ import annotations

import pytest

from tests.chaos.schedule import (
    EARLIEST_FAULT_S,
    NETNS_SETTINGS,
    NETWORK_KINDS,
    Fault,
    FaultKind,
    ScheduleSettings,
    Target,
    generate,
)

SEEDS = range(300)
SETTINGS = ScheduleSettings()
NETNS = ScheduleSettings(netns=True)


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert generate(42) == generate(42)
    assert generate(42, SETTINGS) == generate(42)
    assert len({generate(seed).faults for seed in range(20)}) == 20


@pytest.mark.parametrize(
    "settings", [SETTINGS, NETNS, NETNS_SETTINGS], ids=["processes", "netns", "netns-run"]
)
def test_every_schedule_keeps_the_limits(settings: ScheduleSettings) -> None:
    for seed in SEEDS:
        faults = generate(seed, settings).faults
        assert 1 <= len(faults) <= settings.max_faults, seed
        assert list(faults) == sorted(faults, key=lambda f: f.at_s)
        for fault in faults:
            assert EARLIEST_FAULT_S <= fault.at_s <= settings.window_s
            assert fault.duration_s > 0
            assert 1 <= fault.broker_id <= settings.brokers or not fault.on_broker
            assert 0 <= fault.partition < settings.partitions
            assert (fault.tear is not None) == (fault.kind is FaultKind.TORN_TAIL)
            assert (fault.target is None) == (fault.kind is FaultKind.ZOOKEEPER_RESTART)
        for t in {f.at_s for f in faults}:
            active = [f for f in faults if f.at_s <= t < f.settled_s]
            assert sum(1 for f in active if f.on_broker) < settings.brokers, seed
            assert sum(1 for f in active if f.kind is FaultKind.ZOOKEEPER_RESTART) <= 1
            if any(f.kind is FaultKind.TORN_TAIL for f in active):
                assert len(active) == 1, seed


@pytest.mark.parametrize(
    "settings", [SETTINGS, NETNS, NETNS_SETTINGS], ids=["processes", "netns", "netns-run"]
)
def test_a_fault_settles_after_it_is_undone(settings: ScheduleSettings) -> None:
    for seed in SEEDS:
        for fault in generate(seed, settings).faults:
            assert fault.settled_s >= fault.ends_at_s
            if fault.on_network:
                assert fault.settled_s > fault.ends_at_s
            if fault.kind in (FaultKind.KILL, FaultKind.TORN_TAIL):
                assert fault.settled_s > fault.at_s + SETTINGS.session_timeout_s


def test_pauses_outlast_the_session_timeout() -> None:
    pauses = [f for seed in SEEDS for f in generate(seed).faults if f.kind is FaultKind.PAUSE]
    assert pauses
    assert all(f.duration_s > SETTINGS.session_timeout_s for f in pauses)


def test_every_kind_and_target_comes_up() -> None:
    faults: list[Fault] = [f for seed in SEEDS for f in generate(seed).faults]
    assert {f.kind for f in faults} == set(FaultKind) - NETWORK_KINDS
    assert {f.target for f in faults if f.target is not None} == set(Target)
    assert {f.tear.mode for f in faults if f.tear is not None} == {"truncate", "garbage"}


def test_on_separate_hosts_partitions_mix_with_every_other_fault() -> None:
    schedules = [generate(seed, NETNS).faults for seed in SEEDS]
    faults = [f for schedule in schedules for f in schedule]
    assert {f.kind for f in faults} == set(FaultKind)
    assert sum(f.on_network for f in faults) > len(faults) / 3
    assert any({f.on_network for f in schedule} == {True, False} for schedule in schedules), (
        "no schedule mixes a partition with a kill, pause, tear or restart"
    )
    for kind in NETWORK_KINDS:
        targets = {f.target for f in faults if f.kind is kind}
        if kind is FaultKind.CONTROLLER_CUT:
            assert targets == {Target.CONTROLLER}
        elif kind is FaultKind.ONE_WAY_CUT:
            assert targets == {Target.LEADER}
        else:
            assert targets == set(Target), kind


def test_partitions_heal_before_and_after_a_session_expires() -> None:
    cuts = [f for seed in SEEDS for f in generate(seed, NETNS).faults if f.on_network]
    assert any(f.duration_s < NETNS.session_timeout_s for f in cuts)
    assert any(f.duration_s > NETNS.session_timeout_s * 1.2 for f in cuts)


def test_without_netns_the_schedules_are_those_of_before() -> None:
    """Seeds named in tests and bug reports replay the same faults as they always did."""
    assert generate(23, ScheduleSettings(window_s=4.0, min_faults=2, max_faults=2)).describe() == [
        "0.8s zookeeper restart, down 1.6s",
        "2.4s pause leader of partition 0 for 3.6s",
    ]


def test_a_schedule_describes_itself_for_a_replay() -> None:
    for schedule in (generate(7), generate(7, NETNS)):
        lines = schedule.describe()
        assert len(lines) == len(schedule.faults)
        assert all(line.split("s ", 1)[0].replace(".", "").isdigit() for line in lines)
    one_way = next(
        f for seed in SEEDS for f in generate(seed, NETNS).faults if f.kind is FaultKind.ONE_WAY_CUT
    )
    assert f"broker {one_way.broker_id} -> leader of partition" in one_way.describe()
