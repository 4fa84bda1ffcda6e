"""The hostile cases: requests an attacker or a careless client sends on purpose.

Where the mutational fuzz stumbles on a lying size now and then, these aim at it, on
either listener (`replog` or `kafka`, each in its own protocol):

- count lies: an array count, string length or bytes length of its type's maximum
  (2^31-1, 32767) followed by a few bytes; a record batch claiming 2^31-1 records;
- compression bombs: a Produce of one batch of a few kilobytes that decompresses to
  8 MiB - 256 MiB (zstd and gzip on the Kafka listener, Arrow's zstd on replog's);
- one partition repeated hundreds of times in one Produce, each entry a small bomb;
- sizes that lie: a frame declaring up to the size limit (or 2^31-1) then ending.

Those are whole frames (`HostileFrames.frame`), mixed into the chunks by `HostileMix`:
each ends in an answer or a closed connection, and either is fine; a hang, a crash or a
swollen broker is what the run reports. The cases that need a connection to themselves
and time (`HostileFrames.lane_case`) go to the slow lane (lane.py): frames trickled a
byte at a time, a huge declared size then nothing, and with SASL the requests sent
before login (a Metadata of 1,000,000 null topics, a bomb, an oversized
SaslAuthenticate, a request between handshake and authenticate).

Pure: a `random.Random` in, bytes out; the bombs are built once (bombs.py).
"""

from __future__ import annotations

import random
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from spark_replica.wire.kafka.versions import REQUESTS
from spark_replica.wire.native import ApiKey
from spark_replica.wire.native.frames import SIZE
from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic
from spark_replica.wire.schema import Data
from tests.fuzz.bombs import (
    GZIP,
    ZSTD,
    kafka_bomb,
    kafka_count_lie,
    replog_bomb,
    replog_count_lie,
)
from tests.fuzz.kafka_frames import kafka_frame, kafka_header
from tests.fuzz.login import KAFKA, MECHANISM
from tests.fuzz.mutations import sample_of
from tests.fuzz.requests import RequestGenerator, Target, body_of, request_frame
from tests.fuzz.source import FuzzFrame
from tests.fuzz.triage import FrameKind

INT32_MAX = 2**31 - 1
INT16_MAX = 2**15 - 1
MIB = 1 << 20
BOMB_SIZES = (8 * MIB, 64 * MIB, 256 * MIB)
# Each entry of a repeated-partition Produce: small, so hundreds fit in a frame.
REPEATED_BOMB_SIZE = 16 * MIB
REPEATS = (100, 300, 600)
# Arrow's bomb is built from a real column: kept to one size the harness can hold.
REPLOG_BOMB_SIZE = 64 * MIB
NULL_TOPICS = 1_000_000
# Above Kafka's sasl.server.max.receive.size (524288).
OVERSIZED_SASL_BYTES = 600 * 1024
# Share of a hostile run's frames that are hostile cases.
HOSTILE_SHARE = 0.05
KAFKA_PRODUCE_VERSIONS = (3, 8)


@dataclass(frozen=True)
class LaneCase:
    """A case for a connection of its own: `prelude` sent at once, then `trickle` one
    byte at a time (lane.py holds the connection until the broker closes it or time is up)."""

    name: str
    prelude: bytes
    trickle: bytes = b""


class FrameSourceLike(Protocol):
    @property
    def kinds(self) -> Counter[str]: ...

    @property
    def hazards_skipped(self) -> int: ...

    def chunk(self, count: int) -> list[FuzzFrame]: ...

    def retarget(self, target: Target) -> None: ...


