"""spark.read.format("replog") after DeleteRecords moved a log start into the middle of a
batch, which retention never does: "earliest" starts there, and a range planned from
below it fails with failOnDataLoss or skips to it, as Kafka's source does."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.sql import DataFrame, SparkSession

from connectors.spark.offsets import DataLossError
from connectors.spark.partition_reader import RangePartition, read_range
from spark_replica.client import Admin, Cluster
from spark_replica.topics import TopicPartition
from tests.spark.conftest import TopicTools
from tests.support import run

pytestmark = [pytest.mark.spark, pytest.mark.slow]

RECORDS = 40
BATCH = 4
NEW_START = 6  # inside the batch of offsets 4..7


def read(spark: SparkSession, servers: str, **options: str) -> DataFrame:
    reader = spark.read.format("replog").option("replog.bootstrap.servers", servers)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_reads_start_at_the_deleted_records_start(
    spark: SparkSession, topics: TopicTools, bootstrap_servers: str, topic_name: str
) -> None:
    topics.create(topic_name, 1)
    for first in range(0, RECORDS, BATCH):
        topics.produce(topic_name, [f"v{i}" for i in range(first, first + BATCH)], partition=0)

    async def delete() -> object:
        cluster = Cluster(topics.bootstrap)
        try:
            return await Admin(cluster).delete_records({TopicPartition(topic_name, 0): NEW_START})
        finally:
            await cluster.close()

    assert run(delete()) == {TopicPartition(topic_name, 0): NEW_START}
    kept = list(range(NEW_START, RECORDS))

    earliest = read(spark, bootstrap_servers, subscribe=topic_name)
    assert [r.offset for r in earliest.orderBy("offset").collect()] == kept

    from_zero = f'{{"{topic_name}": {{"0": 0}}}}'
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, bootstrap_servers, subscribe=topic_name, startingOffsets=from_zero).collect()

    planned = RangePartition(topic_name, 0, 0, RECORDS, bootstrap_servers, False, True, 10_000)
    with pytest.raises(DataLossError, match=f"offsets 0..{NEW_START - 1} were deleted"):
        list(read_range(planned))
    skipping = replace(planned, fail_on_data_loss=False)
    offsets = [o for batch in read_range(skipping) for o in batch.column("offset").to_pylist()]
    assert offsets == kept
