"""Stored batches already converted to Kafka's format, kept for the next reader.

Consumers of one topic read the same batches, and a consumer group re-reads them after
every rebalance; converting an Arrow batch to Kafka's varint records costs far more
than looking it up, so the converted bytes are kept, least recently used first out,
within a byte budget. A converted batch larger than the whole budget is not kept.

A key names one stored batch for good, in one codec: (topic, partition, base offset,
leader epoch, CRC, Kafka codec). The leader epoch alone would let a batch written again
at the same offset by the same leader after a truncation look the same; the CRC (over
everything but the base offset) tells them apart, and a topic deleted and created again
under the same name starts its epochs again but not its payloads. The codec is the one
the topic's compression.type chose when the batch was fetched, so a changed
compression.type is served from its own entries.

Conversions run in worker threads (brokerd/kafka/fetch.py) as well as on the event
loop, so every access holds a lock; a lookup or an insertion is a few dictionary
operations, never a conversion.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class BatchKey(NamedTuple):
    topic: str
    partition: int
    base_offset: int
    leader_epoch: int
    crc: int
    codec: int = 0


class FetchCache:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used_bytes = 0
        self._entries: OrderedDict[BatchKey, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: BatchKey) -> bytes | None:
        """The converted batch if it is kept (it becomes the most recently used)."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: BatchKey, converted: bytes) -> None:
        """Keep `converted` (unless it alone is over the budget), evicting the oldest."""
        size = len(converted)
        if size > self.max_bytes:
            return
        with self._lock:
            entries = self._entries
            previous = entries.pop(key, None)
            if previous is not None:
                self.used_bytes -= len(previous)
            entries[key] = converted
            self.used_bytes += size
            while self.used_bytes > self.max_bytes:
                _, evicted = entries.popitem(last=False)
                self.used_bytes -= len(evicted)

    def get_or_convert(self, key: BatchKey, convert: Callable[[], bytes]) -> bytes:
        """The converted batch: from the cache, else `convert()`d and remembered."""
        found = self.get(key)
        if found is not None:
            return found
        converted = convert()
        self.put(key, converted)
        return converted
