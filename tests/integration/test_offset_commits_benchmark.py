"""benchmarks/offset_commits.py runs end to end on a small workload: its one JSON line
is the baseline the offsets topic is measured against, so it must keep working
(tests/support_bench.py runs it, bounded).
"""

from __future__ import annotations

import pytest

from tests.support_bench import benchmark_figures, run_benchmark

SCRIPT = "offset_commits.py"
GROUPS = 3
PARTITIONS = 4


@pytest.mark.slow
def test_prints_one_line_of_commit_rates() -> None:
    figures = benchmark_figures(
        SCRIPT, "--groups", str(GROUPS), "--partitions", str(PARTITIONS), "--seconds", "1"
    )
    assert figures["bench"] == "offset_commits"
    assert figures["store"] in {"zookeeper", "offsets_topic"}
    assert (figures["groups"], figures["partitions"]) == (GROUPS, PARTITIONS)
    assert figures["commits"] > 0
    expected = figures["commits"] / figures["seconds"] * PARTITIONS
    assert figures["partition_offsets_per_s"] == pytest.approx(expected, rel=0.01)
    assert {"load_avg_before", "load_avg_after", "broker_cpu_s"} <= figures.keys()


def test_refuses_a_broker_config_without_a_value() -> None:
    result = run_benchmark(SCRIPT, "--broker-config", "offsets.topic.num.partitions")
    assert result.returncode == 2
    assert "not KEY=VALUE" in result.stderr
