"""benchmarks/compaction.py runs end to end on a small dirty log: its one JSON line is
what the cleaner's speed and its cost to producers are read from, so it must keep working
(tests/support_bench.py runs it, bounded).
"""

from __future__ import annotations

import pytest

from tests.support_bench import benchmark_figures, run_benchmark

SCRIPT = "compaction.py"
DIRTY_MB = 20
KEYS = 1_000


@pytest.mark.slow
def test_prints_one_line_of_cleaner_speed_and_produce_ratio() -> None:
    figures = benchmark_figures(
        SCRIPT, "--dirty-mb", str(DIRTY_MB), "--keys", str(KEYS), "--produce-seconds", "0.5"
    )
    assert figures["bench"] == "compaction"
    assert figures["keys"] == KEYS
    assert 0 < figures["cleaned_bytes"] < figures["dirty_bytes"] / 10, "the log was cleaned"
    expected = figures["dirty_bytes"] / 1e6 / figures["cleaning_s"]
    assert figures["cleaner_mb_per_s"] == pytest.approx(expected, rel=0.01, abs=0.1)
    ratio = figures["produce_mb_per_s_while_cleaning"] / figures["produce_mb_per_s_without"]
    assert figures["produce_ratio_while_cleaning"] == pytest.approx(ratio, rel=0.05)
    assert {"load_avg_before", "load_avg_after", "broker_cpu_s_while_cleaning"} <= figures.keys()


def test_refuses_a_key_count_that_is_not_positive() -> None:
    result = run_benchmark(SCRIPT, "--keys", "0")
    assert result.returncode == 2
    assert "argument --keys: must be positive" in result.stderr
