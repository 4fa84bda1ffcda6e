"""The chaos schedule generator: seeded, and within its limits for every seed."""

from __future__ import annotations

from tests.chaos.schedule import (
    EARLIEST_FAULT_S,
    Fault,
    FaultKind,
    ScheduleSettings,
    Target,
    generate,
)

SEEDS = range(300)
SETTINGS = ScheduleSettings()


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert generate(42) == generate(42)
    assert generate(42, SETTINGS) == generate(42)
    assert len({generate(seed).faults for seed in range(20)}) == 20


def test_every_schedule_keeps_the_limits() -> None:
    for seed in SEEDS:
        faults = generate(seed).faults
        assert 1 <= len(faults) <= SETTINGS.max_faults, seed
        assert list(faults) == sorted(faults, key=lambda f: f.at_s)
        for fault in faults:
            assert EARLIEST_FAULT_S <= fault.at_s <= SETTINGS.window_s
            assert fault.duration_s > 0
            assert 1 <= fault.broker_id <= SETTINGS.brokers or not fault.on_broker
            assert 0 <= fault.partition < SETTINGS.partitions
            assert (fault.tear is not None) == (fault.kind is FaultKind.TORN_TAIL)
            assert (fault.target is None) == (fault.kind is FaultKind.ZOOKEEPER_RESTART)
        for t in {f.at_s for f in faults}:
            active = [f for f in faults if f.at_s <= t < f.settled_s]
            assert sum(1 for f in active if f.on_broker) < SETTINGS.brokers, seed
            assert sum(1 for f in active if f.kind is FaultKind.ZOOKEEPER_RESTART) <= 1
            if any(f.kind is FaultKind.TORN_TAIL for f in active):
                assert len(active) == 1, seed


def test_a_fault_settles_after_it_is_undone() -> None:
    for seed in SEEDS:
        for fault in generate(seed).faults:
            assert fault.settled_s >= fault.ends_at_s
            if fault.kind in (FaultKind.KILL, FaultKind.TORN_TAIL):
                assert fault.settled_s > fault.at_s + SETTINGS.session_timeout_s


def test_pauses_outlast_the_session_timeout() -> None:
    pauses = [f for seed in SEEDS for f in generate(seed).faults if f.kind is FaultKind.PAUSE]
    assert pauses
    assert all(f.duration_s > SETTINGS.session_timeout_s for f in pauses)


def test_every_kind_and_target_comes_up() -> None:
    faults: list[Fault] = [f for seed in SEEDS for f in generate(seed).faults]
    assert {f.kind for f in faults} == set(FaultKind)
    assert {f.target for f in faults if f.target is not None} == set(Target)
    assert {f.tear.mode for f in faults if f.tear is not None} == {"truncate", "garbage"}


def test_a_schedule_describes_itself_for_a_replay() -> None:
    schedule = generate(7)
    lines = schedule.describe()
    assert len(lines) == len(schedule.faults)
    assert all(line.split("s ", 1)[0].replace(".", "").isdigit() for line in lines)
