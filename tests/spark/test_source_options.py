"""Bad source options fail the query at planning, with a message that names the option."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize(
    ("options", "schema", "message"),
    [
        ({"subscribe": "a", "assign": '{"a": [0]}'}, None, "exactly one of assign, subscribe"),
        ({"subscribe": "a", "startingOffsets": "oldest"}, None, "startingOffsets='oldest'"),
        ({"subscribe": "a"}, "value STRING", "user-specified schema"),
    ],
)
def test_bad_batch_options_fail_naming_the_option(
    spark: SparkSession,
    bootstrap_servers: str,
    options: dict[str, str],
    schema: str | None,
    message: str,
) -> None:
    reader = spark.read.format("replog").option("replog.bootstrap.servers", bootstrap_servers)
    if schema is not None:
        reader = reader.schema(schema)
    with pytest.raises(Exception, match=message):
        reader.options(**options).load().collect()


def test_bad_stream_option_fails_the_query_naming_the_option(
    spark: SparkSession, bootstrap_servers: str, topic_name: str, tmp_path: Path
) -> None:
    with pytest.raises(Exception, match="maxOffsetsPerTrigger='0' must be a positive number"):
        query = (
            spark.readStream.format("replog")
            .option("replog.bootstrap.servers", bootstrap_servers)
            .option("subscribe", topic_name)
            .option("maxOffsetsPerTrigger", "0")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()
