"""Where each input record goes, computed a whole Arrow batch at a time.

Spark hands the writer Arrow batches of thousands of rows; routing them one Python row
at a time would cost more than everything else the sink does. So every step here is
Arrow compute over whole columns: the cast of key and value to binary, the topic of each
row, Kafka's murmur2 of the key, the placing of keyless records, and the grouping into
slices per topic-partition.

Routing follows Spark's Kafka sink and Kafka's default partitioner:

- the `topic` option overrides the `topic` column; a null topic without the option fails;
- a non-null `partition` column wins;
- otherwise a non-null key picks `(murmur2(key) & 0x7fffffff) % partitions`, the same
  partition Kafka's producer picks for that key;
- keyless records are sticky, as with Kafka's default partitioner since 2.4 (KIP-480,
  KIP-794): they fill one partition with a batch's worth of bytes (`run_bytes`, the
  sink's batch size), then move on to the next, round robin, starting at a partition
  derived from the task's partition id (and, in a stream, the micro-batch id). Whole
  runs of input rows then go to one partition, so a chunk is cut into a few slices
  instead of being reordered record by record, and each batch holds as many records as
  the batch size allows.

Every choice is a function of the task's input, its partition id, the micro-batch id
and the batch size only (never of time, randomness or how Spark chunked the input),
which exactly-once streaming writes need: a replayed task must send every record to the
same partition, in the same order. So a keyless record's partition follows from the
bytes of the keyless records before it, not from when a batch happened to fill.

Pure: no I/O. The caller looks up partition counts between `topics` and `route`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from spark_replica.errors import ConfigError, InvalidTopicError
from spark_replica.records import HEADER_TYPE
from spark_replica.topics import validate_topic_name

_M = pa.scalar(0x5BD1E995, pa.uint32())
_SEED = pa.scalar(0x9747B28C, pa.uint32())
_POSITIVE_MASK = pa.scalar(0x7FFFFFFF, pa.uint32())

# What a record costs in a batch beyond its key, value and header bytes (offsets and the
# timestamp); per header, its two offsets. Only used to size batches.
RECORD_OVERHEAD_BYTES = 16
HEADER_OVERHEAD_BYTES = 8


def _u32(value: int) -> pa.Scalar:
    return pa.scalar(value, pa.uint32())


def _i64(value: int) -> pa.Scalar:
    """A typed scalar: pyarrow converts a bare Python int in a compute call ~10x slower."""
    return pa.scalar(value, pa.int64())


_RECORD_OVERHEAD = _i64(RECORD_OVERHEAD_BYTES)
_HEADER_OVERHEAD = _i64(HEADER_OVERHEAD_BYTES)
_FOUR = _i64(4)
_TOPIC_STRIDE = 2**31  # group key = topic index * stride + partition
# A chunk whose rows fall into at most this many runs of one topic-partition is cut into
# slices in input order; beyond it, the rows are sorted by topic-partition first.
MAX_SLICED_RUNS = 16


def _byte_at(data: pa.Array, positions: pa.Array) -> pa.Array:
    return pc.cast(pc.take(data, positions), pa.uint32())


def _shift_xor(h: pa.Array, bits: int) -> pa.Array:
    return pc.bit_wise_xor(h, pc.shift_right(h, _u32(bits)))


def murmur2_array(keys: pa.Array) -> pa.Array:
    """Kafka's murmur2 of every key as uint32 (the bits of its signed int32 result).

    Null keys get a meaningless value; callers mask them. Loops over the 4-byte words of
    the longest key, each step over the whole column: uint32 arithmetic wraps exactly
    as the hash needs.
    """
    keys = _as_binary(keys)
    count = len(keys)
    if count == 0:
        return pa.array([], pa.uint32())
    _, offsets_buffer, data_buffer = keys.buffers()
    starts = pc.cast(
        pa.Array.from_buffers(pa.int32(), count, [None, offsets_buffer], offset=keys.offset),
        pa.int64(),
    )
    lengths = pc.cast(pc.fill_null(pc.binary_length(keys), 0), pa.int64())
    h = pc.bit_wise_xor(_SEED, pc.cast(lengths, pa.uint32()))
    data_size = 0 if data_buffer is None else data_buffer.size
    if data_size == 0:
        return _finish(h)
    data = pa.Array.from_buffers(pa.uint8(), data_size, [None, data_buffer])
    words = pc.divide(lengths, _FOUR)
    zero = _i64(0)
    for word in range(pc.max(words).as_py()):
        active = pc.greater(words, _i64(word))
        base = pc.if_else(active, pc.add(starts, _i64(4 * word)), zero)
        k = _byte_at(data, base)
        for shift in (1, 2, 3):
            part = _byte_at(data, pc.add(base, _i64(shift)))
            k = pc.bit_wise_or(k, pc.shift_left(part, _u32(8 * shift)))
        k = pc.multiply(_shift_xor(pc.multiply(k, _M), 24), _M)
        h = pc.if_else(active, pc.bit_wise_xor(pc.multiply(h, _M), k), h)
    tail = pc.subtract(lengths, pc.multiply(words, _FOUR))
    tail_start = pc.add(starts, pc.multiply(words, _FOUR))
    for index, shift in ((2, 16), (1, 8), (0, 0)):
        has = pc.greater(tail, _i64(index))
        position = pc.if_else(has, pc.add(tail_start, _i64(index)), zero)
        mixed = pc.bit_wise_xor(h, pc.shift_left(_byte_at(data, position), _u32(shift)))
        h = pc.if_else(has, mixed, h)
    h = pc.if_else(pc.greater(tail, zero), pc.multiply(h, _M), h)
    return _finish(h)


def _finish(h: pa.Array) -> pa.Array:
    return _shift_xor(pc.multiply(_shift_xor(h, 13), _M), 15)


def key_partitions(keys: pa.Array, partitions: pa.Array | int) -> pa.Array:
    """Kafka's default partition for each key: `(murmur2 & 0x7fffffff) % partitions`."""
    positive = pc.cast(pc.bit_wise_and(murmur2_array(keys), _POSITIVE_MASK), pa.int64())
    return pc.modulo(positive, _i64(partitions) if isinstance(partitions, int) else partitions)


