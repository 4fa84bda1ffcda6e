"""How a task turns fetched batches into Spark rows: small batches joined, offsets exact."""

from __future__ import annotations

import pyarrow as pa

from connectors.spark.partition_reader import (
    COALESCED_ROWS,
    SMALL_BATCH_ROWS,
    RangePartition,
    RangeRows,
)
from spark_replica.client import FetchedRecords
from spark_replica.client.fetched import take_records
from spark_replica.records import TIMESTAMP_TYPE_LOG_APPEND, build_batch, decode_payload
from spark_replica.topics import TopicPartition

TOPIC = "t"


def stored(
    base_offset: int,
    count: int,
    *,
    headers: bool = False,
    log_append: bool = False,
) -> bytes:
    """One stored batch of `count` records whose values are their offsets."""
    values = [str(base_offset + i).encode() for i in range(count)]
    return build_batch(
        values,
        timestamps=[1000 + base_offset + i for i in range(count)],
        headers=[[("h", b"x")]] * count if headers else None,
        base_offset=base_offset,
        attributes=TIMESTAMP_TYPE_LOG_APPEND if log_append else 0,
    )


def rows_of(fetched: bytes, start: int, end: int) -> list[pa.RecordBatch]:
    """Spark's rows of [start, end) of a fetch answer, as a task builds them."""
    part = RangePartition(TOPIC, 0, start, end, "127.0.0.1:1", True, False, 1000)
    taken = take_records(TopicPartition(TOPIC, 0), fetched, start, end)
    assert taken.position == end
    records = [p for p in taken.pieces if isinstance(p, FetchedRecords)]
    return RangeRows(part).build(records)


def test_small_batches_are_joined_and_large_ones_kept_whole_with_exact_offsets() -> None:
    large = SMALL_BATCH_ROWS + 1000
    fetched = b"".join(
        [
            stored(0, 3),
            stored(3, 3),  # joins the first: same schema and timestamp type
            stored(6, 3, headers=True),  # a headers column: a run of its own
            stored(9, 3, log_append=True),  # another timestamp type: its own run
            stored(15, 2, log_append=True),  # after a gap (12..14 lost): a new run
            stored(17, large),  # large: alone, uncopied
            stored(17 + large, 5),
        ]
    )
    end = 17 + large + 3  # the range ends inside the last batch
    pieces = rows_of(fetched, 1, end)
    assert [p.num_rows for p in pieces] == [5, 3, 3, 2, large, 3]
    rows = pa.Table.from_batches(pieces)
    offsets = rows.column("offset").to_pylist()
    assert offsets == [*range(1, 12), *range(15, end)]
    assert rows.column("value").to_pylist() == [str(o).encode() for o in offsets]
    assert rows.column("timestampType").to_pylist() == [1 if 9 <= o < 17 else 0 for o in offsets]
    assert [h is not None for h in rows.column("headers").to_pylist()] == [
        6 <= o < 9 for o in offsets
    ]


def test_a_run_of_small_batches_stops_at_sparks_batch_size() -> None:
    size = 1000
    batches = COALESCED_ROWS // size + 2
    fetched = b"".join(stored(i * size, size) for i in range(batches))
    pieces = rows_of(fetched, 0, batches * size)
    assert [p.num_rows for p in pieces] == [COALESCED_ROWS, 2 * size]
    assert pa.Table.from_batches(pieces).column("offset").to_pylist() == list(range(batches * size))


def test_constant_columns_are_right_whatever_the_order_of_batch_sizes_and_types() -> None:
    """The topic, partition and timestamp type columns are cached and sliced per batch:
    a longer batch after a shorter one, a shorter after a longer, and a second timestamp
    type must each still get full, correct columns."""
    part = RangePartition(TOPIC, 3, 0, 10**6, "127.0.0.1:1", True, False, 1000)
    rows = RangeRows(part)
    first = 0
    for count, timestamp_type in [(5, 0), (3000, 0), (2, 1), (12, 0), (4000, 1)]:
        records = decode_payload(stored(first, count))
        batch = rows.columns.rows(records, first, timestamp_type)
        assert batch.num_rows == count
        assert batch.column("offset").to_pylist() == list(range(first, first + count))
        assert batch.column("topic").to_pylist() == [TOPIC] * count
        assert batch.column("partition").to_pylist() == [3] * count
        assert batch.column("timestampType").to_pylist() == [timestamp_type] * count
        assert batch.column("value").to_pylist() == [str(first + i).encode() for i in range(count)]
        first += count
