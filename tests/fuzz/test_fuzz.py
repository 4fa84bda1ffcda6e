"""A short run of the protocol fuzzer against a live broker: no crash, no hang, bounded RSS.

The goal run (`python tests/fuzz/run.py --frames 1000000`) is the real claim; this keeps
the fuzzer itself working and catches a regression that shows within a few thousand
frames.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fuzz.cluster import FuzzCluster
from tests.fuzz.driver import FuzzSettings, fuzz

FRAMES = 20_000
# The first frames reach code paths (record validation, codecs, buffers) for the first
# time; a short run's growth is mostly that, and stays well under this.
MAX_RSS_GROWTH_MB = 80


@pytest.mark.slow
def test_fuzzed_frames_never_crash_or_hang_the_broker(zk_connect: str, tmp_path: Path) -> None:
    cluster = FuzzCluster(tmp_path, 1, zk_connect)
    try:
        cluster.setup()
        settings = FuzzSettings(FRAMES, seed=7, findings=tmp_path)
        result = asyncio.run(fuzz(cluster, settings))
    finally:
        cluster.close()
    assert result["frames"] == FRAMES
    assert result["broker_restarts"] == 0, result["findings"]
    assert result["stalls"] == 0, result["findings"]
    assert result["rss_growth_mb"] < MAX_RSS_GROWTH_MB, result
    assert result["answers_by_error"].get("UnknownServerError", 0) == 0, result
    assert result["connections"] > 100
