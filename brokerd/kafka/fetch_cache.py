"""Stored batches already converted to Kafka's format, kept for the next reader.

Consumers of one topic read the same batches, and a consumer group re-reads them after
every rebalance; converting an Arrow batch to Kafka's varint records costs far more
than looking it up, so the converted bytes are kept, least recently used first out,
within a byte budget.

A key names one stored batch for good: (topic, partition, base offset, leader epoch,
CRC). The leader epoch alone would let a batch written again at the same offset by the
same leader after a truncation look the same; the CRC (over everything but the base
offset) tells them apart, and a topic deleted and created again under the same name
starts its epochs again but not its payloads.

Owned by the broker's event loop; no locking.
"""

from __future__ import annotations

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


class FetchCache:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used_bytes = 0
        self._entries: OrderedDict[BatchKey, bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_convert(self, key: BatchKey, convert: Callable[[], bytes]) -> bytes:
        """The converted batch: from the cache, else `convert()`d and remembered (unless
        it alone is over the budget)."""
        entries = self._entries
        found = entries.get(key)
        if found is not None:
            entries.move_to_end(key)
            return found
        converted = convert()
        size = len(converted)
        if size > self.max_bytes:
            return converted
        entries[key] = converted
        self.used_bytes += size
        while self.used_bytes > self.max_bytes:
            _, evicted = entries.popitem(last=False)
            self.used_bytes -= len(evicted)
        return converted
