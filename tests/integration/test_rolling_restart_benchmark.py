"""benchmarks/rolling_restart_groups.py runs end to end on a tiny workload: its one JSON
line is how the rebalances a rolling restart costs are compared between designs, so it
must keep working.

The script starts its own ZooKeeper and brokers and stops them on SIGTERM; a run past its
deadline is sent SIGTERM (by its PID) so that nothing it started is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
SCRIPT = REPOSITORY / "benchmarks" / "rolling_restart_groups.py"
RUN_TIMEOUT_S = 150.0
STOP_TIMEOUT_S = 30.0
GROUPS = 3
BROKERS = 3


def run_benchmark(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        cwd=REPOSITORY,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        raise AssertionError(f"the benchmark did not finish within {RUN_TIMEOUT_S} s") from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.mark.slow
def test_prints_one_line_of_rebalance_counts() -> None:
    result = run_benchmark(
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
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    figures = json.loads(line)
    assert figures["bench"] == "rolling_restart_groups"
    assert figures["store"] in {"zookeeper", "offsets_topic"}
    assert figures["groups"] == GROUPS
    assert figures["stop_exit_codes"] == [0] * BROKERS  # every stop was graceful
    assert len(figures["restart_s"]) == BROKERS
    per_restart = figures["rebalances_per_broker_restart"]
    assert len(per_restart) == BROKERS
    assert sum(per_restart) == figures["rebalances_total"]
    assert 0 <= figures["groups_rebalanced"] <= min(GROUPS, figures["rebalances_total"])
    assert 0 <= figures["groups_stable_at_end"] <= GROUPS
    assert figures["commits"] > 0
    assert figures["failed_commits"] >= 0 and figures["poll_errors"] >= 0
    assert figures["seconds"] > 0
    assert {"load_avg_before", "load_avg_after"} <= figures.keys()


def test_refuses_a_heartbeat_not_below_the_session_timeout() -> None:
    result = run_benchmark("--session-timeout-ms", "1000", "--heartbeat-interval-ms", "1000")
    assert result.returncode == 2
    assert "--heartbeat-interval-ms must be below --session-timeout-ms" in result.stderr
