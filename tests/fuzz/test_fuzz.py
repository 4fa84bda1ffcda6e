"""Short runs of the protocol fuzzer against a live broker: no crash, no hang, bounded RSS.

The goal runs (`python tests/fuzz/run.py --frames 1000000`, and with `--hostile` on each
listener) are the real claim; these keep the fuzzer itself working and catch a
regression that shows within a few thousand frames.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fuzz.cluster import FuzzCluster
from tests.fuzz.driver import FuzzSettings, fuzz
from tests.fuzz.login import KAFKA

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


HOSTILE_FRAMES = 3000
# Its lane's first six cases include every kind sent before login (see the lane's seed).
HOSTILE_SEED = 9
PRE_LOGIN_CASES = ("prelogin-null-topics", "prelogin-bomb", "oversized-sasl", "request-mid-login")
HOSTILE_MAX_RSS_GROWTH_MB = 200


@pytest.mark.slow
def test_hostile_cases_on_the_kafka_listener_before_and_after_login(
    zk_connect: str, tmp_path: Path
) -> None:
    """A short hostile run on a SASL cluster's Kafka listener: bombs, count lies, repeated
    partitions, lying sizes, slow senders and requests before login, while a logged-in
    confluent-kafka producer keeps producing. The broker neither dies nor hangs, closes
    every connection that sent a request before logging in, and the producer's records
    all get through."""
    cluster = FuzzCluster(tmp_path, 1, zk_connect, hostile=True, sasl=True, kafka_listener=True)
    try:
        cluster.setup()
        settings = FuzzSettings(
            HOSTILE_FRAMES,
            seed=HOSTILE_SEED,
            connections=32,
            findings=tmp_path,
            listener=KAFKA,
            hostile=True,
            baseline_s=2.0,
        )
        result = asyncio.run(fuzz(cluster, settings))
    finally:
        cluster.close()
    assert result["frames"] == HOSTILE_FRAMES
    assert result["crashes"] == 0, result["findings"]
    assert result["stalls"] == 0, result["findings"]
    assert result["logins"] > 0 and result["login_failures"] == 0, result
    assert set(result["hostile_cases"]) == {
        "count-lie-batch",
        "bomb",
        "repeated-partition",
        "count-lie-field",
        "size-lie",
    }
    well_behaved = result["well_behaved"]
    assert well_behaved["sent"] > 0 and well_behaved["failed"] == 0, well_behaved
    assert result["well_behaved_p99_ms"] is not None
    lane = result["slow_lane"]["by_case"]
    for name in PRE_LOGIN_CASES:
        assert lane[name]["finished"] > 0, lane
        assert lane[name]["closed_by_broker"] == lane[name]["finished"], lane
    assert result["rss_growth_mb"] < HOSTILE_MAX_RSS_GROWTH_MB, result