class HostileFrames:
    """Hostile cases for one listener of one target."""

    def __init__(
        self, listener: str, target: Target, rng: random.Random, max_frame_bytes: int, sasl: bool
    ) -> None:
        self.listener = listener
        self.target = target
        self.rng = rng
        self.max_frame_bytes = max_frame_bytes
        self.sasl = sasl
        self.kafka = listener == KAFKA
        self._frames: list[tuple[str, Callable[[], FuzzFrame]]] = [
            ("count-lie-batch", self._count_lie_batch),
            ("bomb", self._bomb),
            ("repeated-partition", self._repeated_partition),
            ("count-lie-field", self._count_lie_field),
            ("size-lie", self._size_lie),
        ]
        self._lane: list[Callable[[], LaneCase]] = [
            self._trickle_huge_size,
            self._trickle_oversize,
            self._trickle_valid,
            self._declared_then_idle,
        ]
        if sasl:
            self._lane += [
                self._prelogin_null_topics,
                self._prelogin_bomb,
                self._oversized_sasl,
                self._request_mid_login,
            ]

    # ----------------------------------------------------------------- whole frames

    def frame(self) -> tuple[str, FuzzFrame]:
        name, make = self.rng.choice(self._frames)
        return name, make()

    def _correlation_id(self) -> int:
        return self.rng.randrange(INT32_MAX)

    def _partition(self) -> tuple[str, int]:
        name = self.rng.choice(list(self.target.topics))
        return name, self.rng.randrange(self.target.topics[name])

    def _produce(self, topic: str, entries: list[tuple[int, bytes]]) -> bytes:
        """A Produce (acks=1) of `entries` (partition, records) to `topic`, framed."""
        if self.kafka:
            version = self.rng.randint(*KAFKA_PRODUCE_VERSIONS)
            partitions = [Data(index=p, records=records) for p, records in entries]
            body = REQUESTS[ApiKey.PRODUCE].to_bytes(
                version,
                Data(
                    acks=1,
                    timeout_ms=1000,
                    topic_data=[Data(name=topic, partition_data=partitions)],
                ),
            )
            return kafka_frame(ApiKey.PRODUCE, version, self._correlation_id(), body)
        request = ProduceRequest(
            1, 1000, [ProduceTopic(topic, [ProducePartition(p, r) for p, r in entries])]
        )
        return request_frame(ApiKey.PRODUCE, body_of(request), self._correlation_id())

    def _count_lie_batch(self) -> FuzzFrame:
        topic, partition = self._partition()
        batch = kafka_count_lie(self.rng.choice([0, ZSTD])) if self.kafka else replog_count_lie()
        return FuzzFrame(self._produce(topic, [(partition, batch)]), FrameKind.ANSWERED)

    def _bomb(self) -> FuzzFrame:
        topic, partition = self._partition()
        if self.kafka:
            batch = kafka_bomb(self.rng.choice([GZIP, ZSTD]), self.rng.choice(BOMB_SIZES))
        else:
            batch = replog_bomb(REPLOG_BOMB_SIZE)
        return FuzzFrame(self._produce(topic, [(partition, batch)]), FrameKind.ANSWERED)

    def _repeated_partition(self) -> FuzzFrame:
        topic, partition = self._partition()
        if self.kafka:
            batch = kafka_bomb(ZSTD, REPEATED_BOMB_SIZE)
        else:
            batch = replog_bomb(REPLOG_BOMB_SIZE)
        entries = [(partition, batch)] * self.rng.choice(REPEATS)
        return FuzzFrame(self._produce(topic, entries), FrameKind.ANSWERED)

    def _count_lie_field(self) -> FuzzFrame:
        """A request whose one count or length is its type's maximum, a few bytes after."""
        tail = self.rng.randbytes(self.rng.randint(0, 16))
        if self.kafka:
            payload = self._kafka_count_lie_payload() + tail
        else:
            payload = self._replog_count_lie_payload() + tail
        return FuzzFrame(SIZE.pack(len(payload)) + payload, FrameKind.ANSWERED)

    def _replog_count_lie_payload(self) -> bytes:
        generator = RequestGenerator(self.target, self.rng, hostile=0.0)
        while True:
            api_key = self.rng.choice([ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH])
            sample = sample_of(generator.request(api_key), self._correlation_id())
            lengths = [m for m in sample.marks if m.is_length]
            if lengths:
                break
        mark = self.rng.choice(lengths)
        limit = INT32_MAX if mark.width == 4 else INT16_MAX
        body = bytearray(sample.body[: mark.offset + mark.width])
        body[mark.offset : mark.offset + mark.width] = limit.to_bytes(mark.width, "big")
        return sample.header + bytes(body)

    def _kafka_count_lie_payload(self) -> bytes:
        topic, partition = self._partition()
        name = struct.pack(">h", len(topic)) + topic.encode()
        produce_head = struct.pack(">hhi", -1, 1, 1000)  # null transactional id, acks, timeout
        choice = self.rng.randrange(5)
        if choice == 0:  # Metadata v1: 2^31-1 topics
            header = kafka_header(ApiKey.METADATA, 1, self._correlation_id())
            return header + struct.pack(">i", INT32_MAX)
        if choice == 1:  # Metadata v9: a compact array of 2^31-1 topics
            return kafka_header(ApiKey.METADATA, 9, self._correlation_id()) + _uvarint(2**31)
        header = kafka_header(ApiKey.PRODUCE, 3, self._correlation_id())
        if choice == 2:  # 2^31-1 topics
            return header + produce_head + struct.pack(">i", INT32_MAX)
        one_topic = header + produce_head + struct.pack(">i", 1) + name
        if choice == 3:  # one topic, 2^31-1 partitions
            return one_topic + struct.pack(">i", INT32_MAX)
        # one partition whose records say 2^31-1 bytes
        return one_topic + struct.pack(">iii", 1, partition, INT32_MAX)

    def _size_lie(self) -> FuzzFrame:
        size = self.rng.choice([self.max_frame_bytes, self.max_frame_bytes // 2, INT32_MAX])
        data = SIZE.pack(size) + self._api_versions()[SIZE.size :]
        return FuzzFrame(data + self.rng.randbytes(self.rng.randint(0, 64)), FrameKind.CLOSING)

    def _api_versions(self) -> bytes:
        if self.kafka:
            return kafka_frame(ApiKey.API_VERSIONS, 0, self._correlation_id(), b"")
        return request_frame(ApiKey.API_VERSIONS, b"", self._correlation_id())

    # ----------------------------------------------------------------- the slow lane

    def lane_case(self) -> LaneCase:
        return self.rng.choice(self._lane)()

    def _trickle_huge_size(self) -> LaneCase:
        """A frame declaring just under the limit, its bytes then trickled."""
        size = self.max_frame_bytes - self.rng.randrange(1024)
        return LaneCase(
            "trickle-huge-size", SIZE.pack(size), self.rng.randbytes(self.rng.randint(8, 64))
        )

    def _trickle_oversize(self) -> LaneCase:
        return LaneCase("trickle-oversize", SIZE.pack(INT32_MAX), self.rng.randbytes(16))

    def _trickle_valid(self) -> LaneCase:
        """A whole valid request, one byte at a time."""
        return LaneCase("trickle-valid", b"", self._api_versions())

    def _declared_then_idle(self) -> LaneCase:
        return LaneCase("declared-then-idle", SIZE.pack(self.rng.choice([64, 1024, 1 << 20])))

    def _prelogin_null_topics(self) -> LaneCase:
        """Metadata of a million null topic names, before any login (2 MB)."""
        if self.kafka:
            body = _uvarint(NULL_TOPICS + 1) + b"\x00\x00" * NULL_TOPICS + b"\x01\x00\x00" + b"\x00"
            data = kafka_frame(ApiKey.METADATA, 9, self._correlation_id(), body)
        else:
            body = struct.pack(">i", NULL_TOPICS) + b"\xff\xff" * NULL_TOPICS
            data = request_frame(ApiKey.METADATA, body, self._correlation_id())
        return LaneCase("prelogin-null-topics", data)

    def _prelogin_bomb(self) -> LaneCase:
        return LaneCase("prelogin-bomb", self._bomb().data)

    def _sasl_handshake(self) -> bytes:
        if self.kafka:
            body = REQUESTS[ApiKey.SASL_HANDSHAKE].to_bytes(1, Data(mechanism=MECHANISM))
            return kafka_frame(ApiKey.SASL_HANDSHAKE, 1, self._correlation_id(), body)
        body = struct.pack(">h", len(MECHANISM)) + MECHANISM.encode()
        return request_frame(ApiKey.SASL_HANDSHAKE, body, self._correlation_id())

    def _oversized_sasl(self) -> LaneCase:
        """A handshake, then a SaslAuthenticate above sasl.server.max.receive.size."""
        auth = struct.pack(">i", OVERSIZED_SASL_BYTES) + bytes(OVERSIZED_SASL_BYTES)
        if self.kafka:
            data = kafka_frame(ApiKey.SASL_AUTHENTICATE, 1, self._correlation_id(), auth)
        else:
            data = request_frame(ApiKey.SASL_AUTHENTICATE, auth, self._correlation_id())
        return LaneCase("oversized-sasl", self._sasl_handshake() + data)

    def _request_mid_login(self) -> LaneCase:
        """A handshake, then a Produce where SaslAuthenticate belongs."""
        topic, partition = self._partition()
        batch = kafka_count_lie() if self.kafka else replog_count_lie()
        produce = self._produce(topic, [(partition, batch)])
        return LaneCase("request-mid-login", self._sasl_handshake() + produce)


class HostileMix:
    """A frame source whose chunks carry a share of hostile frames among its own."""

    def __init__(
        self, base: FrameSourceLike, hostile: HostileFrames, rng: random.Random, share: float
    ) -> None:
        self.base = base
        self.hostile = hostile
        self.rng = rng
        self.share = share
        self.cases: Counter[str] = Counter()

    @property
    def kinds(self) -> Counter[str]:
        return self.base.kinds

    @property
    def hazards_skipped(self) -> int:
        return self.base.hazards_skipped

    def retarget(self, target: Target) -> None:
        self.base.retarget(target)
        self.hostile.target = target

    def chunk(self, count: int) -> list[FuzzFrame]:
        hostile_count = sum(self.rng.random() < self.share for _ in range(count))
        frames = self.base.chunk(count - hostile_count)
        for _ in range(hostile_count):
            name, item = self.hostile.frame()
            self.cases[name] += 1
            frames.insert(self.rng.randrange(len(frames) + 1), item)
        return frames


def _uvarint(value: int) -> bytes:
    """An unsigned varint (compact array and string lengths of flexible versions)."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
