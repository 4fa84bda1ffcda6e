"""Cheap, structure-aware mutations of encoded requests, and random byte streams.

A `Sample` is a valid request already encoded, with the positions of its fields noted
while it was written (`MarkingWriter`): which bytes are an int of which width, and which
of them are a length or a count. Mutations then hit the places decoders trust most (a
string length, an array count, a bytes length) with boundary values, besides the blind
ones (flip a bit, set a byte, cut, extend, insert, delete, splice two requests, change
the api key or version). They work on bytes only, so one costs microseconds, not the
hundreds a fresh request with a record batch would.

Every function takes the `random.Random` to draw from: the fuzzer passes its seeded
one, hypothesis (test_frame_fuzz.py) one of its own.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from spark_replica.wire.native.frames import SIZE
from spark_replica.wire.primitives import Writer
from tests.fuzz.requests import BOUNDARY_INT32, BOUNDARY_INT64, body_of, frame, header_bytes

_FORMATS = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}
_BOUNDARIES = {
    1: [-128, -1, 0, 1, 127],
    2: [-(2**15), -2, -1, 0, 1, 2**15 - 1],
    4: BOUNDARY_INT32,
    8: BOUNDARY_INT64,
}
# The struct codes of the ints a MarkingWriter marks: int16, int32, int64.
_MARKED_INTS = "hiq"
# Where the api key and the api version sit in a request payload (after the size).
API_KEY_AT, API_VERSION_AT = 0, 2


@dataclass(frozen=True, slots=True)
class Mark:
    """An integer field of an encoded body: its offset, width, and whether it is a length."""

    offset: int
    width: int
    is_length: bool


class MarkingWriter(Writer):
    """A Writer that notes where each integer and each length prefix went."""

    __slots__ = ("marks",)

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[Mark] = []

    def _mark(self, width: int, is_length: bool = False) -> None:
        self.marks.append(Mark(len(self), width, is_length))

    def fixed(self, codec: struct.Struct, values: Sequence[Any]) -> None:
        """A run of fixed-width fields: each int16, int32 and int64 of it is marked."""
        offset = len(self)
        for code in codec.format.lstrip(">"):
            width = struct.calcsize(">" + code)
            if code in _MARKED_INTS:
                self.marks.append(Mark(offset, width, False))
            offset += width
        super().fixed(codec, values)

    def int16(self, value: int) -> None:
        self._mark(2)
        super().int16(value)

    def int32(self, value: int) -> None:
        self._mark(4)
        super().int32(value)

    def int64(self, value: int) -> None:
        self._mark(8)
        super().int64(value)

    def string(self, value: str | None) -> None:
        self._mark(2, is_length=True)
        super().string(value)

    def bytes_(self, value: bytes | bytearray | memoryview | None) -> None:
        self._mark(4, is_length=True)
        super().bytes_(value)

    def array_length(self, count: int | None) -> None:
        self._mark(4, is_length=True)
        super().array_length(count)


@dataclass(frozen=True, slots=True)
class Sample:
    """One valid request, encoded: header, body, and the marks of the body's fields."""

    api_key: int
    header: bytes
    body: bytes
    marks: tuple[Mark, ...]

    @property
    def payload(self) -> bytes:
        return self.header + self.body


def sample_of(request: Any, correlation_id: int, client_id: str | None = "fuzz") -> Sample:
    writer = MarkingWriter()
    body = body_of(request, writer)
    header = header_bytes(int(request.API_KEY), correlation_id, client_id=client_id)
    return Sample(int(request.API_KEY), header, body, tuple(writer.marks))


# --------------------------------------------------------------------------- payload edits


def _put_int(data: bytearray, offset: int, width: int, value: int) -> None:
    if offset + width <= len(data):
        struct.pack_into(_FORMATS[width], data, offset, value)


def flip_bit(data: bytearray, rng: random.Random, _: Sample) -> None:
    if data:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)


def set_byte(data: bytearray, rng: random.Random, _: Sample) -> None:
    if data:
        data[rng.randrange(len(data))] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])


def boundary_field(data: bytearray, rng: random.Random, sample: Sample) -> None:
    """Set one integer field of the body to a boundary value of its width."""
    if sample.marks:
        mark = rng.choice(sample.marks)
        value = rng.choice(_BOUNDARIES[mark.width])
        _put_int(data, len(sample.header) + mark.offset, mark.width, value)


