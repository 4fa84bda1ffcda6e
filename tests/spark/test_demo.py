"""The README's main job, `replog demo`, run as a user runs it (its own Spark and cluster)."""

from __future__ import annotations

import pytest

from tests.support import replog

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_streams_every_record_through_spark_exactly_once() -> None:
    result = replog("demo", "--records", "3000", "--batch", "1000", timeout_s=400)
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    assert "Streamed 3000 records in 3 micro-batches (1000, 1000, 1000 rows)" in out
    assert "Result: OK: each of the 3000 records went through Spark exactly once" in out
    assert "Stopped every process the demo started." in out
