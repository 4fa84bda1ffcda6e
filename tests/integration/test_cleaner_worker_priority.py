"""The cleaner's worker processes run at a lower priority than their broker, so that on
a machine with few cores a cleaning leaves the CPU to the event loop that serves
producers (benchmarks/compaction.py measures what that is worth)."""

from __future__ import annotations

import os

import pytest

from brokerd.log.cleaner_worker import CLEANER_NICENESS, cleaner_pool

pytestmark = pytest.mark.slow

MAX_NICENESS = 19


def test_a_cleaner_worker_is_nicer_than_the_process_that_started_it() -> None:
    pool, _ = cleaner_pool(1)
    try:
        worker_niceness = pool.submit(os.nice, 0).result(timeout=60)
    finally:
        pool.shutdown(wait=True)
    assert worker_niceness == min(os.nice(0) + CLEANER_NICENESS, MAX_NICENESS)
