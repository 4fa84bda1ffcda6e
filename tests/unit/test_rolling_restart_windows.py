"""benchmarks/rolling_restart_groups.py gives each broker's restart the rebalances from its
stop to the next broker's stop: a rebalance must land in exactly one window, or none."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from rolling_restart_groups import count_in_windows


def test_each_time_lands_in_the_window_it_falls_in() -> None:
    times = [12.0, 10.0, 25.0, 20.0, 20.5, 31.0]
    assert count_in_windows(times, [10.0, 20.0, 30.0], end=40.0) == [2, 3, 1]


def test_times_before_the_first_stop_or_from_the_end_count_nowhere() -> None:
    assert count_in_windows([1.0, 9.9, 40.0, 41.0], [10.0, 20.0], end=40.0) == [0, 0]


def test_no_times_gives_zero_per_window() -> None:
    assert count_in_windows([], [1.0, 2.0, 3.0], end=4.0) == [0, 0, 0]
