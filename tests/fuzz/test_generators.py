"""The fuzzer's pure parts: generators cover every API, mutations and triage do what they say."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from spark_replica.wire.native import (
    REQUEST_TYPES,
    ApiKey,
    DeleteTopicsRequest,
    FetchRequest,
    LeaderAndIsrRequest,
    MetadataRequest,
)
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    PartitionLeaderState,
    TopicLeaderStates,
)
from spark_replica.wire.native.fetch import FetchPartition, FetchTopic
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.primitives import Reader
from tests.fuzz.mutations import Mark, mutated_frame, sample_of
from tests.fuzz.requests import RequestGenerator, Target, body_of, frame, request_frame
from tests.fuzz.source import FrameSource, load_frames, save_frames
from tests.fuzz.triage import FrameKind, triage

MAX_FRAME = 1 << 20
TARGET = Target(
    topics={"fuzz-a": 4, "fuzz-b": 2},
    victim_topic="fuzz-victim",
    broker_id=1,
    broker_epoch=4_294_967_300,
    controller_epoch=1,
    brokers=(BrokerInfo(1, "127.0.0.1", 9092),),
)


def test_every_api_the_broker_serves_has_a_generator() -> None:
    generator = RequestGenerator(TARGET, random.Random(0))
    for api_key, request_type in REQUEST_TYPES.items():
        assert isinstance(generator.request(api_key), request_type)


@pytest.mark.parametrize("api_key", list(REQUEST_TYPES))
def test_generated_requests_decode_to_themselves(api_key: ApiKey) -> None:
    generator = RequestGenerator(TARGET, random.Random(int(api_key)), hostile=0.5)
    for _ in range(50):
        request = generator.request(api_key)
        reader = Reader(body_of(request))
        decoded = REQUEST_TYPES[api_key].read(reader)
        reader.expect_end()
        assert body_of(decoded) == body_of(request)


def test_marks_point_at_lengths_and_ints() -> None:
    sample = sample_of(MetadataRequest(["ab"]), correlation_id=5)
    assert {m for m in sample.marks if m.is_length} == {Mark(0, 4, True), Mark(4, 2, True)}
    assert sample.body == b"\x00\x00\x00\x01\x00\x02ab"


def test_triage_kinds() -> None:
    metadata = request_frame(ApiKey.METADATA, body_of(MetadataRequest(None)), 1)
    assert triage(metadata, TARGET, MAX_FRAME) == FrameKind.ANSWERED
    assert triage(metadata[:-1], TARGET, MAX_FRAME) == FrameKind.CLOSING
    assert triage(frame(b"\x00" * 7), TARGET, MAX_FRAME) == FrameKind.CLOSING
    assert triage(frame(metadata[4:] + b"\x00" * 64), TARGET, 64) == FrameKind.CLOSING
    unknown_version = request_frame(ApiKey.METADATA, b"", 1, version=9)
    assert triage(unknown_version, TARGET, MAX_FRAME) == FrameKind.ANSWERED
    parked = FetchRequest(60_000, 1, 1024, [FetchTopic("fuzz-a", [FetchPartition(0, 0, 1024)])])
    assert triage(_frame_of(parked), TARGET, MAX_FRAME) == FrameKind.UNWAITED


def test_triage_leaves_out_requests_that_would_spoil_the_run() -> None:
    assert triage(_frame_of(DeleteTopicsRequest(["fuzz-a"])), TARGET, MAX_FRAME) is None
    assert triage(_frame_of(DeleteTopicsRequest(["other"])), TARGET, MAX_FRAME)

    def leader_and_isr(topic: str, broker_epoch: int) -> LeaderAndIsrRequest:
        state = PartitionLeaderState(0, 1, 5, [1], 0, [1])
        header = ControllerHeader(1, TARGET.controller_epoch, broker_epoch)
        return LeaderAndIsrRequest(header, False, [TopicLeaderStates(topic, [state])])

    real = TARGET.broker_epoch
    assert triage(_frame_of(leader_and_isr("fuzz-a", real)), TARGET, MAX_FRAME) is None
    assert triage(_frame_of(leader_and_isr("fuzz-a", real - 1)), TARGET, MAX_FRAME)
    assert triage(_frame_of(leader_and_isr("fuzz-victim", real)), TARGET, MAX_FRAME)


def test_mutations_keep_the_frame_size_right() -> None:
    rng = random.Random(1)
    sample = sample_of(MetadataRequest(["fuzz-a", "fuzz-b"]), correlation_id=5)
    for _ in range(200):
        data = mutated_frame(sample, rng)
        assert int.from_bytes(data[:4], "big", signed=True) == len(data) - 4


def test_frames_are_a_function_of_the_seed_and_survive_saving(tmp_path: Path) -> None:
    def frames(seed: int) -> list[bytes]:
        source = FrameSource(TARGET, random.Random(seed), MAX_FRAME)
        return [f.data for f in source.chunk(500)]

    assert frames(3) == frames(3) != frames(4)
    source = FrameSource(TARGET, random.Random(3), MAX_FRAME)
    chunk = source.chunk(100)
    save_frames(tmp_path / "x.frames", chunk)
    assert list(load_frames(tmp_path / "x.frames")) == chunk
    assert sum(source.kinds.values()) == 100


def _frame_of(request: object) -> bytes:
    return request_frame(int(request.API_KEY), body_of(request), 7)  # type: ignore[attr-defined]
