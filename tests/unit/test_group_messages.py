"""The group API tables against an independent encoder: aiokafka's request classes (a
test-only oracle) must produce exactly the bytes our tables read and write."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.protocol import commit, coordination, group

from spark_replica.wire.kafka.messages import groups
from spark_replica.wire.schema import Data, Message

CASES: list[tuple[Message, int, Any, Data]] = [
    (
        groups.JOIN_GROUP_REQUEST,
        5,
        group.JoinGroupRequest_v5("grp", 10_000, 30_000, "", "inst", "consumer", [("range", b"m")]),
        Data(
            group_id="grp",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=30_000,
            member_id="",
            group_instance_id="inst",
            protocol_type="consumer",
            protocols=[Data(name="range", metadata=b"m")],
        ),
    ),
    (
        groups.SYNC_GROUP_REQUEST,
        3,
        group.SyncGroupRequest_v3("grp", 4, "m-1", None, [("m-1", b"a"), ("m-2", b"")]),
        Data(
            group_id="grp",
            generation_id=4,
            member_id="m-1",
            group_instance_id=None,
            assignments=[
                Data(member_id="m-1", assignment=b"a"),
                Data(member_id="m-2", assignment=b""),
            ],
        ),
    ),
    (
        groups.HEARTBEAT_REQUEST,
        1,
        group.HeartbeatRequest_v1("grp", 4, "m-1"),
        Data(group_id="grp", generation_id=4, member_id="m-1"),
    ),
    (
        groups.OFFSET_COMMIT_REQUEST,
        2,
        commit.OffsetCommitRequest_v2("grp", 4, "m-1", -1, [("t", [(0, 42, "md")])]),
        Data(
            group_id="grp",
            generation_id=4,
            member_id="m-1",
            retention_time_ms=-1,
            topics=[
                Data(
                    name="t",
                    partitions=[
                        Data(
                            committed_leader_epoch=-1,
                            partition_index=0,
                            committed_offset=42,
                            committed_metadata="md",
                        )
                    ],
                )
            ],
        ),
    ),
    (
        groups.OFFSET_FETCH_REQUEST,
        3,
        commit.OffsetFetchRequest_v3("grp", None),
        Data(group_id="grp", topics=None),
    ),
    (
        groups.FIND_COORDINATOR_REQUEST,
        1,
        coordination.FindCoordinatorRequest_v1("grp", 0),
        Data(key="grp", key_type=0),
    ),
]


@pytest.mark.parametrize(
    ("message", "version", "oracle", "expected"),
    CASES,
    ids=[f"{m.name}-v{v}" for m, v, _, _ in CASES],
)
def test_tables_read_and_write_what_aiokafka_sends(
    message: Message, version: int, oracle: Any, expected: Data
) -> None:
    wire = oracle.encode()
    decoded = message.from_bytes(version, wire)
    for name, value in expected.__dict__.items():
        assert getattr(decoded, name) == value, name
    assert message.to_bytes(version, expected) == wire


def test_find_coordinator_response_v1_as_aiokafka_reads_it() -> None:
    body = groups.FIND_COORDINATOR_RESPONSE.to_bytes(
        1, Data(error_code=0, error_message=None, node_id=2, host="h", port=9)
    )
    decoded = coordination.FindCoordinatorResponse_v1.decode(body)
    assert (decoded.error_code, decoded.coordinator_id, decoded.host, decoded.port) == (
        0,
        2,
        "h",
        9,
    )
