"""`spark.readStream.format("replog")`: micro-batches of offset ranges, never past the HW.

Spark keeps a long-lived instance of this reader on the driver and calls it between
micro-batches: `latestOffset` decides where the next batch ends, `partitions` turns a
(start, end) pair into tasks. Offsets are `{"topic": {"partition": offset}}` and live
only in the query's checkpoint, so a restarted query continues exactly where the last
committed batch ended.

The end of a batch is each partition's high watermark (HW) at planning time, so a
batch holds only committed records, which no leader change can take back. Admission
control (maxOffsetsPerTrigger, minOffsetsPerTrigger with maxTriggerDelay) shapes the
batches; Trigger.AvailableNow fixes the HWs once, when the query starts, and reads up
to them in as many batches as the limits allow.

Under kafka.isolation.level=read_committed every "HW" above is the last stable offset
instead (READABLE_END: what ListOffsets LATEST answers at that level): a batch ends
before the first transaction still open, so it never holds a record that may yet be
aborted, and its tasks drop the records of aborted transactions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from connectors.spark.connection import (
    bootstrap_servers,
    resolve_offset_spec,
    run_with_cluster,
    subscribed_partitions,
)
from connectors.spark.offsets import (
    data_loss_error,
    find_data_loss,
    offset_ranges,
    plan_end,
    skip_lost,
    split_ranges,
)
from connectors.spark.partition_reader import RangePartition, range_partitions, read_range
from connectors.spark.source_options import check_schema, parse_source_options
from spark_replica.client import EARLIEST as LOG_START
from spark_replica.client import LATEST as READABLE_END
from spark_replica.client import Cluster, IsolationLevel, list_offsets
from spark_replica.partition_offsets import EARLIEST, Offsets, decode_offsets, encode_offsets
from spark_replica.topics import TopicPartition

# Planning a query's start or its AvailableNow target waits this long for a partition
# whose leader is moving; planning a micro-batch waits less and plans without it.
PLANNING_WAIT_S = 30.0
BATCH_PLANNING_WAIT_S = 5.0
PLANNING_TIMEOUT_S = 120.0
# A partition missing from the metadata is looked for again after this long before it
# counts as deleted (one broker may not have caught up with the controller yet).
GONE_RECHECK_S = 0.5


class ReplogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads the subscribed partitions in micro-batches: `spark.readStream.format("replog")`.

    Rows and connection and subscription options are those of the batch reader
    (ReplogBatchReader); a micro-batch never holds a record above its partition's HW at
    planning time. Options, with Kafka's names and meanings:

    - startingOffsets: latest (default), earliest, or JSON '{"a": {"0": 23, "1": -1}}'
      (-2 earliest, -1 latest); startingTimestamp, startingOffsetsByTimestamp and
      startingOffsetsByTimestampStrategy as in batch reads. They apply only to a new
      query: a restarted one continues from its checkpoint. endingOffsets and the
      ending timestamps are refused.
    - maxOffsetsPerTrigger: at most this many records per micro-batch, shared among the
      partitions in proportion to their backlog.
    - minOffsetsPerTrigger with maxTriggerDelay (default 15m): wait for that many
      records, but no longer than the delay since the last batch.
    - Trigger.AvailableNow reads what is there when the query starts, in batches of
      maxOffsetsPerTrigger, and stops.
    - Partitions added to a subscribed topic, or topics matching subscribePattern, are
      read from offset 0 as they appear.
    - failOnDataLoss (default true): a deleted topic or records deleted before they were
      read fail the query; with false they are skipped and the query goes on, never
      reading a record twice.
    - minPartitions, includeHeaders, kafkaConsumer.pollTimeoutMs as in batch reads.
    - kafka.isolation.level as in batch reads: under read_committed every micro-batch
      ends at or below each partition's last stable offset at planning time, so a
      transaction's records appear in a micro-batch only once it committed, and those
      of aborted ones never.

    Example::

        (spark.readStream.format("replog")
            .option("replog.bootstrap.servers", "localhost:9092")
            .option("subscribePattern", "events-.*")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 100000)
            .load()
            .writeStream.trigger(availableNow=True)
            .option("checkpointLocation", "/tmp/checkpoints/events")
            .format("parquet").start("/tmp/events"))
    """

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.source = parse_source_options(options, streaming=True)
        check_schema(schema, self.source.include_headers, self.source.avro)
        self._servers: str | None = None
        self._target: Offsets | None = None
        self._latest_seen: Offsets | None = None
        self._last_batch_at = time.monotonic()

    def servers(self) -> str:
        """The brokers, resolved once (from ZooKeeper if so configured) on first use."""
        if self._servers is None:
            self._servers = bootstrap_servers(self.options)
        return self._servers

    def initialOffset(self) -> dict:
        source = self.source

        async def initial(cluster: Cluster) -> Offsets:
            partitions = await subscribed_partitions(cluster, source.subscription)
            if not partitions:
                return {}
            earliest = await _offsets(cluster, partitions, LOG_START)
            latest = await _offsets(cluster, partitions, READABLE_END, source.isolation_level)
            return await resolve_offset_spec(
                cluster,
                source.starting,
                partitions,
                earliest,
                latest,
                unnamed=EARLIEST,
                fail_without_match=source.timestamp_strategy == "error",
                wait_s=PLANNING_WAIT_S,
                isolation_level=source.isolation_level,
            )

        return encode_offsets(
            run_with_cluster(self.servers(), initial, PLANNING_TIMEOUT_S, security=source.security)
        )

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the HWs of now as the end: the query reads what is there and stops."""
        subscription = self.source.subscription
        isolation_level = self.source.isolation_level

        async def target(cluster: Cluster) -> Offsets:
            partitions = await subscribed_partitions(cluster, subscription)
            return await _offsets(cluster, partitions, READABLE_END, isolation_level)

        self._target = run_with_cluster(
            self.servers(), target, PLANNING_TIMEOUT_S, security=self.source.security
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.source.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.source.max_offsets_per_trigger)
        if self.source.min_offsets_per_trigger is not None:
            return ReadMinRows(self.source.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = decode_offsets(start, "the query's start offsets")
        partitions, high_watermarks, log_ends = run_with_cluster(
            self.servers(),
            lambda cluster: self._look(cluster, begin),
            PLANNING_TIMEOUT_S,
            security=self.source.security,
        )
        losses = find_data_loss(begin, partitions, {}, log_ends)
        if losses:
            if self.source.fail_on_data_loss:
                raise data_loss_error("; ".join(loss.message for loss in losses))
            begin = skip_lost(begin, partitions, {}, log_ends)
        self._latest_seen = high_watermarks
        available = {tp: max(hw, begin.get(tp, 0)) for tp, hw in high_watermarks.items()}
        if self._target is not None:
            available = {
                tp: min(offset, self._target[tp])
                for tp, offset in available.items()
                if tp in self._target
            }
        unlimited = isinstance(limit, ReadAllAvailable)
        end = plan_end(
            begin,
            available,
            max_rows=_max_rows(limit, self.source.max_offsets_per_trigger, unlimited),
            min_rows=(
                None
                if unlimited or self._target is not None
                else _min_rows(limit, self.source.min_offsets_per_trigger)
            ),
            waited_ms=(time.monotonic() - self._last_batch_at) * 1000,
            max_delay_ms=self.source.max_trigger_delay_ms,
        )
        if end != begin:
            self._last_batch_at = time.monotonic()
        return encode_offsets(end)

    async def _look(
        self, cluster: Cluster, begin: Offsets
    ) -> tuple[list[TopicPartition], Offsets, Offsets]:
        """The partitions now, their HWs (those whose leader answers), and, for those
        whose HW is below where the query stands, their leader's log end offset."""
        subscription = self.source.subscription
        partitions = await subscribed_partitions(cluster, subscription)
        if set(begin) - set(partitions):
            await asyncio.sleep(GONE_RECHECK_S)
            partitions = await subscribed_partitions(cluster, subscription)
        found = await list_offsets(
            cluster,
            partitions,
            READABLE_END,
            wait_s=BATCH_PLANNING_WAIT_S,
            partial=True,
            isolation_level=self.source.isolation_level,
        )
        high_watermarks = {tp: offset for tp, (offset, _) in found.items()}
        behind = [tp for tp, hw in high_watermarks.items() if tp in begin and begin[tp] > hw]
        log_ends: Offsets = {}
        if behind:
            ends = await list_offsets(
                cluster,
                behind,
                READABLE_END,
                wait_s=BATCH_PLANNING_WAIT_S,
                partial=True,
                log_end=True,
            )
            log_ends = {tp: offset for tp, (offset, _) in ends.items()}
        return partitions, high_watermarks, log_ends

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest_seen is None else encode_offsets(self._latest_seen)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        source = self.source
        ranges = offset_ranges(
            decode_offsets(start, "the batch's start offsets"),
            decode_offsets(end, "the batch's end offsets"),
        )
        ranges = split_ranges(ranges, source.min_partitions)
        return range_partitions(ranges, self.servers(), source)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return iter(())
        return read_range(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress is the checkpoint's, the cluster keeps no consumer state."""


def _max_rows(limit: ReadLimit, option: int | None, unlimited: bool) -> int | None:
    if unlimited:
        return None
    if isinstance(limit, ReadMaxRows):
        return limit.max_rows
    return option


def _min_rows(limit: ReadLimit, option: int | None) -> int | None:
    if isinstance(limit, ReadMinRows):
        return limit.min_rows
    return option


async def _offsets(
    cluster: Cluster,
    partitions: list[TopicPartition],
    timestamp: int,
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> Offsets:
    found = await list_offsets(
        cluster, partitions, timestamp, wait_s=PLANNING_WAIT_S, isolation_level=isolation_level
    )
    return {tp: offset for tp, (offset, _) in found.items()}
