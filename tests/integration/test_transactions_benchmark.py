"""benchmarks/transactions.py runs end to end on a tiny workload: its one JSON line is how
transactional produce and read_committed consume are compared with their plain
counterparts, so it must keep working, and every record it counts must have been read
back under both isolation levels (the script fails otherwise).

The script starts its own ZooKeeper and brokers and stops them on SIGTERM
(tests/support_bench.py runs it, bounded).
"""

from __future__ import annotations

import pytest

from tests.support_bench import benchmark_figures

RECORDS = 3000


@pytest.mark.slow
def test_prints_one_line_of_both_ratios() -> None:
    figures = benchmark_figures(
        "transactions.py", "--records", str(RECORDS), "--rounds", "1", "--transaction-ms", "20"
    )
    assert figures["bench"] == "transactions"
    assert figures["transactions"] >= 1
    for key in (
        "idempotent_records_per_s",
        "transactional_records_per_s",
        "read_uncommitted_records_per_s",
        "read_committed_records_per_s",
    ):
        assert figures[key] > 0, key
    assert figures["produce_ratio"] > 0 and figures["consume_ratio"] > 0
    assert set(figures["broker_cpu_s"]) == {
        "idempotent",
        "transactional",
        "read_uncommitted",
        "read_committed",
    }
