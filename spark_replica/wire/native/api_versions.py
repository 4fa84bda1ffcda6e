"""ApiVersions: which API keys and versions a broker serves (request body is empty)."""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.primitives import Reader, Writer


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int


@dataclass(slots=True)
class ApiVersionsRequest:
    API_KEY = ApiKey.API_VERSIONS

    def write(self, w: Writer) -> None:
        pass

    @classmethod
    def read(cls, r: Reader) -> ApiVersionsRequest:
        return cls()


@dataclass(slots=True)
class ApiVersionsResponse:
    versions: list[ApiVersionRange]

    def write(self, w: Writer) -> None:
        def write_range(v: ApiVersionRange) -> None:
            w.int16(v.api_key)
            w.int16(v.min_version)
            w.int16(v.max_version)

        w.array(self.versions, write_range)

    @classmethod
    def read(cls, r: Reader) -> ApiVersionsResponse:
        return cls(r.required_array(lambda: ApiVersionRange(r.int16(), r.int16(), r.int16())))
