"""The stream of fuzzed frames: a deterministic function of the seed and the target.

Frames are made a chunk at a time, before the chunk is sent, from a pool of valid
samples renewed every chunk: building a request (and its marks) costs tens of
microseconds, a mutation of its bytes a few, and the broker must be kept busy. Which
connection carries which frame depends on timing; the frames themselves do not.
"""

from __future__ import annotations

import random
import struct
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.mutations import (
    Sample,
    broken_frame,
    mutated_frame,
    random_stream,
    sample_of,
    splice,
)
from tests.fuzz.requests import CLIENT_IDS, RequestGenerator, Target, all_api_keys, frame
from tests.fuzz.triage import FrameKind, triage

# Fresh valid samples per chunk.
POOL_SIZE = 300
# (how a frame is made, weight)
MODES = (("valid", 15), ("mutated", 52), ("splice", 8), ("broken", 12), ("random", 13))
_KIND_CODES = {kind: index for index, kind in enumerate(FrameKind)}
_RECORD = struct.Struct(">BI")


@dataclass(frozen=True, slots=True)
class FuzzFrame:
    data: bytes
    kind: FrameKind


class FrameSource:
    """Makes chunks of fuzzed frames for one Target; counts what it had to leave out."""

    def __init__(self, target: Target, rng: random.Random, max_frame_bytes: int) -> None:
        self.rng = rng
        self.max_frame_bytes = max_frame_bytes
        self.target = target
        self.hazards_skipped = 0
        self.kinds: Counter[str] = Counter()
        self._modes = [mode for mode, _ in MODES]
        self._weights = [weight for _, weight in MODES]
        self._pool: list[Sample] = []

    def retarget(self, target: Target) -> None:
        """After a broker restart: its epoch (and so the valid controller requests) changed."""
        self.target = target

    def chunk(self, count: int) -> list[FuzzFrame]:
        self._renew_pool()
        frames: list[FuzzFrame] = []
        while len(frames) < count:
            data = self._make()
            kind = triage(data, self.target, self.max_frame_bytes)
            if kind is None:
                self.hazards_skipped += 1
                continue
            self.kinds[kind.value] += 1
            frames.append(FuzzFrame(data, kind))
        return frames

    def _renew_pool(self) -> None:
        generator = RequestGenerator(self.target, self.rng)
        keys = all_api_keys()
        self._pool = [
            sample_of(
                generator.request(self.rng.choice(keys)),
                self.rng.randrange(-(2**31), 2**31),
                self.rng.choice(CLIENT_IDS),
            )
            for _ in range(POOL_SIZE)
        ]

    def _make(self) -> bytes:
        mode = self.rng.choices(self._modes, self._weights)[0]
        sample = self.rng.choice(self._pool)
        if mode == "valid":
            return frame(sample.payload)
        if mode == "mutated":
            return mutated_frame(sample, self.rng)
        if mode == "splice":
            return frame(splice(sample, self.rng.choice(self._pool), self.rng))
        if mode == "broken":
            return broken_frame(sample, self.rng)
        return random_stream(self.rng)


def save_frames(path: Path, frames: Iterable[FuzzFrame]) -> None:
    """Write frames for replay: per frame its kind, its length, its bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        for item in frames:
            out.write(_RECORD.pack(_KIND_CODES[item.kind], len(item.data)))
            out.write(item.data)


def load_frames(path: Path) -> Iterator[FuzzFrame]:
    kinds = list(FrameKind)
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        code, length = _RECORD.unpack_from(data, pos)
        pos += _RECORD.size
        yield FuzzFrame(data[pos : pos + length], kinds[code])
        pos += length
