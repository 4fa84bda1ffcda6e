"""The request header both protocols start a request with.

Kafka's request header v1 and replog's only one are the same four fields: api key, api
version, correlation id and a nullable client id. Kafka's flexible versions (header v2)
follow it with a tagged-field section, which spark_replica.wire.kafka.headers adds.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.wire.schema import Field, Tabled, tabled


@tabled(
    Field("ApiKey", "int16", "0+"),
    Field("ApiVersion", "int16", "0+"),
    Field("CorrelationId", "int32", "0+"),
    Field("ClientId", "string", "0+", nullable="0+"),
)
@dataclass(frozen=True, slots=True)
class RequestHeader(Tabled):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
