"""ApiVersions: which API keys and versions a broker serves (request body is empty)."""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import struct_array, wire_field
from spark_replica.wire.schema import Tabled, tabled


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int


@tabled()
@dataclass(slots=True)
class ApiVersionsRequest(Tabled):
    API_KEY = ApiKey.API_VERSIONS


@tabled(
    struct_array(
        "versions",
        ApiVersionRange,
        wire_field("api_key", "int16"),
        wire_field("min_version", "int16"),
        wire_field("max_version", "int16"),
    )
)
@dataclass(slots=True)
class ApiVersionsResponse(Tabled):
    versions: list[ApiVersionRange]
