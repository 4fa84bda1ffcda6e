"""Property tests: arbitrary bytes at a live broker never break it, its answers or its data.

The hand-written cases of test_bad_input.py cover the failures we thought of; these
cover the ones we did not. Hypothesis throws three kinds of input at one broker process
per test: random byte strings, frames with a valid header and a random (or mutated
valid) body, and cut-off prefixes of valid frames. For every example the stream is sent
on its own connection and half-closed, and everything the broker sends back is checked
against a model of the framing rules (frames.py / server.py): exactly one answer per
readable frame, in order, with its correlation id and the promised top-level code
(0, UNSUPPORTED_VERSION, INVALID_REQUEST or MESSAGE_TOO_LARGE; never UNKNOWN_SERVER_ERROR
and never a frame that does not decode), then a closed connection. After each example
the broker must answer Metadata on a fresh connection; after the run the process must
be alive and the records seeded before it still all readable, unchanged.

Examples are derandomised (fixed seed, no example database) so every run is the same.
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from spark_replica.errors import (
    InvalidRequestError,
    MessageTooLargeError,
    ProtocolError,
    UnsupportedVersionError,
)
from spark_replica.wire.native import REQUEST_TYPES, RESPONSE_TYPES, ApiKey, is_supported
from spark_replica.wire.native.frames import SIZE, RequestHeader, ResponseHeader
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.primitives import Reader
from tests.fuzz.mutations import Sample, mutate_body, sample_of
from tests.fuzz.requests import RequestGenerator, Target, request_frame
from tests.support import BrokerFactory
from tests.support_wire import (
    SEED_TOPIC,
    SOCKET_TIMEOUT_S,
    SeededBroker,
    start_seeded_broker,
)

pytestmark = pytest.mark.slow

# Small, so that random sizes often land above it and exercise the refusal path.
FUZZ_MAX_FRAME_BYTES = 64 * 1024
SCRATCH_TOPIC = "fuzz-scratch"
# Topics a fuzzed CreateTopics may make: a few partitions each, never thousands.
MAX_FUZZ_PARTITIONS = 8
# A fetch may park up to this long; longer ones are kept out so no example hangs.
MAX_FUZZ_WAIT_MS = 100
FIXED_HEADER_BYTES = 8

FUZZ_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)


@pytest.fixture
def fuzz_broker(brokers: BrokerFactory) -> Iterator[SeededBroker]:
    yield from start_seeded_broker(
        brokers,
        extra_topics={SCRATCH_TOPIC: 2},
        **{"socket.request.max.bytes": str(FUZZ_MAX_FRAME_BYTES)},
    )


# --------------------------------------------------------------------------- the model


@dataclass
class Expected:
    """What the broker must send for a byte stream: (correlation id, code, api key)."""

    answers: list[tuple[int, int, ApiKey | None]] = field(default_factory=list)
    requests: list[tuple[ApiKey, Any]] = field(default_factory=list)
    # An acks=0 produce that fails closes the connection (Kafka's behaviour), and whether
    # it fails is the broker's to know: after this many answers a close is also right.
    may_close_after: int | None = None


def expected_for(stream: bytes) -> Expected:
    """Walk the stream as the broker does, frame by frame, until it would close."""
    expected = Expected()
    pos = 0
    while len(stream) - pos >= SIZE.size:
        (size,) = SIZE.unpack_from(stream, pos)
        pos += SIZE.size
        if size < FIXED_HEADER_BYTES:
            break
        if size > FUZZ_MAX_FRAME_BYTES:
            if len(stream) - pos >= FIXED_HEADER_BYTES:
                (correlation_id,) = struct.unpack_from(">i", stream, pos + 4)
                expected.answers.append((correlation_id, MessageTooLargeError.code, None))
            break
        if len(stream) - pos < size:
            break
        reader = Reader(stream[pos : pos + size])
        pos += size
        try:
            header = RequestHeader.read(reader)
        except ProtocolError:
            break
        if not is_supported(header.api_key, header.api_version):
            expected.answers.append((header.correlation_id, UnsupportedVersionError.code, None))
            continue
        api_key = ApiKey(header.api_key)
        try:
            request = REQUEST_TYPES[api_key].read(reader)
            reader.expect_end()
        except ProtocolError:
            expected.answers.append((header.correlation_id, InvalidRequestError.code, None))
            continue
        expected.requests.append((api_key, request))
        if api_key == ApiKey.PRODUCE and request.acks == 0:
            if expected.may_close_after is None:
                expected.may_close_after = len(expected.answers)
            continue  # acks=0: no answer at all
        expected.answers.append((header.correlation_id, 0, api_key))
    return expected


def topics_named(api_key: ApiKey, request: Any) -> list[str]:
    if api_key == ApiKey.API_VERSIONS:
        return []
    if api_key == ApiKey.METADATA:
        return request.topics or []
    if api_key == ApiKey.DELETE_TOPICS:
        return list(request.topics)
    return [t.topic for t in request.topics]


def is_hazard(api_key: ApiKey, request: Any) -> bool:
    """Valid requests a fuzzer must not send: they would touch the seeded data on purpose
    (that is not bad input), make thousands of partitions, or park for seconds."""
    if SEED_TOPIC in topics_named(api_key, request):
        return True
    if api_key == ApiKey.CREATE_TOPICS:
        return any(t.num_partitions > MAX_FUZZ_PARTITIONS for t in request.topics)
    if api_key == ApiKey.FETCH:
        return request.max_wait_ms > MAX_FUZZ_WAIT_MS
    return False


# --------------------------------------------------------------------------- the wire


def exchange(address: tuple[str, int], stream: bytes) -> bytes:
    """Send `stream` on a new connection, half-close it, return all the broker sends."""
    received = bytearray()
    with socket.create_connection(address, timeout=SOCKET_TIMEOUT_S) as sock:
        sock.settimeout(SOCKET_TIMEOUT_S)
        try:
            sock.sendall(stream)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the broker may close first (e.g. after a bad size): read what it sent
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            except TimeoutError:
                raise AssertionError("the broker neither answered nor closed") from None
            if not chunk:
                break
            received += chunk
    return bytes(received)


def check_answers(received: bytes, expected: Expected) -> None:
    """The received bytes are exactly the expected answers, each a well-formed frame."""
    answers: list[tuple[ResponseHeader, Reader]] = []
    pos = 0
    while pos < len(received):
        assert len(received) - pos >= SIZE.size, "a response frame cut in its size"
        (size,) = SIZE.unpack_from(received, pos)
        assert 0 < size <= len(received) - pos - SIZE.size, "a response frame cut short"
        reader = Reader(received[pos + SIZE.size : pos + SIZE.size + size])
        answers.append((ResponseHeader.read(reader), reader))
        pos += SIZE.size + size
    predicted = expected.answers
    if expected.may_close_after is not None and len(answers) == expected.may_close_after:
        predicted = predicted[: expected.may_close_after]  # the acks=0 produce failed
    assert [(h.correlation_id, h.error_code) for h, _ in answers] == [
        (correlation_id, code) for correlation_id, code, _ in predicted
    ]
    for (header, reader), (_, code, api_key) in zip(answers, predicted, strict=True):
        if code:
            assert header.error_message and reader.remaining() == 0
        else:
            assert api_key is not None
            RESPONSE_TYPES[api_key].read(reader)
            reader.expect_end()


def send_and_check(seeded: SeededBroker, stream: bytes) -> Expected:
    expected = expected_for(stream)
    assume(not any(is_hazard(key, request) for key, request in expected.requests))
    check_answers(exchange(seeded.address, stream), expected)
    # Shown by --hypothesis-show-statistics: which paths the examples reached.
    event(f"answer codes {sorted({code for _, code, _ in expected.answers})}")
    event(f"served {sorted({key.name for key, _ in expected.requests})}")
    seeded.assert_alive()
    return expected


# --------------------------------------------------------------------------- strategies


# The APIs whose valid requests are answered with top-level code 0 (controller requests
# from a test are refused with a typed top-level error, which this model does not predict).
CLIENT_APIS = (
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.API_VERSIONS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
)
SAMPLES_PER_API = 4


def sample_requests() -> dict[ApiKey, list[Sample]]:
    """Valid requests per API, on the scratch topic, to cut up and mutate (the fuzzer's)."""
    target = Target(
        topics={SCRATCH_TOPIC: 2},
        victim_topic=SCRATCH_TOPIC,
        broker_id=1,
        broker_epoch=-5,
        controller_epoch=0,
        brokers=(BrokerInfo(1, "127.0.0.1", 1),),
    )
    generator = RequestGenerator(target, random.Random(0))
    return {
        key: [sample_of(generator.request(key), 1) for _ in range(SAMPLES_PER_API)]
        for key in CLIENT_APIS
    }


SAMPLES = sample_requests()
SAMPLE_FRAMES: list[tuple[ApiKey, bytes]] = [
    (key, sample.body) for key, samples in SAMPLES.items() for sample in samples
]


def encode_frame(
    api_key: int,
    body: bytes,
    *,
    version: int = 0,
    correlation_id: int = 1,
    client_id: bytes | None = b"fuzz",
) -> bytes:
    """A frame with any client id bytes (valid UTF-8 or not) and any api key or version."""
    name = None if client_id is None else client_id.decode("utf-8", "surrogateescape")
    return request_frame(api_key, body, correlation_id, version=version, client_id=name)


def mutated(sample: Sample) -> st.SearchStrategy[bytes]:
    """The sample's body with a few fields set to boundaries, bytes changed, cut or added."""
    return st.randoms(use_true_random=False).map(lambda rng: mutate_body(sample, rng))


@st.composite
def frames_with_random_bodies(draw: st.DrawFn) -> tuple[int, bytes]:
    """(correlation id, frame): a readable header, then a random or mutated body.

    Mostly known APIs at version 0 with mutated bodies, so that examples get past the
    version check and into the decoders and handlers; the rest are unknown keys or
    versions, and bodies of pure noise.
    """
    header_kind = draw(st.sampled_from(["known"] * 6 + ["unknown-key", "unknown-version"]))
    api_key: int = draw(st.sampled_from(list(ApiKey)))
    version = 0
    if header_kind == "unknown-key":
        api_key = draw(st.integers(-32768, 32767))
    elif header_kind == "unknown-version":
        version = draw(st.integers(-32768, 32767))
    correlation_id = draw(st.integers(-(2**31), 2**31 - 1))
    client_id = draw(st.one_of(st.none(), st.binary(max_size=40)))
    body_kind = draw(st.sampled_from(["mutated"] * 4 + ["valid", "random"]))
    if api_key in SAMPLES and body_kind != "random":
        sample = draw(st.sampled_from(SAMPLES[ApiKey(api_key)]))
        body = draw(mutated(sample)) if body_kind == "mutated" else sample.body
    else:
        body = draw(st.binary(max_size=300))
    frame = encode_frame(
        int(api_key), body, version=version, correlation_id=correlation_id, client_id=client_id
    )
    return correlation_id, frame


def framed(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


# Random bytes; some wrapped in a correct size prefix, some also with a null client id
# spliced in, so that the header reader and the api/version check see noise too.
RANDOM_STREAMS = st.lists(
    st.one_of(
        st.binary(max_size=64),
        st.binary(min_size=8, max_size=200).map(framed),
        st.binary(min_size=8, max_size=200).map(lambda p: framed(p[:8] + b"\xff\xff" + p[8:])),
    ),
    min_size=1,
    max_size=4,
).map(b"".join)


# --------------------------------------------------------------------------- properties


def test_random_bytes_never_break_the_broker(fuzz_broker: SeededBroker) -> None:
    @FUZZ_SETTINGS
    @given(stream=RANDOM_STREAMS)
    def example(stream: bytes) -> None:
        send_and_check(fuzz_broker, stream)

    example()
    fuzz_broker.assert_intact()


def test_random_bodies_get_typed_answers_and_keep_the_connection(
    fuzz_broker: SeededBroker,
) -> None:
    follow_up = encode_frame(ApiKey.API_VERSIONS, b"", correlation_id=-7)

    @FUZZ_SETTINGS
    @given(frame=frames_with_random_bodies())
    def example(frame: tuple[int, bytes]) -> None:
        correlation_id, data = frame
        expected = send_and_check(fuzz_broker, data + follow_up)
        # A readable header is always answered (acks=0 produce excepted), and the
        # connection stays in step: the next request's answer comes right after.
        answered = [a[0] for a in expected.answers]
        assert answered[-1] == -7
        assert answered[:-1] in ([correlation_id], [])
        if not answered[:-1]:
            assert expected.requests[0][0] == ApiKey.PRODUCE
            assert expected.requests[0][1].acks == 0

    example()
    fuzz_broker.assert_intact()


def test_cut_off_frames_are_never_half_served(fuzz_broker: SeededBroker) -> None:
    lead = encode_frame(ApiKey.API_VERSIONS, b"", correlation_id=1)
    header_bytes = len(encode_frame(ApiKey.API_VERSIONS, b"")) - SIZE.size

    @FUZZ_SETTINGS
    @given(
        sample=st.sampled_from(SAMPLE_FRAMES),
        correlation_id=st.integers(-(2**31), 2**31 - 1),
        with_lead=st.booleans(),
        reframed=st.booleans(),
        data=st.data(),
    )
    def example(
        sample: tuple[ApiKey, bytes],
        correlation_id: int,
        with_lead: bool,
        reframed: bool,
        data: st.DataObject,
    ) -> None:
        api_key, body = sample
        frame = encode_frame(int(api_key), body, correlation_id=correlation_id)
        answers = [(1, 0)] if with_lead else []
        if reframed:
            # A whole frame holding a cut request: a cut header closes the connection,
            # a cut body is INVALID_REQUEST.
            cut = data.draw(st.integers(0, len(frame) - SIZE.size - 1), label="cut")
            payload = frame[SIZE.size : SIZE.size + cut]
            tail = SIZE.pack(len(payload)) + payload
            if cut >= header_bytes:
                answers.append((correlation_id, InvalidRequestError.code))
        else:
            # A frame that never finishes: nothing of it is served before the close.
            tail = frame[: data.draw(st.integers(0, len(frame) - 1), label="cut")]
        expected = send_and_check(fuzz_broker, (lead if with_lead else b"") + tail)
        assert [(a[0], a[1]) for a in expected.answers] == answers

    example()
    fuzz_broker.assert_intact()
