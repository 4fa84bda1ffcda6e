"""The examples/ pipelines, run against the shared cluster in the shared SparkSession.

Each example's functions take the session, so the test runs exactly the code that
spark-submit runs, without a second JVM.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

from tests.spark.conftest import StoredRecord, TopicTools
from tests.support import BrokerFactory

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def examples() -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import avro_round_trip
        import export_to_parquet
        import streaming_etl

        yield {
            "etl": streaming_etl,
            "export": export_to_parquet,
            "avro": avro_round_trip,
        }
    finally:
        sys.path.remove(str(EXAMPLES))


def test_streaming_etl_cleans_events_and_resumes_without_duplicates(
    spark: SparkSession,
    examples: dict[str, ModuleType],
    topics: TopicTools,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    stored_records,
    topic_name: str,
    tmp_path: Path,
) -> None:
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    topics.create(source, 2)
    topics.create(sink, 2)
    etl = examples["etl"]
    args = etl.parse_args(
        ["--bootstrap", bootstrap_servers, "--source", source, "--sink", sink,
         "--checkpoint", str(tmp_path / "checkpoint"), "--available-now"]
    )  # fmt: skip
    events = [
        '{"user": "ann", "amount": 12.345}',
        '{"user": "bob", "amount": -1}',
        "not json",
        '{"user": "cy", "amount": 3}',
    ]
    topics.produce(source, events)
    etl.start(spark, args).awaitTermination(120)
    topics.produce(source, ['{"user": "dee", "amount": 7.5}'])
    etl.start(spark, args).awaitTermination(120)  # resumes from the checkpoint
    records: list[StoredRecord] = stored_records(spark_cluster.bootstrap, sink)
    written = sorted((r.key, json.loads(r.value)) for r in records)
    assert written == [
        (b"ann", {"user": "ann", "amount": 12.35}),
        (b"cy", {"user": "cy", "amount": 3.0}),
        (b"dee", {"user": "dee", "amount": 7.5}),
    ]


def test_export_to_parquet_writes_every_record(
    spark: SparkSession,
    examples: dict[str, ModuleType],
    topics: TopicTools,
    bootstrap_servers: str,
    topic_name: str,
    tmp_path: Path,
) -> None:
    topics.create(topic_name, 3)
    topics.produce(topic_name, [f"v{i}" for i in range(300)], keys=[f"k{i}" for i in range(300)])
    export = examples["export"]
    output = tmp_path / "parquet"
    args = export.parse_args(
        ["--bootstrap", bootstrap_servers, "--topic", topic_name, "--output", str(output)]
    )
    assert export.export(spark, args) == 300
    rows = spark.read.parquet(str(output)).select("key", "value").collect()
    assert sorted((r["key"], r["value"]) for r in rows) == sorted(
        (f"k{i}", f"v{i}") for i in range(300)
    )


def test_avro_round_trip_reads_back_the_orders_it_wrote(
    spark: SparkSession,
    examples: dict[str, ModuleType],
    topics: TopicTools,
    bootstrap_servers: str,
    topic_name: str,
) -> None:
    topics.create(topic_name, 3)
    avro = examples["avro"]
    args = avro.parse_args(
        ["--bootstrap", bootstrap_servers, "--topic", topic_name, "--count", "50"]
    )
    avro.write_orders(spark, args)
    orders = avro.read_orders(spark, args).orderBy("id").collect()
    assert [o["id"] for o in orders] == list(range(50))
    assert orders[3]["item"] == "item-3" and orders[3]["quantity"] == 4
    assert orders[2]["note"] == "gift" and orders[3]["note"] is None
