"""Turning one Kafka fetch answer's stored batches into Kafka batches, within its limits.

Fetch limits are Kafka's (KIP-74) and count the bytes sent, so they are applied to the
converted batches, not to the stored ones they came from: a stored batch can be a few
kilobytes of Arrow-compressed payload that holds hundreds of megabytes of records. The
answer holds, partition after partition, the batches that fit in the smaller of the
partition's limit and what the request's limit leaves, except that the first batch of
the answer goes in whatever its size, so that a consumer always moves on (Kafka returns
at least one batch). Once the request's limit is spent, later partitions answer no
records.

Converting can take long (decompressing, writing varints, compressing), so it runs in a
worker thread; but most batches of a busy topic are small and uncompressed, and a
thread hop would cost them more than converting them. So `Conversion.run` goes first on
the event loop converting only such cheap batches (up to INLINE_STORED_BYTES of them per
answer) and stops at the first other one; the caller then finishes the same Conversion
in a worker thread, from where it stopped.

Kafka's clients read zstd from Fetch v10 on (KIP-110); Kafka's broker answers an older
Fetch of a zstd batch with UNSUPPORTED_COMPRESSION_TYPE. Converting anyway, replog
sends such a client the batch uncompressed instead.

Pure logic over the shared cache (fetch_cache.py, thread-safe); no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokerd.core.partitions import SERVING_ERRORS, set_error
from brokerd.kafka.fetch_cache import BatchKey, FetchCache
from spark_replica.errors import CorruptMessageError, CorruptRecordError
from spark_replica.records import COMPRESSION_MASK, BatchHeader, iter_batches
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.records.compress import NONE, ZSTD
from spark_replica.wire.kafka.records.convert import fetch_codec, replog_batch_to_kafka
from spark_replica.wire.schema import Data

# Stored bytes of uncompressed batches one answer may convert on the event loop: about
# a millisecond of work. Anything else is converted in a worker thread.
INLINE_STORED_BYTES = 256 * 1024


@dataclass(slots=True)
class StoredRead:
    """What one partition's read found: the stored batches, and where the answer goes."""

    result: Data
    tp: TopicPartition
    stored: bytes
    max_bytes: int  # the partition's limit in the request
    compression_type: str  # the topic's compression.type


class Conversion:
    """The conversion of one answer's reads, resumable: see the module's notes."""

    def __init__(
        self, reads: list[StoredRead], max_bytes: int, cache: FetchCache, zstd: bool = True
    ) -> None:
        self.reads = reads
        self.cache = cache
        self.zstd = zstd  # whether the client reads zstd (Fetch v10+)
        self.remaining = max_bytes  # of the request's limit
        self.sent = False  # a batch is in the answer: later ones must fit
        self._inline_left = INLINE_STORED_BYTES
        self._index = 0  # the read in progress
        self._batches: list[tuple[BatchHeader, memoryview]] | None = None
        self._next = 0  # its next batch
        self._taken: list[bytes] = []
        self._budget = 0  # what its limit leaves

    def run(self, inline: bool) -> bool:
        """Convert on from where the last run stopped; True once every read is answered.

        With `inline`, stop (returning False) before the first conversion that is not
        cheap enough for the event loop.
        """
        while self._index < len(self.reads):
            read = self.reads[self._index]
            try:
                if not self._convert_read(read, inline):
                    return False
                read.result.records = self._taken
            except (*SERVING_ERRORS, CorruptRecordError) as exc:
                error = exc if isinstance(exc, SERVING_ERRORS) else CorruptMessageError(str(exc))
                set_error(read.result, error)
                read.result.records = b""
            self._index += 1
            self._batches = None
        return True

    def _convert_read(self, read: StoredRead, inline: bool) -> bool:
        if self._batches is None:
            self._batches = list(iter_batches(read.stored))
            self._next = 0
            self._taken = []
            self._budget = min(read.max_bytes, self.remaining)
        topic, partition = read.tp
        batches, taken, cache = self._batches, self._taken, self.cache
        codecs: dict[int, int] = {}  # attributes -> codec: a read's batches share a few
        while self._next < len(batches):
            if self.sent and self._budget <= 0:
                break
            header, batch = batches[self._next]
            codec = codecs.get(header.attributes)
            if codec is None:
                codec = fetch_codec(header.attributes, read.compression_type)
                if codec == ZSTD and not self.zstd:
                    codec = NONE
                codecs[header.attributes] = codec
            key = BatchKey(
                topic, partition, header.base_offset, header.leader_epoch, header.crc, codec
            )
            converted = cache.get(key)
            if converted is None:
                if inline and not self._cheap(header, batch, codec):
                    return False
                converted = replog_batch_to_kafka(batch, codec)
                cache.put(key, converted)
            size = len(converted)
            if self.sent and size > self._budget:
                break
            taken.append(converted)
            self._budget -= size
            self.remaining -= size
            self.sent = True
            self._next += 1
        return True

    def _cheap(self, header: BatchHeader, batch: memoryview, codec: int) -> bool:
        """Whether converting `batch` on the event loop costs little: its records are
        stored and sent uncompressed, and the answer's inline allowance covers it."""
        if codec != NONE or header.attributes & COMPRESSION_MASK or len(batch) > self._inline_left:
            return False
        self._inline_left -= len(batch)
        return True
