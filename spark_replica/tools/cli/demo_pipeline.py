"""The Spark half of `replog demo`: a structured-streaming job from one topic to another.

It is the pipeline a user would write: `readStream.format("replog")` with Kafka's option
names, a transformation, `writeStream.format("replog")` with a checkpoint, then a batch
`read.format("replog")` of the output to check it. Spark is imported here only, so the
rest of the CLI starts fast.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

QUERY_TIMEOUT_S = 300


@dataclass(frozen=True)
class PipelineResult:
    batches: list[int]  # input rows per micro-batch
    output_rows: int
    distinct_outputs: int
    per_partition: dict[int, int]
    sample: list[tuple[str, str]]
    seconds: float


def run_pipeline(
    servers: str,
    source: str,
    sink: str,
    checkpoint: Path,
    max_offsets_per_trigger: int,
) -> PipelineResult:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("replog-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        started = time.perf_counter()
        events = (
            spark.readStream.format("replog")
            .option("replog.bootstrap.servers", servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
            .load()
        )
        # The transformation: tag each event with where it came from, keep the key.
        enriched = events.select(
            F.col("key"),
            F.concat(
                F.upper(F.col("value").cast("string")),
                F.lit(" <- "),
                F.col("topic"),
                F.lit("/"),
                F.col("partition").cast("string"),
                F.lit("@"),
                F.col("offset").cast("string"),
            ).alias("value"),
        )
        query = (
            enriched.writeStream.format("replog")
            .option("replog.bootstrap.servers", servers)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        if not query.awaitTermination(QUERY_TIMEOUT_S):
            query.stop()
            raise TimeoutError(f"the streaming query did not finish in {QUERY_TIMEOUT_S} s")
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        seconds = time.perf_counter() - started
        written = (
            spark.read.format("replog")
            .option("replog.bootstrap.servers", servers)
            .option("subscribe", sink)
            .load()
            .select(F.col("key").cast("string"), F.col("value").cast("string"), "partition")
        )
        written.cache()
        per_partition = {
            row["partition"]: row["count"] for row in written.groupBy("partition").count().collect()
        }
        result = PipelineResult(
            batches=batches,
            output_rows=written.count(),
            distinct_outputs=written.select("value").distinct().count(),
            per_partition=dict(sorted(per_partition.items())),
            sample=[(r["key"], r["value"]) for r in written.orderBy("value").limit(3).collect()],
            seconds=seconds,
        )
        written.unpersist()
        return result
    finally:
        spark.stop()
