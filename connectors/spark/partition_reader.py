"""Executor side: read one offset range of one partition and yield Spark's Arrow rows.

A task reads [start, end) of one partition from whichever broker leads it now. The
end was at most the HW when the driver planned the batch, so every record of the range
is committed: a reader never goes past `end`, and if a new leader's HW still lags it
waits rather than stops short. Leader changes, a killed broker or a restarting one
show as retriable errors: the reader refreshes its metadata, backs off and fetches
again from the next offset it has not yet yielded, so no record is yielded twice. Only
a range that makes no progress for `poll_timeout_ms` fails the task.

Rows are built from the stored Arrow payload with Arrow compute only: the payload's
key, value, timestamp and headers columns are reused as they are (the timestamp cast
from ms to the µs Spark wants), and topic, partition, offset and timestampType are
generated column-wise.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from connectors.spark.avro import AvroCodec
from connectors.spark.offsets import OffsetRange, data_loss_error
from connectors.spark.schema import ARROW_HEADERS_TYPE, arrow_source_schema
from spark_replica.client import Cluster, parse_bootstrap
from spark_replica.client.consumer import list_offsets_at
from spark_replica.errors import (
    OffsetOutOfRangeError,
    ReplogError,
    TimeoutExpiredError,
    UnknownTopicOrPartitionError,
    raise_for_code,
)
from spark_replica.protocol.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.protocol.list_offsets import (
    DEBUG_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from spark_replica.records import (
    TIMESTAMP_TYPE_LOG_APPEND,
    decode_payload,
    iter_batches,
    verify_batch,
)
from spark_replica.topics import TopicPartition

if TYPE_CHECKING:
    from connectors.spark.source_options import SourceOptions
    from spark_replica.security.settings import SecurityConfig

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 16 * 1024 * 1024
# A fetch that gets no answer this long after its own wait is over is given up (the
# leader may be frozen) and tried again with fresh metadata.
FETCH_ANSWER_GRACE_S = 10.0
RETRY_BACKOFF_S = 0.1
MAX_RETRY_BACKOFF_S = 2.0
GONE_CONFIRMATIONS = 2
SPARK_TIMESTAMP = pa.timestamp("us", tz="UTC")
# Stored batches with fewer records are joined with their neighbours before they become
# rows, up to COALESCED_ROWS records (Spark's own Arrow batch size by default).
SMALL_BATCH_ROWS = 2048
COALESCED_ROWS = 10_000


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One Spark task: offsets [start, end) of one partition, and how to reach the cluster.

    Plain values only, so that it pickles to a few hundred bytes; connections are opened
    inside the task.
    """

    topic: str
    partition: int
    start: int
    end: int
    servers: str
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    avro: AvroCodec | None = None  # decodes values when valueFormat=avro
    security: SecurityConfig | None = None  # None: plaintext


def range_partitions(
    ranges: Iterable[OffsetRange], servers: str, source: SourceOptions
) -> list[InputPartition]:
    """One task per offset range, carrying what a task needs of the source options."""
    return [
        RangePartition(
            r.tp.topic,
            r.tp.partition,
            r.start,
            r.end,
            servers,
            source.include_headers,
            source.fail_on_data_loss,
            source.poll_timeout_ms,
            source.avro,
            source.security,
        )
        for r in ranges
    ]


def read_range(part: RangePartition) -> Iterator[pa.RecordBatch]:
    """Yield the rows of `part` as RecordBatches in the source's Arrow schema.

    Spark pulls from this generator on a plain thread, so it drives an event loop of its
    own, one fetch at a time; closing the generator closes the connections.
    """
    loop = asyncio.new_event_loop()
    cluster = Cluster(
        parse_bootstrap(part.servers), client_id="replog-spark-source", security=part.security
    )
    reader = RangeReader(cluster, part)
    try:
        while True:
            pieces = loop.run_until_complete(reader.next_rows())
            if pieces is None:
                return
            yield from pieces
    finally:
        with contextlib.suppress(ReplogError, OSError):
            loop.run_until_complete(cluster.close())
        loop.close()


