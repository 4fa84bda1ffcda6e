"""Sending fuzzed frames to a live broker, and checking on it between chunks.

Several connections run at once, each taking a few frames at a time from the chunk and
pipelining them, followed by a marker request (ApiVersions with a correlation id of the
sender's own): everything read before the marker's answer is an answer to the batch, so
a connection stays in step without modelling every answer. A frame after which the
broker closes or waits (`FrameKind.CLOSING`) goes last on its connection, which is then
half-closed and read to its end; an `UNWAITED` one goes last and the connection is
dropped at once. A new connection follows each one the broker or the sender closed.

Between chunks the broker must still be running (by PID) and answer Metadata on a fresh
connection. If not, the chunk's frames are saved for replay, the broker's logs copied
beside them, and the broker restarted; a batch that got no answer within the deadline
is saved the same way (a hang), and so is one answered UNKNOWN_SERVER_ERROR (a handler
failed in a way nobody meant).

Either listener can be fuzzed: replog's (replog's frames, answers counted by error code)
or Kafka's (kafka_frames.py; answers only counted, their layouts differing by API). With
SASL a share of the connections log in before their first batch, the rest send theirs
unauthenticated. A hostile run (`hostile=True`) mixes hostile.py's cases into the
chunks, holds the slow lane (lane.py) open beside them, and has a well-behaved client
(steady.py) produce throughout; its latencies are in the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import struct
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_replica.errors import ReplogError, UnknownServerError, error_for_code
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.native import ApiKey
from tests.fuzz.background import BASELINE_S, Background
from tests.fuzz.cluster import (
    FuzzCluster,
    answers_kafka,
    answers_metadata,
    is_running,
    open_fds,
    rss_mb,
)
from tests.fuzz.hostile import HOSTILE_SHARE, FrameSourceLike, HostileFrames, HostileMix
from tests.fuzz.kafka_frames import KafkaFrameSource
from tests.fuzz.login import KAFKA, REPLOG, Login, login_stream
from tests.fuzz.requests import request_frame
from tests.fuzz.source import FrameSource, FuzzFrame, load_frames, save_frames
from tests.fuzz.triage import FrameKind

ANSWER_TIMEOUT_S = 15.0
CONNECT_TIMEOUT_S = 5.0
MAX_PIPELINE = 16
MARKER_BASE = 0x5E000000
# RSS after this many frames is reported too: growth past it is what accumulates.
WARMUP_FRAMES = 20_000
# With SASL: the share of connections that log in before their first batch.
LOGIN_SHARE = 0.5
LOGIN_TIMEOUT_S = 10.0
_ANSWER_HEAD = struct.Struct(">ih")


@dataclass
class Stats:
    frames: int = 0
    connections: int = 0
    closed_by_broker: int = 0
    stalls: int = 0
    broker_restarts: int = 0
    logins: int = 0
    login_failures: int = 0
    # Kafka answers are counted, not read: their layouts differ by API.
    kafka_answers: int = 0
    answers: Counter[int] = field(default_factory=Counter)
    findings: list[str] = field(default_factory=list)


@dataclass
class Chunk:
    """The frames of one chunk and how far the senders have taken them."""

    frames: list[FuzzFrame]
    taken: int = 0
    broker_down: bool = False

    def take(self, depth: int) -> list[FuzzFrame]:
        """Up to `depth` frames; one that ends its connection is always the last."""
        batch: list[FuzzFrame] = []
        while self.taken < len(self.frames) and len(batch) < depth:
            item = self.frames[self.taken]
            self.taken += 1
            batch.append(item)
            if item.kind != FrameKind.ANSWERED:
                break
        return batch


class Sender:
    """Sends chunks to one broker over `connections` connections at a time."""

    def __init__(
        self,
        broker: BrokerProcess,
        stats: Stats,
        findings: Path,
        seed: int,
        *,
        listener: str = REPLOG,
        login: Login | None = None,
    ) -> None:
        self.broker = broker
        self.stats = stats
        self.findings = findings
        self.rng = random.Random(seed)
        self.kafka = listener == KAFKA
        self.address = (broker.host, broker.kafka_port if self.kafka else broker.port)
        self.login = login
        self._marker = MARKER_BASE

    async def send(self, chunk: Chunk, connections: int) -> None:
        await asyncio.gather(*(self._connection_loop(chunk) for _ in range(connections)))

    async def _connection_loop(self, chunk: Chunk) -> None:
        streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while not chunk.broker_down:
                batch = chunk.take(self.rng.randint(1, MAX_PIPELINE))
                if not batch:
                    return
                if streams is None:
                    streams = await self._connect(chunk)
                    if streams is None:
                        return
                self.stats.frames += len(batch)
                if not await self._exchange(streams, batch):
                    _close(streams[1])
                    streams = None
        finally:
            if streams is not None:
                _close(streams[1])

    async def _connect(
        self, chunk: Chunk
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            streams = await asyncio.wait_for(
                asyncio.open_connection(*self.address), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError):
            chunk.broker_down = True
            return None
        self.stats.connections += 1
        if self.login is not None and self.rng.random() < LOGIN_SHARE:
            try:
                async with asyncio.timeout(LOGIN_TIMEOUT_S):
                    await login_stream(*streams, self.login)
                self.stats.logins += 1
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ReplogError):
                # The batch goes out unauthenticated, or finds the connection closed.
                self.stats.login_failures += 1
        return streams

    async def _exchange(
        self, streams: tuple[asyncio.StreamReader, asyncio.StreamWriter], batch: list[FuzzFrame]
    ) -> bool:
        """Send a batch and read its answers; False when the connection is done with."""
        reader, writer = streams
        last = batch[-1].kind
        data = b"".join(item.data for item in batch)
        marker = self._next_marker()
        if last == FrameKind.ANSWERED:
            data += request_frame(ApiKey.API_VERSIONS, b"", marker)
        try:
            async with asyncio.timeout(ANSWER_TIMEOUT_S):
                writer.write(data)
                if last == FrameKind.UNWAITED:
                    return False
                if last == FrameKind.CLOSING:
                    writer.write_eof()
                await writer.drain()
                unknown_before = self.stats.answers[UnknownServerError.code]
                in_step = await self._read_answers(reader, marker)
                if self.stats.answers[UnknownServerError.code] > unknown_before:
                    self.save(f"unknown-error-{len(self.stats.findings) + 1}", batch)
                return in_step
        except TimeoutError:
            self.stats.stalls += 1
            self.save(f"stall-{self.stats.stalls}", batch)
        except (OSError, asyncio.IncompleteReadError):  # closed, reset, not connected
            self.stats.closed_by_broker += 1
        return False

    async def _read_answers(self, reader: asyncio.StreamReader, marker: int) -> bool:
        """Count answers until the marker's (True) or the end of the connection (False)."""
        while True:
            head = await reader.read(4)
            if not head:
                return False
            if len(head) < 4:
                head += await reader.readexactly(4 - len(head))
            (size,) = struct.unpack(">i", head)
            body = await reader.readexactly(size)
            if len(body) < _ANSWER_HEAD.size:
                self.stats.kafka_answers += 1
                continue
            correlation_id, code = _ANSWER_HEAD.unpack_from(body)
            if correlation_id == marker and code == 0:
                return True
            if self.kafka:
                self.stats.kafka_answers += 1
            else:
                self.stats.answers[code] += 1

    def _next_marker(self) -> int:
        self._marker += 1
        return self._marker

    def save(self, name: str, frames: list[FuzzFrame]) -> None:
        path = self.findings / f"{name}.frames"
        save_frames(path, frames)
        self.stats.findings.append(str(path))


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()


