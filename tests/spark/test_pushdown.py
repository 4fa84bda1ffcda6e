"""Filter pushdown on batch reads, with the real SparkSession and the shared brokers.

Rows read with pushdown must be exactly the rows of a full read filtered by Spark, for
any WHERE clause (hypothesis writes them), and the planned ranges must shrink to what
the filters admit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import EqualTo, Filter, GreaterThanOrEqual, IsNotNull

from connectors.spark.batch_reader import PushdownBatchReader
from connectors.spark.partition_reader import RangePartition
from connectors.spark.schema import source_schema
from spark_replica.client import Admin, Cluster, Producer
from tests.support import BrokerFactory, run

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PUSHDOWN_SETTING = "spark.sql.python.filterPushdown.enabled"
# Two topics, so that topic filters choose between them; times go back and forth.
SUFFIX = uuid.uuid4().hex[:8]
TOPICS = {f"pd-events-{SUFFIX}": 3, f"pd-other-{SUFFIX}": 1}
EVENTS = next(iter(TOPICS))
RECORDS_PER_PARTITION = 120
BASE_MS = 1_700_000_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def record_time_ms(offset: int) -> int:
    """A few records share each ms; every seventh record is a little late."""
    return BASE_MS + offset // 3 - (5 if offset % 7 == 0 else 0)


@pytest.fixture(scope="module")
def pushdown_servers(spark_cluster: BrokerFactory) -> str:
    """The shared cluster with TOPICS produced once for the whole module."""

    async def fill() -> None:
        cluster = Cluster(spark_cluster.bootstrap)
        try:
            admin = Admin(cluster)
            for topic, partitions in TOPICS.items():
                await admin.create_topic(topic, partitions, 1, {})
            producer = Producer(cluster)
            offsets = range(RECORDS_PER_PARTITION)
            for topic, partitions in TOPICS.items():
                for partition in range(partitions):
                    await producer.send_records(
                        topic,
                        [f"{topic}/{partition}/{o}".encode() for o in offsets],
                        timestamps=[record_time_ms(o) for o in offsets],
                        partition=partition,
                    )
            await producer.close()
        finally:
            await cluster.close()

    run(fill())
    return ",".join(f"{host}:{port}" for host, port in spark_cluster.bootstrap)


@pytest.fixture(scope="module")
def pushdown_on(spark: SparkSession) -> Iterator[SparkSession]:
    """The session with Spark's Python filter pushdown on, as it was after."""
    before = spark.conf.get(PUSHDOWN_SETTING)
    spark.conf.set(PUSHDOWN_SETTING, "true")
    try:
        yield spark
    finally:
        spark.conf.set(PUSHDOWN_SETTING, before)


def options(servers: str, pushdown: bool) -> dict[str, str]:
    return {
        "replog.bootstrap.servers": servers,
        "subscribe": ",".join(TOPICS),
        "filterPushdown": str(pushdown).lower(),
    }


def load(spark: SparkSession, servers: str, *, pushdown: bool) -> DataFrame:
    return spark.read.format("replog").options(**options(servers, pushdown)).load()


@pytest.fixture(scope="module")
def full_read(pushdown_on: SparkSession, pushdown_servers: str) -> DataFrame:
    """Every record, read once without pushdown and cached: Spark filters this."""
    frame = load(pushdown_on, pushdown_servers, pushdown=False).cache()
    assert frame.count() == RECORDS_PER_PARTITION * sum(TOPICS.values())
    return frame


def rows(frame: DataFrame) -> list[tuple[object, ...]]:
    return sorted(
        tuple(row) for row in frame.select("topic", "partition", "offset", "timestamp").collect()
    )


def sql_time(ms: int, micros: int) -> str:
    moment = EPOCH + timedelta(milliseconds=ms, microseconds=micros)
    return f"TIMESTAMP '{moment.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


offsets = st.integers(-3, RECORDS_PER_PARTITION + 3)
partitions = st.integers(-1, 3)
times = st.builds(
    sql_time,
    st.integers(BASE_MS - 6, BASE_MS + RECORDS_PER_PARTITION // 3 + 2),
    st.sampled_from([0, 0, 500]),
)
topics = st.sampled_from([*TOPICS, "nope"]).map(lambda name: f"'{name}'")
comparisons = st.sampled_from(["<", "<=", ">", ">=", "<", "<=", ">", ">=", "=", "<>"])


def atoms(column: str, literal: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda op, v: f"{column} {op} {v}", comparisons, literal),
        st.builds(lambda a, b: f"{column} BETWEEN {a} AND {b}", literal, literal),
        st.builds(
            lambda vs: f"{column} IN ({', '.join(vs)})", st.lists(literal, min_size=1, max_size=4)
        ),
    )


atom = st.one_of(
    atoms("timestamp", times),
    atoms("offset", offsets.map(str)),
    atoms("partition", partitions.map(str)),
    atoms("topic", topics),
)
clause = st.one_of(
    *[atom] * 6,
    st.builds(lambda a, b: f"({a} OR {b})", atom, atom),
    atom.map(lambda a: f"NOT ({a})"),
)
predicates = st.lists(clause, min_size=1, max_size=3).map(" AND ".join)


