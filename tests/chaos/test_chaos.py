"""Two short chaos schedules against real brokers: nothing acknowledged is lost,
duplicated or reordered, and no reader sees a record that later disappears.

The goal run is longer (`tests/chaos/run.py --schedules 100`); these two keep the
harness itself working and catch the grossest regressions. A failure names the seed to
replay with `tests/chaos/run.py --seed <seed> --schedules 1 --verbose`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.runner import run_schedules
from tests.chaos.schedule import ScheduleSettings

pytestmark = pytest.mark.slow

# Seeds 23 and 24 of these settings: ZooKeeper restarts, then a leader is paused past its
# session; then a leader is killed and the tail of its segment torn before it restarts.
FIRST_SEED = 23
SHORT = ScheduleSettings(window_s=4.0, min_faults=2, max_faults=2)


def test_two_short_schedules_keep_every_promise(tmp_path: Path) -> None:
    summary = run_schedules(FIRST_SEED, 2, tmp_path, SHORT)
    line = summary.as_json()
    assert line["schedules"] == 2
    assert line["acknowledged"] > 0, line
    for name in (
        "lost",
        "duplicated",
        "reordered",
        "phantom_reads",
        "misplaced",
        "replicas_diverged",
        "unhealed",
        "hung_brokers",
        "errors",
    ):
        assert line[name] == 0, (name, line)
    assert line["problem_seeds"] == []
