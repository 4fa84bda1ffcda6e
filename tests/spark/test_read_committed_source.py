"""The Spark source under kafka.isolation.level, on a real broker whose log holds
committed, aborted and open transactions (written into the stopped broker's log through
the log's own classes, as tests/kafka/test_read_committed.py does until a coordinator
can write them).

read_committed: a batch read and an AvailableNow stream read only the committed records,
up to the last stable offset, at their log offsets, with failOnDataLoss on and ranges
small enough (minPartitions) that some lie wholly on markers or aborted records.
read_uncommitted: every data record up to the HW. Markers are never rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.kafka.test_read_committed import transactions, write_offline
from tests.spark.test_read_stream import Collector, run_available_now, start_stream
from tests.support import consume_all, create_topic, module_brokers, run

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC = "transactions"
# (offset, value) of tests/kafka/test_read_committed.py's transactions; the LSO is 9.
COMMITTED = [
    (0, b"plain-0"),
    (1, b"plain-1"),
    (2, b"committed-0"),
    (5, b"committed-1"),
    (7, b"plain-2"),
]
EVERY_RECORD = [
    (0, b"plain-0"),
    (1, b"plain-1"),
    (2, b"committed-0"),
    (3, b"aborted-0"),
    (4, b"aborted-1"),
    (5, b"committed-1"),
    (7, b"plain-2"),
    (9, b"open-0"),
    (10, b"plain-3"),
]


@pytest.fixture(scope="module")
def servers(zookeeper: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with module_brokers(
        zookeeper.connect_string,  # type: ignore[attr-defined]
        tmp_path_factory.mktemp("spark-read-committed"),
    ) as brokers:
        run(create_topic(brokers.bootstrap, TOPIC))
        broker = brokers.brokers[1]
        broker.kill()
        write_offline(broker.log_dir / f"{TOPIC}-0", transactions)
        broker.start()
        run(consume_all(brokers.bootstrap, TOPIC, len(EVERY_RECORD)))  # served again
        yield broker.address


@pytest.mark.parametrize(
    ("isolation", "expected"),
    [("read_committed", COMMITTED), ("read_uncommitted", EVERY_RECORD)],
)
def test_a_batch_read_honours_the_isolation_level(
    spark: SparkSession, servers: str, isolation: str, expected: list[tuple[int, bytes]]
) -> None:
    frame = (
        spark.read.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("subscribe", TOPIC)
        .option("kafka.isolation.level", isolation)
        .option("failOnDataLoss", "true")
        .option("minPartitions", "6")
        .load()
    )
    rows = frame.select("offset", "value").orderBy("offset").collect()
    assert [(row["offset"], bytes(row["value"])) for row in rows] == expected


def test_an_available_now_stream_stops_at_the_last_stable_offset(
    spark: SparkSession, servers: str, tmp_path: Path
) -> None:
    sink = Collector()
    query = start_stream(
        spark,
        servers,
        tmp_path / "checkpoint",
        sink,
        available_now=True,
        subscribe=TOPIC,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="3",
        **{"kafka.isolation.level": "read_committed"},
    )
    run_available_now(query)
    assert [(offset, value) for _, _, offset, value in sink.rows] == COMMITTED
