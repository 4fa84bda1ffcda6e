"""Fuzzed frames for the Kafka listener: valid requests of the APIs Kafka's clients use,
encoded with the listener's own tables, then mutated a byte at a time.

The replog source (source.py) knows where each field of its samples sits; these samples
are mutated blind (flips, cuts, insertions, boundary integers at any offset), which is
enough to walk the decoders' length and count checks: the pointed cases (counts of
2^31-1, bombs, repeated partitions) come from hostile.py. Nothing is decoded here, so
the kinds are decided by API: a Fetch may rightly be parked up to its (mutated) wait and
is never awaited; everything else is answered or closes the connection. Requests that
would spoil the run (CreateTopics, DeleteTopics, JoinGroup, which waits for a rebalance)
are not among the samples.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from spark_replica.wire.kafka.versions import REQUESTS
from spark_replica.wire.native.frames import SIZE
from spark_replica.wire.schema import Data
from tests.fuzz.bombs import GZIP, ZSTD, kafka_records_batch
from tests.fuzz.mutations import (
    Sample,
    broken_frame,
    delete,
    extend,
    flip_bit,
    insert,
    mutate_payload,
    random_stream,
    set_byte,
    truncate,
)
from tests.fuzz.requests import Target, frame, header_bytes
from tests.fuzz.source import FuzzFrame
from tests.fuzz.triage import FrameKind

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, HEARTBEAT = 8, 9, 10, 12
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS, INIT_PRODUCER_ID = 15, 16, 18, 22
OFFSET_FOR_LEADER_EPOCH = 23
GROUP = "fuzz-group"
POOL_SIZE = 200
# (how a frame is made, weight)
MODES = (("valid", 15), ("mutated", 65), ("broken", 10), ("random", 10))
BOUNDARY_INTS = (0, -1, 1, 2**31 - 1, -(2**31), 2**15 - 1)
_WIDTHS = (2, 4)


def kafka_header(api_key: int, version: int, correlation_id: int) -> bytes:
    """Kafka's request header: v1, or v2 (tagged fields, none) for a flexible version."""
    header = header_bytes(api_key, correlation_id, version=version, client_id="fuzz")
    return header + b"\x00" if REQUESTS[api_key].is_flexible(version) else header


def kafka_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    return frame(kafka_header(api_key, version, correlation_id) + body)


def encode(api_key: int, version: int, **fields: Any) -> bytes:
    return REQUESTS[api_key].to_bytes(version, Data(**fields))


def _partitions(topics: dict[str, int], rng: random.Random) -> tuple[str, list[int]]:
    name = rng.choice(list(topics))
    count = topics[name]
    return name, rng.sample(range(count), rng.randint(1, count))


