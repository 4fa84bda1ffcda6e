"""Records one at a time, built from the Arrow batches the consumer fetches.

Conversion is column-wise: each column of a batch becomes a Python list with one
`to_pylist` call (timestamps read as int64 milliseconds), and `map` builds the records
from those lists, so the per-record work left in Python is one constructor call. Measured
per record: row-wise conversion (`RecordBatch.to_pylist`) costs about ten times as much;
a frozen dataclass record five times as much to build (its `__init__` goes through
`object.__setattr__`); a named tuple about the same as this slotted class.
`benchmarks/consume.py --api record` times the whole path.

Positions while iterating. `Consumer.poll` moves a partition's position past every
record it fetched; an iterator hands them out one at a time, so `deliver` moves the
position back to the first record fetched and then past each record as it is yielded.
A caller who stops half-way (a `break`) and iterates again resumes at the next record,
and `Consumer.position` always names the record after the last one handed out, as
Kafka's iterating clients do. A seek (or an assign that drops the partition) while
iterating is noticed before the next record of that partition: the rest of what was
fetched for it is dropped and the next poll starts where the seek put it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Protocol

import pyarrow as pa

from spark_replica.errors import ConfigError
from spark_replica.topics import TopicPartition

from .fetched import FetchedRecords

Header = tuple[str, bytes | None]
NO_HEADERS: tuple[Header, ...] = ()


class Polled(Protocol):
    """What iterating needs of a consumer (Consumer is one): its positions, its poll.

    A protocol rather than Consumer itself, which imports this module.
    """

    positions: dict[TopicPartition, int]

    async def poll(self, max_wait_ms: int | None = None) -> list[FetchedRecords]: ...


@dataclass(slots=True)
class ConsumerRecord:
    """One record as an application sees it; headers are (key, value) pairs in order."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def iter_records(fetched: FetchedRecords) -> Iterator[ConsumerRecord]:
    """The records of one fetched chunk, built lazily in offset order."""
    batch = fetched.records
    count = batch.num_rows
    names = batch.schema.names
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    timestamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
    headers = _headers(batch.column("headers")) if "headers" in names else repeat(NO_HEADERS)
    first = fetched.first_offset
    return map(
        ConsumerRecord,
        repeat(fetched.tp.topic),
        repeat(fetched.tp.partition),
        range(first, first + count),
        timestamps,
        keys,
        values,
        headers,
    )


def to_records(fetched: FetchedRecords) -> list[ConsumerRecord]:
    """The records of one fetched chunk as a list."""
    return list(iter_records(fetched))


def _headers(column: pa.Array) -> Iterator[tuple[Header, ...]]:
    """Each record's headers; a null list is no headers, and so is a null entry.

    Kafka has no null header entries; a batch written by Arrow code may hold one, and
    dropping it beats failing every record after it.
    """
    if column.null_count == len(column):
        return repeat(NO_HEADERS)
    return (
        NO_HEADERS
        if entries is None
        else tuple((entry["key"], entry["value"]) for entry in entries if entry is not None)
        for entries in column.to_pylist()
    )


def deliver(consumer: Polled, fetched: list[FetchedRecords]) -> Iterator[ConsumerRecord]:
    """Yield the records of one poll round, keeping positions at the next record to hand out.

    The rules are in the module docstring. The consumer's positions dict is looked up
    again for each record because `assign` replaces it.
    """
    expected: dict[TopicPartition, int] = {}
    for chunk in fetched:
        expected.setdefault(chunk.tp, chunk.first_offset)
    positions = consumer.positions
    for tp, first in expected.items():
        if tp in positions:
            positions[tp] = first
    for chunk in fetched:
        tp = chunk.tp
        if consumer.positions.get(tp) != expected[tp]:
            continue
        offset = chunk.first_offset
        consumer.positions[tp] = offset
        for record in iter_records(chunk):
            positions = consumer.positions
            if positions.get(tp) != offset:
                break
            offset += 1
            positions[tp] = offset
            yield record
        expected[tp] = offset


async def iterate_records(
    consumer: Polled,
    *,
    max_wait_ms: int | None = None,
    idle_timeout_s: float | None = None,
) -> AsyncIterator[ConsumerRecord]:
    """Records of the assigned partitions, one poll round after another.

    Without `idle_timeout_s` the iteration goes on for ever, waiting for new records as
    `poll` does; with it, the iteration ends once no record has arrived for that long
    (kafka-python's `consumer_timeout_ms`).
    """
    loop = asyncio.get_running_loop()
    idle = IdleTimer(idle_timeout_s, loop.time())
    while True:
        require_assignment(consumer)
        fetched = await consumer.poll(max_wait_ms)
        if idle.expired(fetched, loop.time()):
            return
        for record in deliver(consumer, fetched):
            yield record


class IdleTimer:
    """Says when an iteration has waited `timeout_s` since its last records (None: never)."""

    def __init__(self, timeout_s: float | None, now: float) -> None:
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigError(f"idle_timeout_s must be positive, not {timeout_s}")
        self.timeout_s = timeout_s
        self.last_records = now

    def expired(self, fetched: list[FetchedRecords], now: float) -> bool:
        if fetched:
            self.last_records = now
            return False
        return self.timeout_s is not None and now - self.last_records >= self.timeout_s


def require_assignment(consumer: Polled) -> None:
    """Refuse to iterate nothing: a poll with no partitions returns at once, for ever."""
    if not consumer.positions:
        raise ConfigError("no partitions are assigned to this consumer: assign some first")