class _SmallRun:
    """Consecutive small stored batches of one partition, waiting to become one row batch.

    They join only while they share a payload schema (a batch without headers has no
    headers column) and a timestamp type, and stay under COALESCED_ROWS together.
    """

    def __init__(self) -> None:
        self.records: list[pa.RecordBatch] = []
        self.first_offset = 0
        self.timestamp_type = 0
        self.rows = 0

    def takes(self, records: pa.RecordBatch, timestamp_type: int) -> bool:
        return not self.records or (
            timestamp_type == self.timestamp_type
            and records.schema.equals(self.records[0].schema)
            and self.rows + records.num_rows <= COALESCED_ROWS
        )

    def add(self, first_offset: int, records: pa.RecordBatch, timestamp_type: int) -> None:
        if not self.records:
            self.first_offset = first_offset
            self.timestamp_type = timestamp_type
        self.records.append(records)
        self.rows += records.num_rows

    def clear(self) -> None:
        self.records = []
        self.rows = 0


class RangeReader:
    """Fetches one partition's range from its current leader, following leader changes."""

    def __init__(self, cluster: Cluster, part: RangePartition) -> None:
        self.cluster = cluster
        self.part = part
        self.tp = TopicPartition(part.topic, part.partition)
        self.position = part.start
        self._gone_seen = 0
        self.schema = arrow_source_schema(part.include_headers)
        self.avro_schema = (
            None
            if part.avro is None
            else arrow_source_schema(part.include_headers, part.avro.arrow_type)
        )

    async def next_rows(self) -> list[pa.RecordBatch] | None:
        """The next rows of the range (one RecordBatch per stored batch, uncopied), or None
        once the range is read (or skipped as lost)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.part.poll_timeout_ms / 1000
        backoff = RETRY_BACKOFF_S
        last_error: ReplogError | None = None
        while self.position < self.part.end:
            try:
                rows = await self._fetch()
            except ReplogError as exc:
                if not exc.retriable:
                    raise
                last_error = exc
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)
                await self._refresh_after(exc)
            else:
                if rows is not None:
                    return rows
            if loop.time() > deadline:
                raise TimeoutExpiredError(
                    f"{self.tp}: no records at offset {self.position} (range ends at "
                    f"{self.part.end}) for {self.part.poll_timeout_ms} ms; last error: "
                    f"{last_error}"
                )
        return None

    async def _fetch(self) -> list[pa.RecordBatch] | None:
        await self.cluster.ensure_topic(self.tp.topic)
        leader = self.cluster.leader_for(self.tp)
        epoch = self.cluster.partition(self.tp).leader_epoch
        conn = await self.cluster.connection(leader, "fetch")
        request = FetchRequest(
            FETCH_MAX_WAIT_MS,
            1,
            FETCH_MAX_BYTES,
            [
                FetchTopic(
                    self.tp.topic,
                    [FetchPartition(self.tp.partition, self.position, FETCH_MAX_BYTES, epoch)],
                )
            ],
        )
        response = await conn.send(
            request, timeout_s=FETCH_MAX_WAIT_MS / 1000 + FETCH_ANSWER_GRACE_S
        )
        result = response.topics[0].partitions[0]
        if result.error_code == OffsetOutOfRangeError.code:
            await self._handle_out_of_range()
            return None
        raise_for_code(result.error_code, result.error_message or "")
        self._gone_seen = 0
        return self._take(result.records)

    def _take(self, data: bytes | memoryview) -> list[pa.RecordBatch] | None:
        """Rows of the fetched batches within [position, end); advances the position.

        A large stored batch becomes one RecordBatch of its own, uncopied (concatenating
        a fetch of them cost a full copy). Runs of small ones, as producers that send
        often write them, are joined first: building rows costs about 0.1 ms per batch
        whatever its size, and so does each batch Spark takes in, so a log of 50-record
        batches read one by one went at a tenth of the speed.
        """
        pieces: list[pa.RecordBatch] = []
        run = _SmallRun()
        for header, batch in iter_batches(data, allow_partial_tail=True):
            if header.next_offset <= self.position:
                continue
            if header.base_offset >= self.part.end:
                break
            if header.base_offset > self.position:
                pieces += self._flush(run)
                self._lose(f"offsets {self.position}..{header.base_offset - 1} are missing")
                self.position = header.base_offset
            verify_batch(batch, header)
            first = self.position - header.base_offset
            stop = min(self.part.end, header.next_offset) - header.base_offset
            records = decode_payload(batch).slice(first, stop - first)
            timestamp_type = 1 if header.attributes & TIMESTAMP_TYPE_LOG_APPEND else 0
            if records.num_rows >= SMALL_BATCH_ROWS:
                pieces += self._flush(run)
                pieces.append(self._rows(self.position, timestamp_type, records))
            else:
                if not run.takes(records, timestamp_type):
                    pieces += self._flush(run)
                run.add(self.position, records, timestamp_type)
            self.position = header.base_offset + stop
        pieces += self._flush(run)
        return pieces or None

    def _flush(self, run: _SmallRun) -> list[pa.RecordBatch]:
        """The rows of the small batches collected so far, as one RecordBatch."""
        if not run.records:
            return []
        records = run.records[0] if len(run.records) == 1 else pa.concat_batches(run.records)
        rows = self._rows(run.first_offset, run.timestamp_type, records)
        run.clear()
        return [rows]

    def _rows(
        self, first_offset: int, timestamp_type: int, records: pa.RecordBatch
    ) -> pa.RecordBatch:
        rows = payload_to_rows(records, self.tp, first_offset, timestamp_type, self.schema)
        if self.part.avro is None or self.avro_schema is None:
            return rows
        offsets = rows.column("offset").to_pylist()
        columns = list(rows.columns)
        columns[rows.schema.get_field_index("value")] = self.part.avro.decode(
            rows.column("value"), offsets
        )
        return pa.RecordBatch.from_arrays(columns, schema=self.avro_schema)

    async def _handle_out_of_range(self) -> None:
        """The leader's log does not hold the position: retention or truncation took it."""
        leader = self.cluster.leader_for(self.tp)
        earliest = await list_offsets_at(self.cluster, leader, [self.tp], EARLIEST_TIMESTAMP)
        ends = await list_offsets_at(
            self.cluster, leader, [self.tp], LATEST_TIMESTAMP, DEBUG_REPLICA_ID
        )
        log_start, log_end = earliest[self.tp][0], ends[self.tp][0]
        if self.position < log_start:
            resume = min(log_start, self.part.end)
            self._lose(
                f"offsets {self.position}..{resume - 1} were deleted "
                f"(the log starts at {log_start})"
            )
            self.position = resume
        elif self.position > log_end:
            self._lose(
                f"offsets {self.position}..{self.part.end - 1} are gone: the log was truncated "
                f"to {log_end}"
            )
            self.position = self.part.end
        else:
            # The leader changed between the fetch and this look: fetch again shortly.
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _refresh_after(self, error: ReplogError) -> None:
        """Fresh metadata after an error; a partition the cluster no longer has is data loss.

        One answer saying the topic is unknown may come from a broker that has not yet
        caught up with the controller, so the partition counts as gone only when two
        answers in a row say so.
        """
        if not error.invalid_metadata:
            return
        try:
            response = await self.cluster.refresh([self.tp.topic])
        except ReplogError:
            return
        topic = response.topics[0] if response.topics else None
        gone = topic is not None and topic.error_code == UnknownTopicOrPartitionError.code
        if gone or (
            topic is not None
            and not topic.error_code
            and all(p.partition != self.tp.partition for p in topic.partitions)
        ):
            self._gone_seen += 1
        else:
            self._gone_seen = 0
        if self._gone_seen >= GONE_CONFIRMATIONS:
            self._lose(f"{self.tp} is gone: offsets {self.position}..{self.part.end - 1} unread")
            self.position = self.part.end

    def _lose(self, detail: str) -> None:
        if self.part.fail_on_data_loss:
            raise data_loss_error(f"{self.tp}: {detail}")


