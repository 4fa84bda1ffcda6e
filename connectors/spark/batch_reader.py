"""`spark.read.format("replog")`: a bounded read of offset ranges, planned on the driver.

The driver resolves where each partition starts and ends (offsets, -2/-1, timestamps)
once, clamps every end to the partition's high watermark (HW) so that only committed
records are read (to its last stable offset under kafka.isolation.level=read_committed),
narrows the ranges to what the query's filters admit (pushdown.py), and hands Spark one
task per range (more with minPartitions). The tasks read their ranges on the executors
(partition_reader.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from connectors.spark.connection import (
    bootstrap_servers,
    resolve_offset_spec,
    run_with_cluster,
    subscribed_partitions,
)
from connectors.spark.offsets import (
    OffsetRange,
    clamp_to_high_watermarks,
    data_loss_error,
    offset_ranges,
    split_ranges,
)
from connectors.spark.partition_reader import RangePartition, range_partitions, read_range
from connectors.spark.pushdown import NO_PUSHDOWN, Pushdown, push_filters, start_at, without
from connectors.spark.source_options import (
    ASSIGN,
    SourceOptions,
    check_schema,
    parse_source_options,
)
from spark_replica.client import EARLIEST as EARLIEST_TIMESTAMP
from spark_replica.client import LATEST as LATEST_TIMESTAMP
from spark_replica.client import Cluster, list_offsets
from spark_replica.errors import ConfigError
from spark_replica.partition_offsets import EARLIEST, LATEST
from spark_replica.topics import TopicPartition

# How long planning waits for a partition whose leader is moving before it fails.
PLANNING_WAIT_S = 30.0
PLANNING_TIMEOUT_S = 120.0


class ReplogBatchReader(DataSourceReader):
    """Reads [start, end) of the subscribed partitions once: `spark.read.format("replog")`.

    Rows have Kafka's schema (key, value, topic, partition, offset, timestamp,
    timestampType, and headers with includeHeaders=true); a user-specified schema is
    refused. Options, with Kafka's names and meanings:

    - replog.bootstrap.servers (alias kafka.bootstrap.servers) or replog.zookeeper.connect
    - security, as Kafka's client properties under kafka. (or replog.):
      kafka.security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
      kafka.sasl.mechanism (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN), kafka.sasl.jaas.config,
      kafka.ssl.truststore.location with kafka.ssl.truststore.type=PEM, ...; the sink
      takes the same. An unsupported one (a JKS store, GSSAPI) fails the query by name.
    - exactly one of subscribe ("a,b"), subscribePattern ("events-.*") or assign
      ('{"a": [0, 1]}')
    - startingOffsets: earliest (default), or JSON '{"a": {"0": 23, "1": -2}}' where -2
      is earliest; latest (-1) is refused, it would read nothing. Partitions the JSON
      does not name start at earliest.
    - endingOffsets: latest (default, the HW), or JSON where -1 is latest; unnamed
      partitions end at latest. An end above the HW is read up to the HW only.
    - startingTimestamp / endingTimestamp (ms, for every partition) and
      startingOffsetsByTimestamp / endingOffsetsByTimestamp ('{"a": {"0": 1700000000000}}'):
      the first offset whose record time is at or after the timestamp. They win over
      startingOffsets / endingOffsets. A start with no record that recent fails unless
      startingOffsetsByTimestampStrategy=latest; an end then is the HW.
    - minPartitions: split large ranges so that at least this many tasks read.
    - failOnDataLoss (default true): fail when records to read were deleted; false
      skips them.
    - includeHeaders (default false); kafkaConsumer.pollTimeoutMs (default 120000): how
      long a task keeps trying while its partition has no leader.
    - kafka.isolation.level: read_uncommitted (default) or read_committed, which reads
      only what transactions committed: "latest" is each partition's last stable offset
      (LSO), the records of aborted transactions are dropped, and timestamps are looked
      up below the LSO. Transaction markers are never rows, under either level; rows
      keep their log offsets, so the offsets of markers and dropped records are gaps,
      which failOnDataLoss never counts as lost.
    - filterPushdown (default false): with true, and the Spark setting
      spark.sql.python.filterPushdown.enabled=true (without it Spark fails the read),
      WHERE conditions on topic, partition, offset and timestamp (=, <, <=, >, >=, IN,
      BETWEEN) narrow what is read: `where("partition = 1 AND offset >= 1000000")`
      reads only those records. The rows are the same as without pushdown; the options'
      checks (data loss, start after end) concern only the partitions the filters keep.

    Example::

        spark.read.format("replog")
            .option("replog.bootstrap.servers", "localhost:9092")
            .option("subscribe", "events")
            .option("startingOffsets", '{"events": {"0": 100, "1": -2}}')
            .option("endingOffsets", "latest")
            .load()
    """

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.source = parse_source_options(options, streaming=False)
        self.pushdown = NO_PUSHDOWN
        check_schema(schema, self.source.include_headers, self.source.avro)

    def partitions(self) -> list[InputPartition]:
        servers = bootstrap_servers(self.options)

        async def plan(cluster: Cluster) -> list[OffsetRange]:
            return await plan_batch(cluster, self.source, self.pushdown)

        ranges = run_with_cluster(servers, plan, PLANNING_TIMEOUT_S, security=self.source.security)
        return range_partitions(ranges, servers, self.source)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return iter(())
        return read_range(partition)


class PushdownBatchReader(ReplogBatchReader):
    """A batch read that takes the query's filters (source option filterPushdown=true).

    A class of its own because Spark fails every read whose reader has pushFilters
    while spark.sql.python.filterPushdown.enabled is off.
    """

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        self.pushdown, unhandled = push_filters(filters)
        return unhandled


async def plan_batch(
    cluster: Cluster, source: SourceOptions, pushdown: Pushdown = NO_PUSHDOWN
) -> list[OffsetRange]:
    """The ranges a batch read covers, checked against the cluster as it is now.

    Partitions the filters exclude are not asked about at all; offset and timestamp
    filters narrow the ranges once the options' own checks have passed.
    """
    subscription = source.subscription
    existing = await subscribed_partitions(cluster, subscription)
    if subscription.mode == ASSIGN:
        missing = sorted(set(subscription.partitions) - set(existing))
        if missing:
            raise ConfigError(f"{ASSIGN} names {missing[0]}, which does not exist")
    partitions = [tp for tp in existing if pushdown.reads(tp)]
    if not partitions:
        return []
    excluded = set(existing) - set(partitions)
    earliest = {
        tp: offset
        for tp, (offset, _) in (
            await list_offsets(cluster, partitions, EARLIEST_TIMESTAMP, wait_s=PLANNING_WAIT_S)
        ).items()
    }
    latest = {
        tp: offset
        for tp, (offset, _) in (
            await list_offsets(
                cluster,
                partitions,
                LATEST_TIMESTAMP,
                wait_s=PLANNING_WAIT_S,
                isolation_level=source.isolation_level,
            )
        ).items()
    }
    start = await resolve_offset_spec(
        cluster,
        without(source.starting, excluded),
        partitions,
        earliest,
        latest,
        unnamed=EARLIEST,
        fail_without_match=source.timestamp_strategy == "error",
        wait_s=PLANNING_WAIT_S,
        isolation_level=source.isolation_level,
    )
    end = await resolve_offset_spec(
        cluster,
        without(source.ending, excluded),
        partitions,
        earliest,
        latest,
        unnamed=LATEST,
        fail_without_match=False,
        wait_s=PLANNING_WAIT_S,
        isolation_level=source.isolation_level,
    )
    end = clamp_to_high_watermarks(end, latest)
    for tp in partitions:
        if start[tp] < earliest[tp]:
            if source.fail_on_data_loss:
                raise data_loss_error(
                    f"{source.starting.option} starts {tp} at {start[tp]}, but offsets below "
                    f"{earliest[tp]} were deleted"
                )
            start[tp] = earliest[tp]
        if start[tp] > end[tp]:
            raise ConfigError(
                f"{source.starting.option} starts {tp} at {start[tp]}, after where "
                f"{source.ending.option} ends it ({end[tp]}; the HW is {latest[tp]})"
            )
    ranges = pushdown.narrow(offset_ranges(start, end))
    starts = await timestamp_starts(cluster, pushdown, ranges)
    return split_ranges(start_at(ranges, starts), source.min_partitions)


async def timestamp_starts(
    cluster: Cluster, pushdown: Pushdown, ranges: list[OffsetRange]
) -> dict[TopicPartition, int]:
    """Where each range may start given the filters' earliest record time.

    The leader answers with the first offset whose record time is at or after it, so no
    record before that offset passes the filters. "None below the HW" (-1) narrows
    nothing: that HW may be a new leader's, still below the range's end.
    """
    first_ms = pushdown.first_timestamp_ms
    if first_ms is None or not ranges:
        return {}
    answers = await list_offsets(
        cluster, sorted({r.tp for r in ranges}), first_ms, wait_s=PLANNING_WAIT_S
    )
    return {tp: offset for tp, (offset, _) in answers.items() if offset >= 0}
