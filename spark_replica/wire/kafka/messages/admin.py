"""Tables of the admin APIs: CreateTopics, DeleteTopics, DeleteRecords, CreatePartitions
and DescribeConfigs, at the versions the Kafka listener serves (field names as in
Kafka 3.x's message definitions)."""

from __future__ import annotations

from spark_replica.wire.kafka.messages.layouts import (
    api,
    config_entry,
    error,
    error_code,
    error_message,
    per_topic,
    resource,
    results,
    throttle,
)
from spark_replica.wire.schema import Field

CREATE_TOPICS_REQUEST, CREATE_TOPICS_RESPONSE = api(
    "CreateTopics",
    api_key=19,
    versions=(0, 5),
    flexible=5,
    request=[
        Field(
            "Topics",
            [
                Field("Name", "string", "0+"),
                Field("NumPartitions", "int32", "0+"),
                Field("ReplicationFactor", "int16", "0+"),
                Field(
                    "Assignments",
                    [
                        Field("PartitionIndex", "int32", "0+"),
                        Field("BrokerIds", "[]int32", "0+"),
                    ],
                    "0+",
                ),
                Field("Configs", config_entry("0+", "0+"), "0+"),
            ],
            "0+",
        ),
        Field("TimeoutMs", "int32", "0+", default=60000),
        Field("ValidateOnly", "bool", "1+", default=False),
    ],
    response=[
        throttle("2+"),
        Field(
            "Topics",
            [
                Field("Name", "string", "0+"),
                error_code(),
                error_message("1+", nullable="0+"),
                Field("TopicConfigErrorCode", "int16", "5+", tag=0, tagged="5+"),
                Field("NumPartitions", "int32", "5+", default=-1),
                Field("ReplicationFactor", "int16", "5+", default=-1),
                Field(
                    "Configs",
                    [
                        *config_entry("5+", "5+"),
                        Field("ReadOnly", "bool", "5+"),
                        Field("ConfigSource", "int8", "5+", default=-1),
                        Field("IsSensitive", "bool", "5+"),
                    ],
                    "5+",
                    nullable="5+",
                ),
            ],
            "0+",
        ),
    ],
)

DELETE_TOPICS_REQUEST, DELETE_TOPICS_RESPONSE = api(
    "DeleteTopics",
    api_key=20,
    versions=(0, 4),
    flexible=4,
    request=[
        Field("TopicNames", "[]string", "0-5"),
        Field("TimeoutMs", "int32", "0+"),
    ],
    response=[
        throttle("1+"),
        results("Responses", Field("Name", "string", "0+")),
    ],
)

DELETE_RECORDS_REQUEST, DELETE_RECORDS_RESPONSE = api(
    "DeleteRecords",
    api_key=21,
    versions=(0, 2),
    flexible=2,
    request=[
        per_topic(Field("PartitionIndex", "int32", "0+"), Field("Offset", "int64", "0+")),
        Field("TimeoutMs", "int32", "0+"),
    ],
    response=[
        throttle(),
        per_topic(
            Field("PartitionIndex", "int32", "0+"),
            Field("LowWatermark", "int64", "0+"),
            error_code(),
        ),
    ],
)

CREATE_PARTITIONS_REQUEST, CREATE_PARTITIONS_RESPONSE = api(
    "CreatePartitions",
    api_key=37,
    versions=(0, 2),
    flexible=2,
    request=[
        Field(
            "Topics",
            [
                Field("Name", "string", "0+"),
                Field("Count", "int32", "0+"),
                Field(
                    "Assignments",
                    [
                        Field("BrokerIds", "[]int32", "0+"),
                    ],
                    "0+",
                    nullable="0+",
                    default=None,
                ),
            ],
            "0+",
        ),
        Field("TimeoutMs", "int32", "0+"),
        Field("ValidateOnly", "bool", "0+"),
    ],
    response=[
        throttle(),
        results("Results", Field("Name", "string", "0+"), message="0+"),
    ],
)

DESCRIBE_CONFIGS_REQUEST, DESCRIBE_CONFIGS_RESPONSE = api(
    "DescribeConfigs",
    api_key=32,
    versions=(0, 4),
    flexible=4,
    request=[
        Field(
            "Resources",
            [
                *resource(),
                Field("ConfigurationKeys", "[]string", "0+", nullable="0+", default=None),
            ],
            "0+",
        ),
        Field("IncludeSynonyms", "bool", "1+", default=False),
        Field("IncludeDocumentation", "bool", "3+", default=False),
    ],
    response=[
        throttle(),
        Field(
            "Results",
            [
                *error(message="0+"),
                *resource(),
                Field(
                    "Configs",
                    [
                        *config_entry("0+", "0+"),
                        Field("ReadOnly", "bool", "0+"),
                        Field("IsDefault", "bool", "0"),
                        Field("ConfigSource", "int8", "1+", default=-1),
                        Field("IsSensitive", "bool", "0+"),
                        Field(
                            "Synonyms",
                            [*config_entry("1+", "0+"), Field("Source", "int8", "1+")],
                            "1+",
                        ),
                        Field("ConfigType", "int8", "3+", default=0),
                        Field("Documentation", "string", "3+", nullable="0+", default=None),
                    ],
                    "0+",
                ),
            ],
            "0+",
        ),
    ],
)

REQUESTS = [
    CREATE_TOPICS_REQUEST,
    DELETE_TOPICS_REQUEST,
    DELETE_RECORDS_REQUEST,
    CREATE_PARTITIONS_REQUEST,
    DESCRIBE_CONFIGS_REQUEST,
]
RESPONSES = [
    CREATE_TOPICS_RESPONSE,
    DELETE_TOPICS_RESPONSE,
    DELETE_RECORDS_RESPONSE,
    CREATE_PARTITIONS_RESPONSE,
    DESCRIBE_CONFIGS_RESPONSE,
]
