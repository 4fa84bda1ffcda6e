"""The examples/ pipelines, run against the shared cluster in the shared SparkSession.

Each example's functions take the session, so the test runs exactly the code that
spark-submit runs, without a second JVM.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.spark.conftest import StoredRecord, TopicTools
from tests.support import BrokerFactory, replog_in_process
from tests.support_compaction import running_cleaner_broker

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def examples() -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import avro_round_trip
        import cdc_upsert
        import export_to_parquet
        import streaming_etl

        yield {
            "etl": streaming_etl,
            "export": export_to_parquet,
            "avro": avro_round_trip,
            "cdc": cdc_upsert,
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


CDC_CHANGES = 4_000
CDC_CUSTOMERS = 100
# Updates of one more customer, after the others' changes: enough bytes to seal the
# segments holding those, as the cleaner never touches the active segment.
CDC_SEALING_UPDATES = 2_000
# Changes per write: the batches of one produce must fit in a segment.
CDC_CHUNK = 1_000
CDC_SEGMENT_BYTES = 131_072
CDC_SEALING_ID = CDC_CUSTOMERS
CDC_CLEANED_TIMEOUT_S = 60.0
WRITE_TASKS = 2  # the session's spark.sql.shuffle.partitions, after the repartition by key


@pytest.fixture(scope="module")
def cleaner_broker(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """A broker of its own, whose cleaner looks for work every 200 ms."""
    with running_cleaner_broker(
        zookeeper.connect_string, tmp_path_factory.mktemp("cdc-cleaner")
    ) as broker:
        yield broker


def stored_per_key(spark: SparkSession, broker: BrokerProcess, topic: str) -> dict[str, int]:
    """How many records the topic holds for each key, tombstones included."""
    frame = (
        spark.read.format("replog")
        .option("replog.bootstrap.servers", broker.address)
        .option("subscribe", topic)
        .load()
    )
    counts = frame.groupBy(frame.key.cast("string").alias("key")).count().collect()
    return {row["key"]: row["count"] for row in counts}


def test_cdc_upsert_table_is_the_latest_row_per_key_before_and_after_cleaning(
    spark: SparkSession,
    examples: dict[str, ModuleType],
    topic_tools: type[TopicTools],
    cleaner_broker: BrokerProcess,
    topic_name: str,
    tmp_path: Path,
) -> None:
    cdc = examples["cdc"]
    # Nothing is cleanable until min.compaction.lag.ms is lowered below.
    topic_tools([(cleaner_broker.host, cleaner_broker.port)]).create(
        topic_name, 1,
        **{"cleanup.policy": "compact", "segment.bytes": str(CDC_SEGMENT_BYTES),
           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
           "min.compaction.lag.ms": "3600000"},
    )  # fmt: skip
    args = cdc.parse_args(
        ["--bootstrap", cleaner_broker.address, "--topic", topic_name,
         "--output", str(tmp_path / "customers")]
    )  # fmt: skip
    changes = cdc.demo_changes(CDC_CHANGES, CDC_CUSTOMERS)
    sealing = [
        (CDC_SEALING_ID, {"id": CDC_SEALING_ID, "name": f"update-{n}", "city": "Lyon"})
        for n in range(CDC_SEALING_UPDATES)
    ]
    stream = changes + sealing
    for start in range(0, len(stream), CDC_CHUNK):
        cdc.write_changes(spark, args, stream[start : start + CDC_CHUNK])
    latest = dict(stream)
    expected = sorted(
        (row["id"], row["name"], row["city"]) for row in latest.values() if row is not None
    )
    assert CDC_CUSTOMERS // 2 < len(expected) < CDC_CUSTOMERS, "some customers end deleted"

    def table() -> list[tuple[int, str, str]]:
        assert cdc.write_table(spark, args) == len(expected)
        rows = spark.read.parquet(args.output).collect()
        return sorted((row["id"], row["name"], row["city"]) for row in rows)

    stored = stored_per_key(spark, cleaner_broker, topic_name)
    assert sum(stored.values()) == len(stream), "not cleaned yet"
    assert table() == expected

    altered = replog_in_process(
        "configs", "alter", "--topic", topic_name, "--add-config", "min.compaction.lag.ms=0",
        "--zookeeper", cleaner_broker.zookeeper,
    )  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    live = {str(row["id"]) for row in latest.values() if row is not None} - {str(CDC_SEALING_ID)}
    deadline = time.monotonic() + CDC_CLEANED_TIMEOUT_S
    while True:
        stored = stored_per_key(spark, cleaner_broker, topic_name)
        stored.pop(str(CDC_SEALING_ID))
        # A producer's last record stays (brokerd/log/cleaner_plan.py, rule 6): the key
        # that ended a write task keeps one record per write, superseded or not.
        kept_more = {key for key, count in stored.items() if count > 1}
        gone = set(stored) - live <= kept_more
        if live <= set(stored) and gone and len(kept_more) <= WRITE_TASKS:
            break
        assert time.monotonic() < deadline, (
            f"not cleaned in {CDC_CLEANED_TIMEOUT_S} s: {sum(stored.values())} records, "
            f"{len(set(stored) - live)} deleted keys still there, {kept_more} kept more"
        )
        time.sleep(1.0)
    assert table() == expected