# Only the records of BASE_MS + 10 lie between these two times.
HALF_MS_BEFORE_10 = sql_time(BASE_MS + 9, 500)
HALF_MS_AFTER_10 = sql_time(BASE_MS + 10, 500)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(predicate=predicates)
@example(predicate=f"timestamp < {sql_time(BASE_MS + 10, 500)}")
@example(predicate=f"timestamp >= {sql_time(BASE_MS + 20, 0)} AND partition IN (0, 2)")
@example(predicate=f"offset IN (3, 4, 90) AND topic = '{EVENTS}' AND partition <> 1")
@example(predicate="offset BETWEEN 10 AND 20 AND partition = 2")
@example(predicate=f"timestamp > {HALF_MS_BEFORE_10} AND timestamp < {HALF_MS_AFTER_10}")
@example(predicate="(offset < 5 OR partition = 2) AND NOT (offset > 100)")
def test_pushed_down_rows_equal_the_full_read_filtered_by_spark(
    pushdown_on: SparkSession, pushdown_servers: str, full_read: DataFrame, predicate: str
) -> None:
    pushed = load(pushdown_on, pushdown_servers, pushdown=True).where(predicate)
    assert rows(pushed) == rows(full_read.where(predicate)), predicate


def planned(servers: str, *filters: Filter) -> list[tuple[str, int, int, int]]:
    """The ranges the driver plans for the filters, as Spark would ask for them."""
    reader = PushdownBatchReader(options(servers, True), source_schema(False))
    assert reader.pushFilters(list(filters)) == []
    return ranges(reader)


def ranges(reader: PushdownBatchReader) -> list[tuple[str, int, int, int]]:
    parts = [p for p in reader.partitions() if isinstance(p, RangePartition)]
    return [(p.topic, p.partition, p.start, p.end) for p in parts]


def test_partition_and_offset_filters_shrink_the_ranges_read(
    pushdown_on: SparkSession, pushdown_servers: str
) -> None:
    first = RECORDS_PER_PARTITION - 20
    assert planned(
        pushdown_servers,
        IsNotNull(("partition",)),
        EqualTo(("partition",), 1),
        GreaterThanOrEqual(("offset",), first),
    ) == [(EVENTS, 1, first, RECORDS_PER_PARTITION)]

    predicate = f"partition = 1 AND offset >= {first}"
    narrowed = load(pushdown_on, pushdown_servers, pushdown=True).where(predicate)
    assert narrowed.rdd.getNumPartitions() == 1
    assert load(pushdown_on, pushdown_servers, pushdown=False).rdd.getNumPartitions() == 4
    assert [row.offset for row in narrowed.collect()] == list(range(first, RECORDS_PER_PARTITION))


def test_offset_options_may_name_partitions_the_filters_exclude(pushdown_servers: str) -> None:
    reader = PushdownBatchReader(
        {
            **options(pushdown_servers, True),
            "startingOffsets": json.dumps({EVENTS: {"0": 5, "1": 7}}),
            "endingOffsets": json.dumps({EVENTS: {"0": 9}}),
        },
        source_schema(False),
    )
    assert reader.pushFilters([EqualTo(("partition",), 1)]) == []
    assert ranges(reader) == [(EVENTS, 1, 7, RECORDS_PER_PARTITION)]


def test_a_timestamp_filter_starts_each_range_at_the_first_record_that_recent(
    pushdown_on: SparkSession, pushdown_servers: str
) -> None:
    since = EPOCH + timedelta(milliseconds=BASE_MS + 30)
    reader = PushdownBatchReader(options(pushdown_servers, True), source_schema(False))
    timestamp_filter = GreaterThanOrEqual(("timestamp",), since)
    assert reader.pushFilters([timestamp_filter])[0] is timestamp_filter  # Spark re-checks
    first = next(o for o in range(RECORDS_PER_PARTITION) if record_time_ms(o) >= BASE_MS + 30)
    assert {(start, end) for _, _, start, end in ranges(reader)} == {(first, RECORDS_PER_PARTITION)}


@pytest.mark.parametrize(
    "predicate",
    [
        f"offset > {RECORDS_PER_PARTITION + 1000}",
        "partition = 7",
        "topic = 'nope'",
        "offset IS NULL",
        f"timestamp > {sql_time(BASE_MS + 10_000, 0)}",
    ],
)
def test_filters_that_admit_nothing_read_nothing_without_error(
    pushdown_on: SparkSession, pushdown_servers: str, predicate: str
) -> None:
    frame = load(pushdown_on, pushdown_servers, pushdown=True).where(predicate)
    assert frame.collect() == []


def test_pushdown_without_spark_setting_fails_naming_it(
    spark: SparkSession, pushdown_servers: str
) -> None:
    before = spark.conf.get(PUSHDOWN_SETTING)
    spark.conf.set(PUSHDOWN_SETTING, "false")
    try:
        with pytest.raises(Exception, match=PUSHDOWN_SETTING):
            load(spark, pushdown_servers, pushdown=True).where("partition = 1").collect()
        assert load(spark, pushdown_servers, pushdown=False).where("partition = 1").count() > 0
    finally:
        spark.conf.set(PUSHDOWN_SETTING, before)
