"""Running a benchmark script the way its smoke test needs: as its own process, bounded.

Each script under benchmarks/ starts what it measures (ZooKeeper, brokers) and stops it on
SIGTERM, then prints one JSON line of figures. A run past its deadline is sent SIGTERM by
its PID, so that nothing it started outlives the test, and killed only if it does not stop.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
BENCHMARKS = REPOSITORY / "benchmarks"
RUN_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0


def run_benchmark(
    script: str, *args: str, timeout_s: float = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run benchmarks/`script` with `args` on this interpreter and this checkout's code."""
    process = subprocess.Popen(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        raise AssertionError(f"{script} did not finish within {timeout_s} s") from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def benchmark_figures(script: str, *args: str) -> dict[str, Any]:
    """The one JSON line a successful run of benchmarks/`script` prints."""
    result = run_benchmark(script, *args)
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    figures: dict[str, Any] = json.loads(line)
    return figures