def sample_requests(target: Target, rng: random.Random) -> list[tuple[int, int, bytes]]:
    """(api key, version, body) of valid requests on the topics under fuzz."""
    topics = target.topics
    name, partitions = _partitions(topics, rng)
    batch = kafka_records_batch(rng.randint(1, 5), rng.choice([0, 0, GZIP, ZSTD]))
    produce_topics = [
        Data(name=name, partition_data=[Data(index=p, records=batch) for p in partitions])
    ]
    fetch_topics = [
        Data(
            topic=name,
            partitions=[
                Data(partition=p, fetch_offset=rng.randint(0, 20), partition_max_bytes=1 << 16)
                for p in partitions
            ],
        )
    ]
    offsets_topics = [
        Data(name=name, partitions=[Data(partition_index=p, timestamp=-1) for p in partitions])
    ]
    acks = rng.choice([1, -1, 0])
    version = rng.randint
    return [
        (API_VERSIONS, 0, b""),
        (API_VERSIONS, 3, encode(API_VERSIONS, 3, client_software_name="fuzz")),
        (METADATA, m := version(0, 9), encode(METADATA, m, topics=[Data(name=name)])),
        (METADATA, 1, encode(METADATA, 1, topics=None)),
        (
            PRODUCE,
            p := version(3, 8),
            encode(PRODUCE, p, acks=acks, timeout_ms=1000, topic_data=produce_topics),
        ),
        (
            FETCH,
            f := version(4, 11),
            encode(FETCH, f, replica_id=-1, max_wait_ms=0, min_bytes=0, topics=fetch_topics),
        ),
        (LIST_OFFSETS, o := version(1, 6), encode(LIST_OFFSETS, o, topics=offsets_topics)),
        (FIND_COORDINATOR, c := version(0, 3), encode(FIND_COORDINATOR, c, key=GROUP)),
        (
            OFFSET_FETCH,
            1,
            encode(
                OFFSET_FETCH,
                1,
                group_id=GROUP,
                topics=[Data(name=name, partition_indexes=partitions)],
            ),
        ),
        (
            HEARTBEAT,
            0,
            encode(HEARTBEAT, 0, group_id=GROUP, generation_id=1, member_id="no-such-member"),
        ),
        (DESCRIBE_GROUPS, 0, encode(DESCRIBE_GROUPS, 0, groups=[GROUP])),
        (LIST_GROUPS, 0, b""),
        (INIT_PRODUCER_ID, 0, encode(INIT_PRODUCER_ID, 0, transaction_timeout_ms=1000)),
    ]


def boundary_int(data: bytearray, rng: random.Random, _: Sample) -> None:
    """An int16 or int32 at any offset set to a boundary value (counts and lengths are)."""
    width = rng.choice(_WIDTHS)
    if len(data) >= width:
        at = rng.randrange(len(data) - width + 1)
        value = rng.choice(BOUNDARY_INTS) & ((1 << (8 * width)) - 1)
        data[at : at + width] = value.to_bytes(width, "big")


EDITS = (flip_bit, set_byte, boundary_int, boundary_int, truncate, extend, insert, delete)


@dataclass(frozen=True, slots=True)
class _Sample:
    sample: Sample
    kind: FrameKind


class KafkaFrameSource:
    """Chunks of fuzzed Kafka frames; the same interface as source.FrameSource."""

    def __init__(self, target: Target, rng: random.Random) -> None:
        self.target = target
        self.rng = rng
        self.hazards_skipped = 0
        self.kinds: Counter[str] = Counter()
        self._pool: list[_Sample] = []

    def retarget(self, target: Target) -> None:
        self.target = target

    def chunk(self, count: int) -> list[FuzzFrame]:
        self._renew_pool()
        frames = [self._make() for _ in range(count)]
        self.kinds.update(item.kind.value for item in frames)
        return frames

    def _renew_pool(self) -> None:
        self._pool = []
        while len(self._pool) < POOL_SIZE:
            for api_key, version, body in sample_requests(self.target, self.rng):
                header = kafka_header(api_key, version, self.rng.randrange(2**31))
                kind = FrameKind.UNWAITED if api_key == FETCH else FrameKind.ANSWERED
                self._pool.append(_Sample(Sample(api_key, header, body, ()), kind))

    def _make(self) -> FuzzFrame:
        mode = self.rng.choices([m for m, _ in MODES], [w for _, w in MODES])[0]
        item = self.rng.choice(self._pool)
        if mode == "valid":
            return FuzzFrame(frame(item.sample.payload), item.kind)
        if mode == "mutated":
            data = frame(mutate_payload(item.sample, self.rng, EDITS))
            return FuzzFrame(data, item.kind)
        if mode == "broken":
            return FuzzFrame(broken_frame(item.sample, self.rng), FrameKind.CLOSING)
        data = random_stream(self.rng)
        whole = len(data) >= SIZE.size and SIZE.unpack_from(data)[0] == len(data) - SIZE.size
        return FuzzFrame(data, FrameKind.ANSWERED if whole else FrameKind.CLOSING)
