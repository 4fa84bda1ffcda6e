"""Reading one page of a partition's records for the console's record browser.

The page starts at the asked offset, or at the first record at or after the asked time
(the leader's time index, through ListOffsets), and ends at the high watermark: only
committed records are shown, as consumers see them. Gaps (offsets compacted away) are
normal and skipped. Every step has a deadline, so a browser request on a cluster that
is going away ends in an error rather than a wait. The rules of the page are in
record_view.py.
"""

from __future__ import annotations

import asyncio

from spark_replica.client import EARLIEST, LATEST, Cluster, Consumer, ConsumerRecord, list_offsets
from spark_replica.client.consumer_records import iter_records
from spark_replica.client.fetched import RecordsLost
from spark_replica.errors import UnknownTopicOrPartitionError
from spark_replica.tools.console.record_view import (
    MAX_PAGE_BYTES,
    RecordQuery,
    RecordQueryError,
    page_of,
    record_json,
    record_size,
)
from spark_replica.topics import TopicPartition

READ_TIMEOUT_S = 5.0


class RecordsNotFoundError(RecordQueryError):
    """The topic or partition asked for does not exist (HTTP 404)."""


def _skip_gap(_lost: RecordsLost) -> None:
    """Offsets compacted away (or deleted by retention meanwhile): nothing to show."""


async def _check_partition(cluster: Cluster, query: RecordQuery) -> TopicPartition:
    await cluster.refresh([query.topic])
    try:
        metadata = cluster.topic(query.topic)
    except UnknownTopicOrPartitionError:
        raise RecordsNotFoundError(f"topic {query.topic!r} does not exist") from None
    count = len(metadata.partitions)
    if query.partition >= count:
        raise RecordsNotFoundError(
            f"topic {query.topic!r} has no partition {query.partition} "
            f"(it has {count}: 0 to {count - 1})"
        )
    return TopicPartition(query.topic, query.partition)


async def _offset_at(cluster: Cluster, tp: TopicPartition, timestamp: int) -> int:
    found = await list_offsets(cluster, [tp], timestamp, wait_s=READ_TIMEOUT_S)
    return found[tp][0]


async def _read(cluster: Cluster, tp: TopicPartition, start: int, end: int) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    total = 0
    reader = Consumer(cluster).read_range(
        tp, start, end, on_lost=_skip_gap, progress_timeout_ms=int(READ_TIMEOUT_S * 1000)
    )
    async for fetched in reader:
        for record in iter_records(fetched):
            records.append(record)
            total += record_size(record)
        if total > MAX_PAGE_BYTES:
            break
    return records


async def read_page(cluster: Cluster, query: RecordQuery) -> dict[str, object]:
    """The /api/records document for `query`; RecordQueryError for a bad one,
    RecordsNotFoundError for a missing topic or partition, another ReplogError or a
    TimeoutError when the cluster does not answer."""
    tp = await asyncio.wait_for(_check_partition(cluster, query), READ_TIMEOUT_S)
    log_start = await _offset_at(cluster, tp, EARLIEST)
    high_watermark = await _offset_at(cluster, tp, LATEST)
    if query.timestamp_ms is not None:
        found = await _offset_at(cluster, tp, query.timestamp_ms)
        start = high_watermark if found < 0 else found
    else:
        start = query.offset if query.offset is not None else log_start
        if not log_start <= start <= high_watermark:
            held = (
                f"offsets {log_start} to {high_watermark - 1}"
                if high_watermark > log_start
                else f"no records (next offset {high_watermark})"
            )
            raise RecordQueryError(f"offset {start} is outside {tp}, which holds {held}")
    end = min(start + query.limit, high_watermark)
    records = await _read(cluster, tp, start, end) if end > start else []
    page, capped = page_of(records, query.limit)
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "log_start_offset": log_start,
        "high_watermark": high_watermark,
        "start_offset": start,
        "next_offset": page[-1].offset + 1 if page else start,
        "format": query.format,
        "limit": query.limit,
        "capped_by_bytes": capped,
        "records": [record_json(r, query.format) for r in page],
    }
