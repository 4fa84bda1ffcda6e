"""benchmarks/rolling_restart_groups.py runs end to end on a tiny workload: its one JSON
line is how the rebalances a rolling restart costs are compared between designs, so it
must keep working.

The script starts its own ZooKeeper and brokers and stops them on SIGTERM
(tests/support_bench.py runs it, bounded).
"""

from __future__ import annotations

import pytest

from tests.support_bench import benchmark_figures, run_benchmark

SCRIPT = "rolling_restart_groups.py"
GROUPS = 3
BROKERS = 3


@pytest.mark.slow
def test_prints_one_line_of_rebalance_counts() -> None:
    figures = benchmark_figures(
        SCRIPT,
        "--groups",
        str(GROUPS),
        "--partitions",
        "2",
        "--session-timeout-ms",
        "6000",
        "--heartbeat-interval-ms",
        "500",
        "--settle-s",
        "2",
    )
    assert figures["bench"] == "rolling_restart_groups"
    assert figures["store"] in {"zookeeper", "offsets_topic"}
    assert figures["groups"] == GROUPS
    assert figures["stop_exit_codes"] == [0] * BROKERS  # every stop was graceful
    assert len(figures["restart_s"]) == BROKERS
    per_restart = figures["rebalances_per_broker_restart"]
    assert len(per_restart) == BROKERS
    assert sum(per_restart) == figures["rebalances_total"]
    assert 0 <= figures["groups_rebalanced"] <= min(GROUPS, figures["rebalances_total"])
    # Every group rides through the restarts: its coordinator moves with the leadership
    # of its offsets partition, and a heartbeat to a coordinator still loading it is
    # answered as Kafka does (no error), so no member's heartbeat dies of it.
    assert figures["groups_stable_at_end"] == GROUPS
    assert figures["poll_errors"] == 0
    assert figures["commits"] > 0
    assert figures["failed_commits"] >= 0
    assert figures["seconds"] > 0
    assert {"load_avg_before", "load_avg_after"} <= figures.keys()


def test_refuses_a_heartbeat_not_below_the_session_timeout() -> None:
    result = run_benchmark(
        SCRIPT, "--session-timeout-ms", "1000", "--heartbeat-interval-ms", "1000"
    )
    assert result.returncode == 2
    assert "--heartbeat-interval-ms must be below --session-timeout-ms" in result.stderr