def payload_to_rows(
    records: pa.RecordBatch,
    tp: TopicPartition,
    first_offset: int,
    timestamp_type: int,
    schema: pa.Schema,
) -> pa.RecordBatch:
    """Spark's rows for consecutive records of one partition, column-wise (no row loop)."""
    count = records.num_rows
    names = records.schema.names
    # Typed scalars: pyarrow infers a bare int's type by trying to import dateutil, and
    # where that is not installed every call pays a failed import (~0.1 ms).
    offsets = pc.add(
        pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), count)),
        pa.scalar(first_offset - 1, pa.int64()),
    )
    columns = [
        _binary(records.column("key")),
        _binary(records.column("value")),
        pa.repeat(pa.scalar(tp.topic, pa.string()), count),
        pa.repeat(pa.scalar(tp.partition, pa.int32()), count),
        offsets,
        records.column("timestamp").cast(SPARK_TIMESTAMP),
        pa.repeat(pa.scalar(timestamp_type, pa.int32()), count),
    ]
    if "headers" in schema.names:
        if "headers" in names:
            headers = records.column("headers")
            columns.append(
                headers if headers.type == ARROW_HEADERS_TYPE else headers.cast(ARROW_HEADERS_TYPE)
            )
        else:
            columns.append(pa.nulls(count, ARROW_HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _binary(column: pa.Array) -> pa.Array:
    return column if column.type == pa.binary() else column.cast(pa.binary())
