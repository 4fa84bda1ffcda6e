"""How the broker will treat a fuzzed frame, decided before it is sent.

The sender needs to know three things about each frame, and reads them from the bytes
the way the broker's server does (size, header, body):

- ANSWERED: a well-framed request; the connection stays in step after it, so it can be
  pipelined with others (a produce with acks=0 gets no answer, which is fine: the
  sender reads up to a marker request sent after the batch).
- CLOSING: a size that lies, a cut frame, a header that cannot be read, a frame over
  the size limit: the broker closes the connection (or waits for bytes that never
  come), so it goes last on its connection.
- UNWAITED: a request the broker may rightly hold for long (a fetch parked up to its
  max_wait, an acks=all produce with a long timeout): sent, but its answer not awaited.

`None` means "do not send": a valid request whose effect is real but not a bug to find,
and that would spoil the run (delete the topics under fuzz, create thousands of
partitions, act as the controller with the real broker epoch on topics other than the
victim topic, shut the broker down).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from spark_replica.errors import ProtocolError
from spark_replica.wire.native import REQUEST_TYPES, ApiKey, is_supported
from spark_replica.wire.native.frames import SIZE, RequestHeader
from spark_replica.wire.primitives import Reader
from tests.fuzz.requests import (
    MAX_ANSWER_WAIT_MS,
    MAX_SCRATCH_PARTITIONS,
    SCRATCH_CONFIGS,
    SCRATCH_TOPICS,
    Target,
)

FIXED_HEADER_BYTES = 8
# An acks=all produce whose timeout is above this may be held that long: not awaited.
MAX_ANSWER_TIMEOUT_MS = 1000
# What a controller request with the real broker epoch may name.
CONTROLLER_TOPIC_EXTRA = "fuzz-none"
CONTROLLER_PARTITIONS = range(8)
CONTROLLER_HOSTS = ("127.0.0.1",)
ALLOWED_CONFIG_KEYS = {*SCRATCH_CONFIGS, "no.such.config"}


class FrameKind(Enum):
    ANSWERED = "answered"
    CLOSING = "closing"
    UNWAITED = "unwaited"


# The APIs whose body must be decoded to know the kind (or the hazard) of a frame.
_DECODED = {
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.DELETE_RECORDS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.LEADER_AND_ISR,
    ApiKey.STOP_REPLICA,
    ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN,
}


def triage(data: bytes | bytearray, target: Target, max_frame_bytes: int) -> FrameKind | None:
    """The kind of a whole frame (size prefix included), or None if it must not be sent."""
    if len(data) < SIZE.size:
        return FrameKind.CLOSING
    (size,) = SIZE.unpack_from(data)
    if size != len(data) - SIZE.size or not FIXED_HEADER_BYTES <= size <= max_frame_bytes:
        return FrameKind.CLOSING
    reader = Reader(data, SIZE.size)
    try:
        header = RequestHeader.read(reader)
    except ProtocolError:
        return FrameKind.CLOSING
    if not is_supported(header.api_key, header.api_version):
        return FrameKind.ANSWERED
    api_key = ApiKey(header.api_key)
    if api_key not in _DECODED:
        return FrameKind.ANSWERED
    try:
        request = REQUEST_TYPES[api_key].read(reader)
        reader.expect_end()
    except ProtocolError:
        return FrameKind.ANSWERED
    if is_hazard(api_key, request, target):
        return None
    if may_wait(api_key, request):
        return FrameKind.UNWAITED
    return FrameKind.ANSWERED


def may_wait(api_key: ApiKey, request: Any) -> bool:
    if api_key == ApiKey.FETCH:
        return request.max_wait_ms > MAX_ANSWER_WAIT_MS and request.min_bytes > 0
    if api_key == ApiKey.PRODUCE:
        return request.acks == -1 and request.timeout_ms > MAX_ANSWER_TIMEOUT_MS
    return False


def is_hazard(api_key: ApiKey, request: Any, target: Target) -> bool:
    protected = {*target.topics, target.victim_topic}
    if api_key == ApiKey.CREATE_TOPICS:
        return any(
            t.topic not in {*SCRATCH_TOPICS, *protected}
            or t.num_partitions > MAX_SCRATCH_PARTITIONS
            or not set(t.configs) <= ALLOWED_CONFIG_KEYS
            for t in request.topics
        )
    if api_key == ApiKey.CREATE_PARTITIONS:
        return any(t.count > MAX_SCRATCH_PARTITIONS for t in request.topics)
    if api_key == ApiKey.DELETE_TOPICS:
        return any(name in protected for name in request.topics)
    if api_key == ApiKey.DELETE_RECORDS:
        return any(t.topic in protected for t in request.topics)
    if api_key == ApiKey.CONTROLLED_SHUTDOWN:
        return request.broker_epoch == target.broker_epoch
    if api_key in (ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA):
        return _is_accepted(request, target) and not _within_victim(api_key, request, target)
    return False


def _is_accepted(request: Any, target: Target) -> bool:
    """Whether the broker would act on this controller request (its fence lets it in)."""
    return request.header.broker_epoch == target.broker_epoch


def _within_victim(api_key: ApiKey, request: Any, target: Target) -> bool:
    """An accepted controller request is harmless when it keeps to the victim topic."""
    if request.header.controller_epoch != target.controller_epoch:
        return False
    if api_key == ApiKey.UPDATE_METADATA:
        return True
    topics_ok = all(
        t.topic in (target.victim_topic, CONTROLLER_TOPIC_EXTRA)
        and all(_partition_of(p) in CONTROLLER_PARTITIONS for p in t.partitions)
        for t in request.topics
    )
    if api_key == ApiKey.LEADER_AND_ISR:
        return topics_ok and all(b.host in CONTROLLER_HOSTS for b in request.leaders)
    return topics_ok


def _partition_of(entry: Any) -> int:
    return entry if isinstance(entry, int) else entry.partition
