"""Tables of the data-path APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch and InitProducerId, at the versions the Kafka listener serves.

Transcribed from Kafka's message definitions; each table covers exactly the versions
served (see versions.SERVED), and ``flexible`` is Kafka's first flexible version even
when it lies beyond them, so headers of unserved versions are still read right.
"""

from __future__ import annotations

from spark_replica.kafka_wire.schema import Field, Message

API_VERSIONS_REQUEST = Message(
    "ApiVersionsRequest",
    api_key=18,
    versions=(0, 3),
    flexible=3,
    fields=[
        Field("ClientSoftwareName", "string", "3+"),
        Field("ClientSoftwareVersion", "string", "3+"),
    ],
)

API_VERSIONS_RESPONSE = Message(
    "ApiVersionsResponse",
    api_key=18,
    versions=(0, 3),
    flexible=3,
    fields=[
        Field("ErrorCode", "int16", "0+"),
        Field(
            "ApiKeys",
            [
                Field("ApiKey", "int16", "0+"),
                Field("MinVersion", "int16", "0+"),
                Field("MaxVersion", "int16", "0+"),
            ],
            "0+",
        ),
        Field("ThrottleTimeMs", "int32", "1+"),
        Field(
            "SupportedFeatures",
            [
                Field("Name", "string", "3+"),
                Field("MinVersion", "int16", "3+"),
                Field("MaxVersion", "int16", "3+"),
            ],
            "3+",
            tag=0,
            tagged="3+",
        ),
        Field("FinalizedFeaturesEpoch", "int64", "3+", default=-1, tag=1, tagged="3+"),
        Field(
            "FinalizedFeatures",
            [
                Field("Name", "string", "3+"),
                Field("MaxVersionLevel", "int16", "3+"),
                Field("MinVersionLevel", "int16", "3+"),
            ],
            "3+",
            tag=2,
            tagged="3+",
        ),
        Field("ZkMigrationReady", "bool", "3+", default=False, tag=3, tagged="3+"),
    ],
)

REQUESTS = [API_VERSIONS_REQUEST]
RESPONSES = [API_VERSIONS_RESPONSE]
