"""The hostile cases are what they claim: bombs expand, counts lie, frames are framed.

Checked with decoders that are not the broker's where one exists (aiokafka reads the
Kafka batches, pyarrow the replog one), and with the Kafka listener's own tables where
the claim is about Kafka's wire layout.
"""

from __future__ import annotations

import random
import struct

import crc32c
import pytest
from aiokafka.record.default_records import DefaultRecordBatch

from spark_replica.errors import ProtocolError
from spark_replica.records import HEADER_SIZE, decode_payload
from spark_replica.wire.kafka.versions import REQUESTS
from spark_replica.wire.native import ApiKey
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.primitives import Reader
from tests.fuzz.bombs import (
    GZIP,
    INT32_MAX,
    RECORD_COUNT_AT,
    ZSTD,
    kafka_bomb,
    kafka_count_lie,
    replog_bomb,
    replog_count_lie,
)
from tests.fuzz.hostile import HostileFrames, HostileMix
from tests.fuzz.kafka_frames import KafkaFrameSource, sample_requests
from tests.fuzz.login import KAFKA, REPLOG
from tests.fuzz.requests import Target
from tests.fuzz.triage import FrameKind

TARGET = Target(
    topics={"fuzz-a": 4, "fuzz-b": 2},
    victim_topic="fuzz-victim",
    broker_id=1,
    broker_epoch=4_294_967_300,
    controller_epoch=1,
    brokers=(BrokerInfo(1, "127.0.0.1", 9092),),
)
MAX_FRAME = 100 * 1024 * 1024
MIB = 1 << 20


@pytest.mark.parametrize("codec", [GZIP, ZSTD])
def test_a_kafka_bomb_is_a_small_valid_batch_of_one_huge_record(codec: int) -> None:
    bomb = kafka_bomb(codec, 3 * MIB)
    assert len(bomb) < 8 * 1024
    batch = DefaultRecordBatch(bomb)
    assert batch.validate_crc()
    records = list(batch)
    assert len(records) == 1
    assert records[0].value == bytes(3 * MIB)


def test_the_replog_bomb_expands_under_arrow() -> None:
    bomb = replog_bomb(4 * MIB)
    assert len(bomb) < 8 * 1024
    payload = decode_payload(bomb)
    assert payload.num_rows == 1
    assert payload.column("value")[0].as_py() == bytes(4 * MIB)


@pytest.mark.parametrize("batch", [kafka_count_lie(), kafka_count_lie(ZSTD), replog_count_lie()])
def test_count_lies_claim_the_maximum_with_a_right_crc(batch: bytes) -> None:
    (count,) = struct.unpack_from(">i", batch, RECORD_COUNT_AT)
    assert count == INT32_MAX
    assert struct.unpack_from(">I", batch, 17)[0] == crc32c.crc32c(batch[21:])
    assert HEADER_SIZE < len(batch) < 1024


def test_kafka_samples_decode_with_the_listeners_tables() -> None:
    rng = random.Random(2)
    for _ in range(30):
        for api_key, version, body in sample_requests(TARGET, rng):
            REQUESTS[api_key].from_bytes(version, body)


def test_kafka_frames_are_seeded_and_fetches_are_not_awaited() -> None:
    def frames(seed: int) -> list[bytes]:
        return [f.data for f in KafkaFrameSource(TARGET, random.Random(seed)).chunk(300)]

    assert frames(5) == frames(5) != frames(6)
    source = KafkaFrameSource(TARGET, random.Random(5))
    for item in source.chunk(300):
        valid = _decodes(item.data)
        if valid is not None and valid == ApiKey.FETCH:
            assert item.kind == FrameKind.UNWAITED
    assert source.kinds[FrameKind.UNWAITED.value] > 0


def _decodes(data: bytes) -> int | None:
    """The api key of a whole frame the listener's tables decode, else None."""
    if len(data) < 4 or struct.unpack_from(">i", data)[0] != len(data) - 4:
        return None
    try:
        api_key, version, body = _kafka_body(data)
        REQUESTS[api_key].from_bytes(version, body)
    except (ProtocolError, KeyError, struct.error):
        return None
    return api_key


def _kafka_body(data: bytes) -> tuple[int, int, bytes]:
    """(api key, version, body) of a whole Kafka frame with header v1 or v2."""
    api_key, version, _, client_length = struct.unpack_from(">hhih", data, 4)
    at = 4 + 10 + client_length
    if REQUESTS[api_key].is_flexible(version):
        at += 1
    return api_key, version, data[at:]


def test_hostile_kafka_frames_are_framed_and_lie_as_named() -> None:
    hostile = HostileFrames(KAFKA, TARGET, random.Random(4), MAX_FRAME, sasl=True)
    seen = set()
    for _ in range(120):
        name, item = hostile.frame()
        seen.add(name)
        declared = struct.unpack_from(">i", item.data)[0]
        if name == "size-lie":
            assert item.kind == FrameKind.CLOSING and declared != len(item.data) - 4
            continue
        assert declared == len(item.data) - 4
        api_key, version, body = _kafka_body(item.data)
        if name == "count-lie-field":
            with pytest.raises(ProtocolError):
                REQUESTS[api_key].decode(version, Reader(body))
            continue
        produce = REQUESTS[ApiKey.PRODUCE].from_bytes(version, body)
        (topic,) = produce.topic_data
        entries = topic.partition_data
        if name == "repeated-partition":
            assert len(entries) >= 100 and len({e.index for e in entries}) == 1
        else:
            assert len(entries) == 1
    assert seen == {"count-lie-batch", "bomb", "repeated-partition", "count-lie-field", "size-lie"}


@pytest.mark.parametrize("listener", [REPLOG, KAFKA])
def test_lane_cases_include_the_prelogin_ones_only_with_sasl(listener: str) -> None:
    def names(sasl: bool) -> set[str]:
        hostile = HostileFrames(listener, TARGET, random.Random(1), MAX_FRAME, sasl)
        return {hostile.lane_case().name for _ in range(200)}

    plain = names(False)
    assert not any(n.startswith("prelogin") for n in plain)
    assert {"prelogin-null-topics", "prelogin-bomb", "oversized-sasl"} <= names(True)
    assert "trickle-valid" in plain


def test_the_mix_keeps_its_share_and_count() -> None:
    base = KafkaFrameSource(TARGET, random.Random(1))
    hostile = HostileFrames(KAFKA, TARGET, random.Random(2), MAX_FRAME, sasl=False)
    mix = HostileMix(base, hostile, random.Random(3), share=0.1)
    chunk = mix.chunk(2000)
    assert len(chunk) == 2000
    assert 100 < sum(mix.cases.values()) < 300


def test_null_topics_metadata_is_two_megabytes_of_a_million_entries() -> None:
    hostile = HostileFrames(REPLOG, TARGET, random.Random(1), MAX_FRAME, sasl=True)
    case = next(c for c in iter(hostile.lane_case, None) if c.name == "prelogin-null-topics")
    assert 2_000_000 < len(case.prelude) < 2_100_000