async def healthy(cluster: FuzzCluster, broker: BrokerProcess | None = None) -> bool:
    """Every broker (or `broker`) runs and answers Metadata on a fresh connection (logged
    in with SASL), and ApiVersions on its Kafka listener if it has one."""
    for each in cluster.brokers if broker is None else [broker]:
        if not is_running(each):
            return False
        if not await asyncio.to_thread(answers_metadata, each, cluster.login()):
            return False
        if each.kafka_port >= 0 and not await asyncio.to_thread(answers_kafka, each):
            return False
    return True


@dataclass(frozen=True)
class FuzzSettings:
    frames: int
    seed: int = 0
    connections: int = 8
    check_every: int = 2000
    findings: Path = Path("fuzz-findings")
    progress: bool = False
    # Stop after the chunk that passes this many seconds (the JSON says so).
    max_seconds: float | None = None
    listener: str = REPLOG
    hostile: bool = False
    # How long the well-behaved client produces alone first (hostile runs).
    baseline_s: float = BASELINE_S


async def fuzz(cluster: FuzzCluster, settings: FuzzSettings) -> dict[str, Any]:
    """Send fuzzed frames to the first broker; return the run's figures."""
    broker = cluster.brokers[0]
    stats = Stats()
    target = cluster.target(broker)
    rng = random.Random(settings.seed)
    source: FrameSourceLike
    if settings.listener == KAFKA:
        source = KafkaFrameSource(target, rng)
    else:
        source = FrameSource(target, rng, cluster.max_frame_bytes)
    hostile: HostileMix | None = None
    if settings.hostile:
        frames = HostileFrames(
            settings.listener, target, rng, cluster.max_frame_bytes, cluster.sasl
        )
        source = hostile = HostileMix(source, frames, rng, HOSTILE_SHARE)
    login = cluster.login(settings.listener)
    sender = Sender(
        broker, stats, settings.findings, settings.seed, listener=settings.listener, login=login
    )
    background = Background(cluster, settings.listener, target, settings.seed) if hostile else None
    try:
        if background is not None:
            await background.start(settings.baseline_s)
        rss_before, fds_before = rss_mb(broker), open_fds(broker)
        figures = await _send_chunks(cluster, settings, stats, source, sender, background)
    finally:
        extra = {} if background is None else await background.stop()
    rss_after = rss_mb(broker)
    seconds = figures.pop("seconds")
    rss_warm = figures.pop("rss_warm")
    result: dict[str, Any] = {
        "listener": settings.listener,
        "sasl": cluster.sasl,
        "hostile": settings.hostile,
        "frames": stats.frames,
        "crashes": stats.broker_restarts,
        "rss_growth_mb": round(rss_after - rss_before, 1),
        "connections": stats.connections,
        "broker_restarts": stats.broker_restarts,
        "rss_before_mb": round(rss_before, 1),
        "rss_after_mb": round(rss_after, 1),
        "rss_after_anon_mb": round(rss_mb(broker, "RssAnon"), 1),
        "rss_after_file_mb": round(rss_mb(broker, "RssFile"), 1),
        "rss_after_warmup_mb": None if rss_warm is None else round(rss_warm, 1),
        "rss_growth_after_warmup_mb": None if rss_warm is None else round(rss_after - rss_warm, 1),
        "rss_peak_mb": round(max(figures.pop("rss_peak"), rss_after), 1),
        "fds_before": fds_before,
        "fds_after": open_fds(broker),
        "seconds": round(seconds, 1),
        "frames_per_s": round(stats.frames / seconds, 1) if seconds else 0.0,
        "answers_by_error": _by_name(stats.answers),
        "closed_by_broker": stats.closed_by_broker,
        "stalls": stats.stalls,
        "frame_kinds": dict(source.kinds),
        "hazards_skipped": source.hazards_skipped,
        "findings": stats.findings,
        "seed": settings.seed,
        "brokers": len(cluster.brokers),
        **figures,
    }
    if settings.listener == KAFKA:
        result["kafka_answers"] = stats.kafka_answers
    if login is not None:
        result |= {"logins": stats.logins, "login_failures": stats.login_failures}
    if hostile is not None:
        well_behaved = extra["well_behaved"]
        result |= {
            "well_behaved_p50_ms": well_behaved.get("p50_ms"),
            "well_behaved_p99_ms": well_behaved.get("p99_ms"),
            "well_behaved_baseline_p99_ms": extra["well_behaved_baseline"].get("p99_ms"),
            "hostile_cases": dict(hostile.cases.most_common()),
            **extra,
        }
    return result


