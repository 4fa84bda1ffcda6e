"""Tables of the data-path APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch and InitProducerId, at the versions the Kafka listener serves.

Transcribed from Kafka's message definitions; each table covers exactly the versions
served (see versions.SERVED), and ``flexible`` is Kafka's first flexible version even
when it lies beyond them, so headers of unserved versions are still read right. Field
names are Kafka 3.x's (Produce: TopicData/PartitionData/Index; Fetch: Topics/Partitions,
Responses/Partitions/Records), which later Kafka releases renamed in places.
"""

from __future__ import annotations

from spark_replica.wire.kafka.messages.layouts import (
    api,
    authorized_operations,
    error_code,
    error_message,
    head,
    node,
    per_topic,
    throttle,
)
from spark_replica.wire.schema import Field

API_VERSIONS_REQUEST, API_VERSIONS_RESPONSE = api(
    "ApiVersions",
    api_key=18,
    versions=(0, 3),
    flexible=3,
    request=[
        Field("ClientSoftwareName", "string", "3+"),
        Field("ClientSoftwareVersion", "string", "3+"),
    ],
    response=[
        error_code(),
        Field(
            "ApiKeys",
            [
                Field("ApiKey", "int16", "0+"),
                Field("MinVersion", "int16", "0+"),
                Field("MaxVersion", "int16", "0+"),
            ],
            "0+",
        ),
        throttle("1+"),
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

METADATA_REQUEST, METADATA_RESPONSE = api(
    "Metadata",
    api_key=3,
    versions=(0, 9),
    flexible=9,
    request=[
        Field(
            "Topics",
            [
                Field("Name", "string", "0+"),
            ],
            "0+",
            nullable="1+",
        ),
        Field("AllowAutoTopicCreation", "bool", "4+", default=True),
        Field("IncludeClusterAuthorizedOperations", "bool", "8+"),
        Field("IncludeTopicAuthorizedOperations", "bool", "8+"),
    ],
    response=[
        throttle("3+"),
        Field(
            "Brokers",
            [*node(), Field("Rack", "string", "1+", nullable="1+", default=None)],
            "0+",
        ),
        Field("ClusterId", "string", "2+", nullable="2+", default=None),
        Field("ControllerId", "int32", "1+", default=-1),
        Field(
            "Topics",
            [
                error_code(),
                Field("Name", "string", "0+"),
                Field("IsInternal", "bool", "1+", default=False),
                Field(
                    "Partitions",
                    [
                        error_code(),
                        Field("PartitionIndex", "int32", "0+"),
                        Field("LeaderId", "int32", "0+"),
                        Field("LeaderEpoch", "int32", "7+", default=-1),
                        Field("ReplicaNodes", "[]int32", "0+"),
                        Field("IsrNodes", "[]int32", "0+"),
                        Field("OfflineReplicas", "[]int32", "5+"),
                    ],
                    "0+",
                ),
                authorized_operations("TopicAuthorizedOperations", "8+"),
            ],
            "0+",
        ),
        authorized_operations("ClusterAuthorizedOperations", "8+"),
    ],
)

# Field names as in the plan's contract (Kafka 2.x-3.x names: TopicData, PartitionData, Index).
PRODUCE_REQUEST, PRODUCE_RESPONSE = api(
    "Produce",
    api_key=0,
    versions=(3, 8),
    flexible=9,
    request=[
        Field("TransactionalId", "string", "3+", nullable="3+", default=None),
        Field("Acks", "int16", "0+"),
        Field("TimeoutMs", "int32", "0+"),
        per_topic(
            Field("Index", "int32", "0+"),
            Field("Records", "records", "0+", nullable="0+"),
            topics="TopicData",
            partitions="PartitionData",
        ),
    ],
    response=[
        per_topic(
            Field("Index", "int32", "0+"),
            error_code(),
            Field("BaseOffset", "int64", "0+"),
            Field("LogAppendTimeMs", "int64", "2+", default=-1),
            Field("LogStartOffset", "int64", "5+", default=-1),
            Field(
                "RecordErrors",
                [
                    Field("BatchIndex", "int32", "8+"),
                    Field(
                        "BatchIndexErrorMessage",
                        "string",
                        "8+",
                        nullable="8+",
                        default=None,
                    ),
                ],
                "8+",
            ),
            error_message("8+"),
            topics="Responses",
            partitions="PartitionResponses",
        ),
        throttle("1+"),
    ],
)

FETCH_REQUEST, FETCH_RESPONSE = api(
    "Fetch",
    api_key=1,
    versions=(4, 11),
    flexible=12,
    request=[
        Field("ReplicaId", "int32", "0+"),
        Field("MaxWaitMs", "int32", "0+"),
        Field("MinBytes", "int32", "0+"),
        Field("MaxBytes", "int32", "3+", default=0x7FFFFFFF),
        Field("IsolationLevel", "int8", "4+", default=0),
        Field("SessionId", "int32", "7+", default=0),
        Field("SessionEpoch", "int32", "7+", default=-1),
        per_topic(
            Field("Partition", "int32", "0+"),
            Field("CurrentLeaderEpoch", "int32", "9+", default=-1),
            Field("FetchOffset", "int64", "0+"),
            Field("LogStartOffset", "int64", "5+", default=-1),
            Field("PartitionMaxBytes", "int32", "0+"),
            name="Topic",
        ),
        Field(
            "ForgottenTopicsData",
            [
                Field("Topic", "string", "7+"),
                Field("Partitions", "[]int32", "7+"),
            ],
            "7+",
        ),
        Field("RackId", "string", "11+", default=""),
    ],
    response=[
        *head("1+", "7+"),
        Field("SessionId", "int32", "7+", default=0),
        per_topic(
            Field("PartitionIndex", "int32", "0+"),
            error_code(),
            Field("HighWatermark", "int64", "0+"),
            Field("LastStableOffset", "int64", "4+", default=-1),
            Field("LogStartOffset", "int64", "5+", default=-1),
            Field(
                "AbortedTransactions",
                [
                    Field("ProducerId", "int64", "4+"),
                    Field("FirstOffset", "int64", "4+"),
                ],
                "4+",
                nullable="4+",
                default=None,
            ),
            Field("PreferredReadReplica", "int32", "11+", default=-1),
            Field("Records", "records", "0+", nullable="0+"),
            topics="Responses",
            name="Topic",
        ),
    ],
)

LIST_OFFSETS_REQUEST, LIST_OFFSETS_RESPONSE = api(
    "ListOffsets",
    api_key=2,
    versions=(1, 6),
    flexible=6,
    request=[
        Field("ReplicaId", "int32", "0+"),
        Field("IsolationLevel", "int8", "2+"),
        per_topic(
            Field("PartitionIndex", "int32", "0+"),
            Field("CurrentLeaderEpoch", "int32", "4+", default=-1),
            Field("Timestamp", "int64", "0+"),
        ),
    ],
    response=[
        throttle("2+"),
        per_topic(
            Field("PartitionIndex", "int32", "0+"),
            error_code(),
            Field("Timestamp", "int64", "1+", default=-1),
            Field("Offset", "int64", "1+", default=-1),
            Field("LeaderEpoch", "int32", "4+", default=-1),
        ),
    ],
)

OFFSET_FOR_LEADER_EPOCH_REQUEST, OFFSET_FOR_LEADER_EPOCH_RESPONSE = api(
    "OffsetForLeaderEpoch",
    api_key=23,
    versions=(0, 4),
    flexible=4,
    request=[
        Field("ReplicaId", "int32", "3+", default=-2),
        per_topic(
            Field("Partition", "int32", "0+"),
            Field("CurrentLeaderEpoch", "int32", "2+", default=-1),
            Field("LeaderEpoch", "int32", "0+"),
            name="Topic",
        ),
    ],
    response=[
        throttle("2+"),
        per_topic(
            error_code(),
            Field("Partition", "int32", "0+"),
            Field("LeaderEpoch", "int32", "1+", default=-1),
            Field("EndOffset", "int64", "0+"),
            name="Topic",
        ),
    ],
)

INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE = api(
    "InitProducerId",
    api_key=22,
    versions=(0, 4),
    flexible=2,
    request=[
        Field("TransactionalId", "string", "0+", nullable="0+", default=None),
        Field("TransactionTimeoutMs", "int32", "0+"),
        Field("ProducerId", "int64", "3+", default=-1),
        Field("ProducerEpoch", "int16", "3+", default=-1),
    ],
    response=[
        *head("0+"),
        Field("ProducerId", "int64", "0+", default=-1),
        Field("ProducerEpoch", "int16", "0+"),
    ],
)

REQUESTS = [
    API_VERSIONS_REQUEST,
    METADATA_REQUEST,
    PRODUCE_REQUEST,
    FETCH_REQUEST,
    LIST_OFFSETS_REQUEST,
    OFFSET_FOR_LEADER_EPOCH_REQUEST,
    INIT_PRODUCER_ID_REQUEST,
]
RESPONSES = [
    API_VERSIONS_RESPONSE,
    METADATA_RESPONSE,
    PRODUCE_RESPONSE,
    FETCH_RESPONSE,
    LIST_OFFSETS_RESPONSE,
    OFFSET_FOR_LEADER_EPOCH_RESPONSE,
    INIT_PRODUCER_ID_RESPONSE,
]
