"""A partition's open batch: records collected column by column until they go. Pure logic.

A request per record would cost a round trip, a batch header and an Arrow schema per
record; like Kafka's RecordAccumulator a producer holds each partition's records in an
open batch, with Kafka's meaning of the two settings:

* `batch_size`: the most (estimated) bytes one batch holds. A record that would take
  the open batch past it closes that batch and starts the next; a record larger than
  `batch_size` on its own makes a batch of one. `batch_records` caps the record count
  as well (an Arrow batch's cost has a per-record part too).
* `linger_ms`: how long a batch that is not full may wait for more records once the
  partition could send it. A batch is not closed while the partition's in-flight
  window is full: it keeps filling (up to `batch_size`) until the window has room, so
  a producer that sends faster than the brokers answer makes larger batches, not a
  longer queue of small ones.

Records are kept as columns (values, keys, timestamps, headers) because that is what
the Arrow encoder takes, and because appending to a few lists is the cheapest thing a
per-record send can do: no object per record. Delivery callbacks are kept beside them
with their record's index, only for records that have one.

Sizes are estimates of the uncompressed Arrow payload (value, key and header bytes plus
a fixed per-record overhead for offsets, timestamp and validity bits); with compression
the batches on the wire are smaller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# Arrow bytes per record besides its key, value and headers: two int32 offsets, an int64
# timestamp, validity bits and a headers list offset. An upper bound, as in benchmarks.
RECORD_OVERHEAD_BYTES = 17

Headers = list[tuple[str, bytes | None]]
Callback = Callable[[Any, BaseException | None], None]


def estimate_record_bytes(
    value: bytes | None,
    key: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
) -> int:
    """The bytes one record adds to an uncompressed payload, roughly."""
    size = RECORD_OVERHEAD_BYTES + len(value or b"") + len(key or b"")
    for name, header_value in headers or ():
        size += 8 + len(name) + len(header_value or b"")
    return size


class OpenBatch:
    """The records of one partition's batch that is still taking records."""

    __slots__ = ("callbacks", "headers", "keys", "opened_at", "size_bytes", "timestamps", "values")

    def __init__(self, opened_at: float) -> None:
        self.opened_at = opened_at
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.headers: list[Headers | None] | None = None  # None while no record has any
        self.callbacks: list[tuple[int, Callback]] = []  # (record index, callback)
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self.values)

    def add(
        self,
        value: bytes | None,
        key: bytes | None,
        timestamp_ms: int,
        headers: Headers | None,
        size_bytes: int,
        callback: Callback | None,
        batch_bytes: int,
    ) -> bool:
        """Append one record if it fits in `batch_bytes` (an empty batch takes any record).

        False, and nothing appended, if it does not: the caller seals this batch and
        opens the next. One call per record, so this is the producer's hot path.
        """
        values = self.values
        if self.size_bytes + size_bytes > batch_bytes and values:
            return False
        if callback is not None:
            self.callbacks.append((len(values), callback))
        if headers is not None and self.headers is None:
            self.headers = [None] * len(values)
        if self.headers is not None:
            self.headers.append(headers)
        values.append(value)
        self.keys.append(key)
        self.timestamps.append(timestamp_ms)
        self.size_bytes += size_bytes
        return True

    def is_full(self, batch_bytes: int, batch_records: int) -> bool:
        return self.size_bytes >= batch_bytes or len(self.values) >= batch_records

    def lingered(self, linger_s: float, now: float) -> bool:
        return now >= self.opened_at + linger_s