async def _send_chunks(
    cluster: FuzzCluster,
    settings: FuzzSettings,
    stats: Stats,
    source: FrameSourceLike,
    sender: Sender,
    background: Background | None,
) -> dict[str, Any]:
    """The chunks, each followed by a health check; RSS and time figures."""
    broker = cluster.brokers[0]
    rss_warm: float | None = None
    rss_peak = rss_mb(broker)
    started = time.monotonic()
    stopped_early = False
    while stats.frames < settings.frames:
        if settings.max_seconds is not None and time.monotonic() - started > settings.max_seconds:
            stopped_early = True
            break
        chunk = Chunk(source.chunk(min(settings.check_every, settings.frames - stats.frames)))
        await sender.send(chunk, settings.connections)
        rss_now = rss_mb(broker)
        rss_peak = max(rss_peak, rss_now)
        if rss_warm is None and stats.frames >= WARMUP_FRAMES:
            rss_warm = rss_now
        if settings.progress:
            line = {"frames": stats.frames, "rss_mb": rss_now, "fds": open_fds(broker)}
            print(json.dumps(line), file=sys.stderr, flush=True)
        if chunk.broker_down or not await healthy(cluster):
            await _recover(cluster, stats, sender, chunk)
            target = cluster.target(broker)
            source.retarget(target)
            if background is not None:
                background.retarget(target)
    return {
        "seconds": time.monotonic() - started,
        "rss_warm": rss_warm,
        "rss_peak": rss_peak,
        "stopped_early": stopped_early,
    }


async def _recover(cluster: FuzzCluster, stats: Stats, sender: Sender, chunk: Chunk) -> None:
    """Save what may have killed (or hung) a broker, keep its logs, restart it."""
    stats.broker_restarts += 1
    name = f"crash-{stats.broker_restarts}"
    sender.save(name, chunk.frames[: chunk.taken])
    for broker in cluster.brokers:
        if not await healthy(cluster, broker):
            cluster.keep_logs(broker, sender.findings / name)
            await asyncio.to_thread(cluster.restart, broker)


def _by_name(answers: Counter[int]) -> dict[str, int]:
    named: Counter[str] = Counter()
    for code, count in answers.items():
        named["NONE" if code == 0 else type(error_for_code(code)).__name__] += count
    return dict(named.most_common())


async def replay(cluster: FuzzCluster, path: Path, listener: str = REPLOG) -> dict[str, Any]:
    """Send saved frames one connection each, in order; name the first that kills the broker."""
    broker = cluster.brokers[0]
    stats = Stats()
    sender = Sender(broker, stats, path.parent, 0, listener=listener, login=cluster.login(listener))
    for index, item in enumerate(load_frames(path)):
        chunk = Chunk([item])
        await sender.send(chunk, 1)
        if chunk.broker_down or not await healthy(cluster):
            return {"replayed": index + 1, "killed_by_frame": index, "frame": item.data.hex()}
    return {"replayed": stats.frames, "killed_by_frame": None}
