"""A Spark query reads a log whose offsets have gaps, as a compacted log has, with
failOnDataLoss on: every record that is there, at its own offset, and no data loss.

The gaps are made on a real broker's disk (tests/support_gaps.py); the batch read is
split into small ranges (minPartitions), so some tasks' ranges lie inside a gap or end
in one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support_gaps import (
    LOG_END,
    TOPIC,
    GappyBroker,
    kept_offsets,
    running_gappy_broker,
    value_at,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def gappy(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GappyBroker]:
    with running_gappy_broker(
        zookeeper.connect_string, tmp_path_factory.mktemp("spark-offset-gaps")
    ) as broker:
        yield broker


def test_a_batch_read_returns_every_kept_record_and_no_data_loss(
    spark: SparkSession, gappy: GappyBroker
) -> None:
    frame = (
        spark.read.format("replog")
        .option("replog.bootstrap.servers", gappy.address)
        .option("subscribe", TOPIC)
        .option("failOnDataLoss", "true")
        .option("minPartitions", str(LOG_END // 5))
        .load()
    )
    rows = frame.select("offset", "value").orderBy("offset").collect()
    got = [(row["offset"], bytes(row["value"])) for row in rows]
    assert got == [(o, value_at(o).encode()) for o in kept_offsets()]
