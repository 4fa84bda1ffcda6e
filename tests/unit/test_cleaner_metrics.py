"""The cleaner's figures for its Kafka-named gauges, from plain values."""

from __future__ import annotations

import pytest

from brokerd.broker_gauges import cleaner_gauges
from brokerd.metrics.cleaner_figures import CleaningStats, cleaner_figures


def test_recopy_is_written_per_read_averaged_over_the_threads_last_cleanings() -> None:
    recent = [CleaningStats(1000, 250, 0.5, 0.3), CleaningStats(2000, 1500, 2.0, 0.1)]
    figures = cleaner_figures(recent, 0.4, last_run_ms=9_000, now_ms=10_000)
    assert figures.recopy_percent == pytest.approx((25.0 + 75.0) / 2)
    assert figures.max_clean_time_s == 2.0
    assert figures.max_buffer_utilization_percent == pytest.approx(30.0)
    assert figures.max_dirty_percent == pytest.approx(40.0)
    assert figures.time_since_last_run_ms == 1_000


def test_before_any_cleaning_the_figures_are_zero_and_time_still_runs() -> None:
    figures = cleaner_figures([], 0.0, last_run_ms=5_000, now_ms=65_000)
    assert (figures.recopy_percent, figures.max_clean_time_s) == (0.0, 0.0)
    assert figures.max_buffer_utilization_percent == 0.0
    assert figures.time_since_last_run_ms == 60_000
    assert CleaningStats(0, 0, 0.0, 0.0).recopy_percent == 0.0


def test_a_clock_step_back_never_gives_a_negative_time_since_the_last_run() -> None:
    assert cleaner_figures([], 0.0, last_run_ms=5_000, now_ms=4_000).time_since_last_run_ms == 0


def test_the_gauges_carry_kafkas_names() -> None:
    figures = cleaner_figures([CleaningStats(100, 10, 0.1, 0.5)], 1.0, 0, 0)
    served = {family.name: family.samples[0].value for family in cleaner_gauges(figures)}
    assert served == {
        "kafka_log_logcleanermanager_max_dirty_percent": 100.0,
        "kafka_log_logcleaner_cleaner_recopy_percent": pytest.approx(10.0),
        "kafka_log_logcleaner_max_clean_time_secs": 0.1,
        "kafka_log_logcleaner_time_since_last_run_ms": 0,
        "kafka_log_logcleaner_max_buffer_utilization_percent": 50.0,
    }
