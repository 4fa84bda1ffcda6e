"""benchmarks/offset_commits.py runs end to end on a small workload: its one JSON line
is the baseline the offsets topic is measured against, so it must keep working.

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
SCRIPT = REPOSITORY / "benchmarks" / "offset_commits.py"
RUN_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
GROUPS = 3
PARTITIONS = 4


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
def test_prints_one_line_of_commit_rates() -> None:
    result = run_benchmark(
        "--groups", str(GROUPS), "--partitions", str(PARTITIONS), "--seconds", "1"
    )
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    figures = json.loads(line)
    assert figures["bench"] == "offset_commits"
    assert figures["store"] in {"zookeeper", "offsets_topic"}
    assert (figures["groups"], figures["partitions"]) == (GROUPS, PARTITIONS)
    assert figures["commits"] > 0
    expected = figures["commits"] / figures["seconds"] * PARTITIONS
    assert figures["partition_offsets_per_s"] == pytest.approx(expected, rel=0.01)
    assert {"load_avg_before", "load_avg_after", "broker_cpu_s"} <= figures.keys()


def test_refuses_a_broker_config_without_a_value() -> None:
    result = run_benchmark("--broker-config", "offsets.topic.num.partitions")
    assert result.returncode == 2
    assert "not KEY=VALUE" in result.stderr