def wrong_length(data: bytearray, rng: random.Random, sample: Sample) -> None:
    """Make a string length, bytes length or array count lie: a little or hugely."""
    lengths = [m for m in sample.marks if m.is_length]
    if not lengths:
        return
    mark = rng.choice(lengths)
    at = len(sample.header) + mark.offset
    if at + mark.width > len(data):
        return
    (current,) = struct.unpack_from(_FORMATS[mark.width], data, at)
    limit = 2 ** (8 * mark.width - 1) - 1
    value = rng.choice([current + 1, current - 1, current * 2 + 1, -2, -1, 0, limit])
    _put_int(data, at, mark.width, max(-limit - 1, min(limit, value)))


def truncate(data: bytearray, rng: random.Random, _: Sample) -> None:
    del data[rng.randrange(len(data) + 1) :]


def extend(data: bytearray, rng: random.Random, _: Sample) -> None:
    data += rng.randbytes(rng.choice([1, 2, 4, 8, 64]))


def insert(data: bytearray, rng: random.Random, _: Sample) -> None:
    at = rng.randrange(len(data) + 1)
    data[at:at] = rng.randbytes(rng.randint(1, 8))


def delete(data: bytearray, rng: random.Random, _: Sample) -> None:
    if data:
        at = rng.randrange(len(data))
        del data[at : at + rng.randint(1, 8)]


def change_api(data: bytearray, rng: random.Random, _: Sample) -> None:
    """Another (often known) api key with this body, or an unknown version."""
    if rng.random() < 0.7:
        _put_int(data, API_KEY_AT, 2, rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 18, 19, 20, 22, 23, 37]))
    else:
        _put_int(data, API_VERSION_AT, 2, rng.choice([-1, 1, 2, 2**15 - 1, rng.randrange(2**15)]))


PayloadEdit = Callable[[bytearray, random.Random, Sample], None]
# Field-aware edits are listed twice: they reach further than blind ones.
EDITS: tuple[PayloadEdit, ...] = (
    flip_bit,
    set_byte,
    boundary_field,
    boundary_field,
    wrong_length,
    wrong_length,
    truncate,
    extend,
    insert,
    delete,
    change_api,
)


BODY_EDITS = tuple(edit for edit in EDITS if edit is not change_api)


def mutate_payload(
    sample: Sample, rng: random.Random, edits: tuple[PayloadEdit, ...] = EDITS
) -> bytearray:
    """The sample's header and body with 1 to 3 edits."""
    data = bytearray(sample.payload)
    for _ in range(rng.randint(1, 3)):
        rng.choice(edits)(data, rng, sample)
    return data


def mutate_body(sample: Sample, rng: random.Random) -> bytes:
    """The sample's body alone with 1 to 3 edits (the header is left to the caller)."""
    return bytes(mutate_payload(replace(sample, header=b""), rng, BODY_EDITS))


def splice(first: Sample, second: Sample, rng: random.Random) -> bytes:
    """First's header with second's body, or the start of one body and the end of another."""
    if rng.random() < 0.5:
        return first.header + second.body
    cut_first = rng.randrange(len(first.body) + 1)
    cut_second = rng.randrange(len(second.body) + 1)
    return first.header + first.body[:cut_first] + second.body[cut_second:]


# --------------------------------------------------------------------------- whole frames


def mutated_frame(sample: Sample, rng: random.Random) -> bytes:
    """A frame (size prefix right) whose payload is a mutated sample."""
    return frame(mutate_payload(sample, rng))


def broken_frame(sample: Sample, rng: random.Random) -> bytes:
    """A frame whose size prefix lies, or that is cut off: the stream ends with it."""
    data = frame(sample.payload)
    kind = rng.randrange(3)
    if kind == 0:
        return data[: rng.randrange(len(data))]
    size = rng.choice([-1, 0, 3, 7, len(data), 2**31 - 1, len(data) + rng.randint(1, 64)])
    if kind == 1:
        return SIZE.pack(size) + data[SIZE.size :]
    return SIZE.pack(max(0, len(data) - SIZE.size - rng.randint(1, 16))) + data[SIZE.size :]


def random_stream(rng: random.Random) -> bytes:
    """Noise: raw bytes, or a correct size prefix around noise (with a readable header)."""
    kind = rng.randrange(3)
    noise = rng.randbytes(rng.randint(0, 200))
    if kind == 0:
        return noise
    if kind == 1:
        return frame(noise)
    api_key = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 18, 19, 20, 22, 23, 37, rng.randrange(2**15)])
    return frame(struct.pack(">hhih", api_key, 0, rng.randrange(2**31), -1) + noise)