def _as_binary(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column if column.type == pa.binary() else column.cast(pa.binary())


def sink_payload(chunk: pa.RecordBatch, has_key: bool, has_headers: bool) -> pa.RecordBatch:
    """The key (binary, null when absent), value (binary) and headers of each input row."""
    count = chunk.num_rows
    key = _as_binary(chunk.column("key")) if has_key else pa.nulls(count, pa.binary())
    arrays = [key, _as_binary(chunk.column("value"))]
    names = ["key", "value"]
    if has_headers:
        headers = chunk.column("headers")
        arrays.append(headers if headers.type == HEADER_TYPE else headers.cast(HEADER_TYPE))
        names.append("headers")
    return pa.RecordBatch.from_arrays(arrays, names=names)


def record_sizes(payload: pa.RecordBatch) -> pa.Array:
    """Bytes each record adds to a batch (int64): what batches are sized by."""
    sizes = pc.add(
        pc.fill_null(pc.binary_length(payload.column("key")), 0),
        pc.fill_null(pc.binary_length(payload.column("value")), 0),
    )
    sizes = pc.add(pc.cast(sizes, pa.int64()), _RECORD_OVERHEAD)
    if "headers" in payload.schema.names:
        sizes = pc.add(sizes, _header_bytes(payload.column("headers")))
    return sizes


def _header_bytes(headers: pa.Array) -> pa.Array:
    """Per record, the bytes of its headers: prefix sums over the flattened headers."""
    items = headers.flatten()
    item_sizes = pc.add(
        pc.cast(
            pc.add(
                pc.fill_null(pc.binary_length(items.field("key")), 0),
                pc.fill_null(pc.binary_length(items.field("value")), 0),
            ),
            pa.int64(),
        ),
        _HEADER_OVERHEAD,
    )
    running = pa.concat_arrays(
        [pa.array([0], pa.int64()), pc.cumulative_sum(item_sizes).cast(pa.int64())]
    )
    counts = pc.cast(pc.fill_null(pc.list_value_length(headers), 0), pa.int64())
    ends = pc.cumulative_sum(counts)
    starts = pc.subtract(ends, counts)
    return pc.subtract(pc.take(running, ends), pc.take(running, starts))


@dataclass(frozen=True, slots=True)
class ChunkTopics:
    """The distinct topics of one input chunk and each row's index into them."""

    names: list[str]
    indexes: pa.Array | None  # None: every row has names[0]


@dataclass(frozen=True, slots=True)
class Routed:
    """A run of one chunk's records bound for one topic-partition, in input order.

    A chunk may give several for the same topic-partition; they come in input order.
    """

    topic: str
    partition: int
    records: pa.RecordBatch
    sizes: pa.Array


class Router:
    """Routes one task's input, chunk after chunk, as if it were one stream.

    State carried across chunks: the number of rows seen (for error messages) and, per
    topic, the bytes of the keyless records placed so far, so that keyless runs continue
    where they left off whatever the chunk boundaries.
    """

    def __init__(self, topic_option: str | None, keyless_start: int, run_bytes: int) -> None:
        """`keyless_start`: the first keyless run goes to this partition (modulo the count)."""
        if run_bytes < 1:
            raise ConfigError(f"keyless runs need a positive size, not {run_bytes} bytes")
        self.topic_option = topic_option
        self.keyless_start = keyless_start
        self.run_bytes = run_bytes
        self._rows_seen = 0
        self._keyless_bytes: dict[str, int] = {}

    def topics(self, chunk: pa.RecordBatch) -> ChunkTopics:
        """The topics the chunk writes to; a null or illegal topic fails, naming the row."""
        if self.topic_option is not None:
            return ChunkTopics([self.topic_option], None)
        column = chunk.column("topic")
        if column.null_count:
            row = self._rows_seen + pc.index(pc.is_null(column), True).as_py()
            raise ConfigError(
                f"column 'topic' is null in row {row} of this task's input (counting from 0) "
                "and no 'topic' option is set: give every row a topic, or set the 'topic' "
                "option"
            )
        encoded = pc.dictionary_encode(column)
        names = [str(name) for name in encoded.dictionary.to_pylist()]
        for name in names:
            try:
                validate_topic_name(name)
            except InvalidTopicError as exc:
                raise ConfigError(f"column 'topic': {exc}") from exc
        if len(names) == 1:
            return ChunkTopics(names, None)
        return ChunkTopics(names, pc.cast(encoded.indices, pa.int64()))

    def route(
        self,
        chunk: pa.RecordBatch,
        payload: pa.RecordBatch,
        topics: ChunkTopics,
        partition_counts: Mapping[str, int],
    ) -> list[Routed]:
        """Split `payload` (the chunk's sink columns) into per-topic-partition slices."""
        count = chunk.num_rows
        try:
            if count == 0:
                return []
            counts = [partition_counts[name] for name in topics.names]
            per_row_count: pa.Array | int = (
                counts[0]
                if topics.indexes is None
                else pc.take(pa.array(counts, pa.int64()), topics.indexes)
            )
            keys = payload.column("key")
            sizes = record_sizes(payload)
            if (
                keys.null_count == count
                and topics.indexes is None
                and "partition" not in chunk.schema.names
            ):
                return self._keyless_runs(payload, sizes, topics.names[0], counts[0])
            if keys.null_count == count:  # no keys at all: nothing to hash
                chosen = self._place_keyless(keys, sizes, topics, counts)
            elif keys.null_count == 0:
                chosen = key_partitions(keys, per_row_count)
            else:
                chosen = pc.if_else(
                    pc.is_null(keys),
                    self._place_keyless(keys, sizes, topics, counts),
                    key_partitions(keys, per_row_count),
                )
            if "partition" in chunk.schema.names:
                explicit = pc.cast(chunk.column("partition"), pa.int64())
                self._check_partitions(explicit, per_row_count, topics)
                chosen = pc.coalesce(explicit, chosen)
            return self._split(payload, sizes, topics, chosen)
        finally:
            self._rows_seen += count

    def _keyless_runs(
        self, payload: pa.RecordBatch, sizes: pa.Array, topic: str, partitions: int
    ) -> list[Routed]:
        """The slices of a chunk of keyless records for one topic, one per run touched.

        The same placement as `_place_keyless`, found from the run boundaries instead of
        a partition per record: a chunk usually touches one or two runs, so this costs a
        few calls however many records it holds.
        """
        before = self._keyless_bytes.get(topic, 0)
        ends = pc.cumulative_sum(sizes)
        starts = pc.subtract(ends, sizes)  # each record's first byte, from this chunk's
        total = ends[-1].as_py()
        first_run = before // self.run_bytes
        last_run = (before + starts[-1].as_py()) // self.run_bytes
        cuts = [0]
        for run in range(first_run + 1, last_run + 1):
            boundary = _i64(run * self.run_bytes - before)
            cuts.append(pc.search_sorted(starts, boundary, side="left").as_py())
        cuts.append(len(payload))
        self._keyless_bytes[topic] = before + total
        ranges: list[tuple[int, int, int]] = []  # (start, end, partition)
        for run, (start, end) in enumerate(itertools.pairwise(cuts), first_run):
            partition = (run + self.keyless_start) % partitions
            if start == end:
                continue  # a record longer than a run: no record starts in this one
            if ranges and ranges[-1][2] == partition:
                start = ranges.pop()[0]
            ranges.append((start, end, partition))
        return [
            Routed(
                topic, partition, payload.slice(start, end - start), sizes.slice(start, end - start)
            )
            for start, end, partition in ranges
        ]

    def _place_keyless(
        self, keys: pa.Array, sizes: pa.Array, topics: ChunkTopics, counts: list[int]
    ) -> pa.Array:
        """Per topic, the run of `run_bytes` each keyless record starts in picks its partition."""
        keyless = pc.is_null(keys)
        placed = pa.nulls(len(keys), pa.int64())
        if not keyless.true_count:
            return placed
        zero = _i64(0)
        for index, name in enumerate(topics.names):
            mask = (
                keyless
                if topics.indexes is None
                else pc.and_(keyless, pc.equal(topics.indexes, index))
            )
            if not mask.true_count:
                continue
            before = self._keyless_bytes.get(name, 0)
            own = pc.if_else(mask, sizes, zero)
            running = pc.cumulative_sum(own)
            starts = pc.add(pc.subtract(running, own), _i64(before))
            runs = pc.divide(starts, _i64(self.run_bytes))  # integer division: the run index
            partition = pc.modulo(pc.add(runs, _i64(self.keyless_start)), _i64(counts[index]))
            placed = pc.if_else(mask, partition, placed)
            self._keyless_bytes[name] = before + running[-1].as_py()
        return placed

    def _check_partitions(
        self, explicit: pa.Array, per_row_count: pa.Array | int, topics: ChunkTopics
    ) -> None:
        bad = pc.fill_null(
            pc.or_(
                pc.less(explicit, _i64(0)),
                pc.greater_equal(
                    explicit,
                    _i64(per_row_count) if isinstance(per_row_count, int) else per_row_count,
                ),
            ),
            False,
        )
        if not bad.true_count:
            return
        index = pc.index(bad, True).as_py()
        topic = topics.names[0 if topics.indexes is None else topics.indexes[index].as_py()]
        limit = per_row_count if isinstance(per_row_count, int) else per_row_count[index].as_py()
        raise ConfigError(
            f"column 'partition' is {explicit[index].as_py()} in row {self._rows_seen + index} "
            f"of this task's input (counting from 0), but topic {topic!r} has partitions "
            f"0..{limit - 1}"
        )

    @staticmethod
    def _split(
        payload: pa.RecordBatch, sizes: pa.Array, topics: ChunkTopics, chosen: pa.Array
    ) -> list[Routed]:
        """Slices of `payload` per topic-partition, each in input order.

        Rows already in a few runs (keyless records, a partition column set in blocks)
        are sliced where they are, without copying; scattered rows are first sorted by
        topic-partition (stably) into one slice each.
        """
        group = (
            chosen
            if topics.indexes is None
            else pc.add(pc.multiply(topics.indexes, _i64(_TOPIC_STRIDE)), chosen)
        )
        runs = pc.run_end_encode(group)
        if len(runs.run_ends) > MAX_SLICED_RUNS:
            order = pc.sort_indices(group)
            payload, sizes = payload.take(order), pc.take(sizes, order)
            runs = pc.run_end_encode(pc.take(group, order))
        routed = []
        start = 0
        for end, value in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
            topic_index, partition = divmod(value, _TOPIC_STRIDE)
            routed.append(
                Routed(
                    topics.names[topic_index],
                    partition,
                    payload.slice(start, end - start),
                    sizes.slice(start, end - start),
                )
            )
            start = end
        return routed
