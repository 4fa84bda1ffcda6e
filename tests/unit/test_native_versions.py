"""Native messages with several versions, and the version a client picks per broker.

A table's fields may start at a later version while version 0 keeps its bytes (golden
bytes below, written by the codec before native tables had versions); a client sends
each request at the highest version both it and the broker serve, version 0 to a broker
that serves only that, and refuses a request that needs more than the broker serves.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from spark_replica.errors import UnsupportedVersionError
from spark_replica.wire.native import REQUEST_TYPES, RESPONSE_TYPES, SUPPORTED_VERSIONS, ApiKey
from spark_replica.wire.native.api_versions import (
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from spark_replica.wire.native.fetch import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FetchTopicResult,
)
from spark_replica.wire.native.isolation import IsolationLevel
from spark_replica.wire.native.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from spark_replica.wire.native.negotiation import BrokerVersions, request_version
from spark_replica.wire.native.table import wire_field
from spark_replica.wire.schema import Tabled, tabled

# Version 0 as the codec wrote it before native tables had versions.
FETCH_V0 = bytes.fromhex(
    "ffffffff000001f4000000010000040000000001000174000000010000000300000007000000000000002a00001000"
)
FETCH_RESPONSE_V0 = bytes.fromhex(
    "0000000100017400000001000000030000ffff000000000000000a0000000000000002000000000000000c000000027879"
)
LIST_OFFSETS_V0 = bytes.fromhex("ffffffff00000001000174000000010000000100000005ffffffffffffffff")


@tabled(
    wire_field("name", "string"),
    wire_field("weight", "int32", since=1),
    wire_field("count", "int16"),
    latest=1,
)
@dataclass(slots=True)
class Versioned(Tabled):
    name: str
    count: int
    weight: int = 0


def test_a_field_added_in_version_1_is_absent_from_version_0_and_read_with_its_default() -> None:
    struct = Versioned("a", 3, weight=9)
    assert Versioned.TABLE.to_bytes(0, struct) == b"\x00\x01a\x00\x03"
    assert Versioned.TABLE.to_bytes(1, struct) == b"\x00\x01a\x00\x00\x00\x09\x00\x03"
    assert Versioned.TABLE.from_bytes(0, b"\x00\x01a\x00\x03") == Versioned("a", 3, weight=0)
    assert Versioned.TABLE.from_bytes(1, Versioned.TABLE.to_bytes(1, struct)) == struct


def fetch_request(isolation_level: int = IsolationLevel.READ_UNCOMMITTED) -> FetchRequest:
    return FetchRequest(
        500,
        1,
        1024,
        [FetchTopic("t", [FetchPartition(3, 42, 4096, 7)])],
        isolation_level=isolation_level,
    )


def fetch_response() -> FetchResponse:
    return FetchResponse(
        [FetchTopicResult("t", [FetchPartitionResult(3, 0, None, 10, 2, 12, records=b"xy")])]
    )


def test_version_0_of_fetch_and_list_offsets_keeps_its_bytes() -> None:
    assert FetchRequest.TABLE.to_bytes(0, fetch_request()) == FETCH_V0
    assert FetchResponse.TABLE.to_bytes(0, fetch_response()) == FETCH_RESPONSE_V0
    list_offsets = ListOffsetsRequest([ListOffsetsTopic("t", [ListOffsetsPartition(1, -1, 5)])])
    assert ListOffsetsRequest.TABLE.to_bytes(0, list_offsets) == LIST_OFFSETS_V0
    decoded = FetchResponse.TABLE.from_bytes(0, FETCH_RESPONSE_V0).topics[0].partitions[0]
    assert (decoded.last_stable_offset, decoded.aborted_transactions) == (-1, [])


def test_every_served_version_of_every_native_message_has_a_table() -> None:
    for api_key, (low, high) in SUPPORTED_VERSIONS.items():
        for types in (REQUEST_TYPES, RESPONSE_TYPES):
            tabled_low, tabled_high = types[api_key].TABLE.versions  # type: ignore[attr-defined]
            assert tabled_low <= low <= high <= tabled_high, api_key


def served(high: int) -> BrokerVersions:
    """A broker's answer listing every API, each up to `high` (0 for an older broker)."""
    return BrokerVersions.from_answer(
        ApiVersionsResponse([ApiVersionRange(int(key), 0, high) for key in SUPPORTED_VERSIONS])
    )


def test_the_client_sends_the_highest_version_both_sides_serve() -> None:
    assert served(0).version_for(ApiKey.FETCH, (0, 1), 0, "FETCH") == 0
    assert served(5).version_for(ApiKey.FETCH, (0, 1), 0, "FETCH") == 1
    assert BrokerVersions.version_zero_only().version_for(ApiKey.FETCH, (0, 1), 0, "FETCH") == 0


def test_a_request_needing_a_version_the_broker_lacks_is_refused_not_downgraded() -> None:
    with pytest.raises(UnsupportedVersionError, match="FETCH: no version both sides serve"):
        served(0).version_for(ApiKey.FETCH, (0, 1), 1, "FETCH")
    unlisted = BrokerVersions.from_answer(ApiVersionsResponse([]))
    with pytest.raises(UnsupportedVersionError, match="does not serve FETCH"):
        unlisted.version_for(ApiKey.FETCH, (0, 1), 0, "FETCH")


def list_offsets_request(isolation_level: int) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        [ListOffsetsTopic("t", [ListOffsetsPartition(0, -1)])], isolation_level=isolation_level
    )


def test_against_an_older_broker_reads_go_out_at_version_0_and_read_committed_is_refused() -> None:
    older = served(0)
    assert request_version(older, fetch_request()) == 0
    assert request_version(older, list_offsets_request(IsolationLevel.READ_UNCOMMITTED)) == 0
    for committed in (
        fetch_request(IsolationLevel.READ_COMMITTED),
        list_offsets_request(IsolationLevel.READ_COMMITTED),
    ):
        with pytest.raises(UnsupportedVersionError, match="needs 1 or later"):
            request_version(older, committed)
    assert request_version(older, ApiVersionsRequest()) == 0


def test_against_a_current_broker_reads_go_out_at_version_1() -> None:
    current = BrokerVersions.from_answer(
        ApiVersionsResponse(
            [ApiVersionRange(int(k), low, high) for k, (low, high) in SUPPORTED_VERSIONS.items()]
        )
    )
    assert request_version(current, fetch_request()) == 1
    assert request_version(current, fetch_request(IsolationLevel.READ_COMMITTED)) == 1
    assert request_version(current, list_offsets_request(IsolationLevel.READ_COMMITTED)) == 1
