"""benchmarks/compaction.py runs end to end on a small dirty log: its one JSON line is
what the cleaner's speed and its cost to producers are read from, so it must keep working.

The script starts its own ZooKeeper and broker and stops them on SIGTERM; a run past its
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
SCRIPT = REPOSITORY / "benchmarks" / "compaction.py"
RUN_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
DIRTY_MB = 20
KEYS = 1_000


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
def test_prints_one_line_of_cleaner_speed_and_produce_ratio() -> None:
    result = run_benchmark(
        "--dirty-mb", str(DIRTY_MB), "--keys", str(KEYS), "--produce-seconds", "0.5"
    )
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    figures = json.loads(line)
    assert figures["bench"] == "compaction"
    assert figures["keys"] == KEYS
    assert 0 < figures["cleaned_bytes"] < figures["dirty_bytes"] / 10, "the log was cleaned"
    expected = figures["dirty_bytes"] / 1e6 / figures["cleaning_s"]
    assert figures["cleaner_mb_per_s"] == pytest.approx(expected, rel=0.01, abs=0.1)
    ratio = figures["produce_mb_per_s_while_cleaning"] / figures["produce_mb_per_s_without"]
    assert figures["produce_ratio_while_cleaning"] == pytest.approx(ratio, rel=0.05)
    assert {"load_avg_before", "load_avg_after", "broker_cpu_s_while_cleaning"} <= figures.keys()


def test_refuses_a_key_count_that_is_not_positive() -> None:
    result = run_benchmark("--keys", "0")
    assert result.returncode == 2
    assert "argument --keys: must be positive" in result.stderr
