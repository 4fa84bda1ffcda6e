"""Tables of the consumer group APIs, transcribed from Kafka's message definitions.

Versions are those the group coordinator serves: FindCoordinator 0-4, JoinGroup 0-7,
SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-4, OffsetCommit 2-8, OffsetFetch 1-7,
DescribeGroups 0-5, ListGroups 0-4, DeleteGroups 0-2. OffsetCommit starts at 2 and
OffsetFetch at 1: the earlier versions kept offsets by other rules (v0 in ZooKeeper
through the client, v1 with per-partition timestamps) that no maintained client sends.
"""

from __future__ import annotations

from spark_replica.wire.kafka.messages.layouts import (
    api,
    authorized_operations,
    error,
    error_code,
    error_message,
    group_generation_member,
    head,
    member,
    node,
    per_topic,
    protocol,
    results,
    throttle,
)
from spark_replica.wire.schema import Field

FIND_COORDINATOR_REQUEST, FIND_COORDINATOR_RESPONSE = api(
    "FindCoordinator",
    api_key=10,
    versions=(0, 4),
    flexible=3,
    request=[
        Field("Key", "string", "0-3"),
        Field("KeyType", "int8", "1+"),
        Field("CoordinatorKeys", "[]string", "4+"),
    ],
    response=[
        throttle("1+"),
        error_code("0-3"),
        error_message("1-3"),
        *node("0-3"),
        Field(
            "Coordinators",
            [Field("Key", "string", "4+"), *node("4+"), *error("4+", message="4+")],
            "4+",
        ),
    ],
)

JOIN_GROUP_REQUEST, JOIN_GROUP_RESPONSE = api(
    "JoinGroup",
    api_key=11,
    versions=(0, 7),
    flexible=6,
    request=[
        Field("GroupId", "string", "0+"),
        Field("SessionTimeoutMs", "int32", "0+"),
        Field("RebalanceTimeoutMs", "int32", "1+", default=-1),
        *member("0+", "5+"),
        Field("ProtocolType", "string", "0+"),
        Field(
            "Protocols",
            [
                Field("Name", "string", "0+"),
                Field("Metadata", "bytes", "0+"),
            ],
            "0+",
        ),
    ],
    response=[
        *head("2+"),
        Field("GenerationId", "int32", "0+", default=-1),
        Field("ProtocolType", "string", "7+", nullable="7+", default=None),
        Field("ProtocolName", "string", "0+", nullable="7+"),
        Field("Leader", "string", "0+"),
        Field("MemberId", "string", "0+"),
        Field(
            "Members",
            [*member("0+", "5+"), Field("Metadata", "bytes", "0+")],
            "0+",
        ),
    ],
)

SYNC_GROUP_REQUEST, SYNC_GROUP_RESPONSE = api(
    "SyncGroup",
    api_key=14,
    versions=(0, 5),
    flexible=4,
    request=[
        *group_generation_member("3+"),
        *protocol("5+"),
        Field(
            "Assignments",
            [
                Field("MemberId", "string", "0+"),
                Field("Assignment", "bytes", "0+"),
            ],
            "0+",
        ),
    ],
    response=[
        *head("1+"),
        *protocol("5+"),
        Field("Assignment", "bytes", "0+"),
    ],
)

HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE = api(
    "Heartbeat",
    api_key=12,
    versions=(0, 4),
    flexible=4,
    request=group_generation_member("3+"),
    response=head("1+"),
)

LEAVE_GROUP_REQUEST, LEAVE_GROUP_RESPONSE = api(
    "LeaveGroup",
    api_key=13,
    versions=(0, 4),
    flexible=4,
    request=[
        Field("GroupId", "string", "0+"),
        Field("MemberId", "string", "0-2"),
        Field("Members", member("3+", "3+"), "3+"),
    ],
    response=[
        *head("1+"),
        Field("Members", [*member("3+", "3+"), error_code("3+")], "3+"),
    ],
)

OFFSET_COMMIT_REQUEST, OFFSET_COMMIT_RESPONSE = api(
    "OffsetCommit",
    api_key=8,
    versions=(2, 8),
    flexible=8,
    request=[
        Field("GroupId", "string", "0+"),
        Field("GenerationId", "int32", "1+", default=-1),
        *member("1+", "7+"),
        Field("RetentionTimeMs", "int64", "2-4", default=-1),
        per_topic(
            Field("PartitionIndex", "int32", "0+"),
            Field("CommittedOffset", "int64", "0+"),
            Field("CommittedLeaderEpoch", "int32", "6+", default=-1),
            Field("CommittedMetadata", "string", "0+", nullable="0+"),
        ),
    ],
    response=[
        throttle("3+"),
        per_topic(Field("PartitionIndex", "int32", "0+"), error_code()),
    ],
)

OFFSET_FETCH_REQUEST, OFFSET_FETCH_RESPONSE = api(
    "OffsetFetch",
    api_key=9,
    versions=(1, 7),
    flexible=6,
    request=[
        Field("GroupId", "string", "0-7"),
        Field(
            "Topics",
            [
                Field("Name", "string", "0-7"),
                Field("PartitionIndexes", "[]int32", "0-7"),
            ],
            "0-7",
            nullable="2-7",
        ),
        Field("RequireStable", "bool", "7+"),
    ],
    response=[
        throttle("3+"),
        per_topic(
            Field("PartitionIndex", "int32", "0-7"),
            Field("CommittedOffset", "int64", "0-7"),
            Field("CommittedLeaderEpoch", "int32", "5-7", default=-1),
            Field("Metadata", "string", "0-7", nullable="0-7"),
            error_code("0-7"),
            versions="0-7",
        ),
        error_code("2-7"),
    ],
)

DESCRIBE_GROUPS_REQUEST, DESCRIBE_GROUPS_RESPONSE = api(
    "DescribeGroups",
    api_key=15,
    versions=(0, 5),
    flexible=5,
    request=[
        Field("Groups", "[]string", "0+"),
        Field("IncludeAuthorizedOperations", "bool", "3+"),
    ],
    response=[
        throttle("1+"),
        Field(
            "Groups",
            [
                error_code(),
                Field("GroupId", "string", "0+"),
                Field("GroupState", "string", "0+"),
                Field("ProtocolType", "string", "0+"),
                Field("ProtocolData", "string", "0+"),
                Field(
                    "Members",
                    [
                        *member("0+", "4+"),
                        Field("ClientId", "string", "0+"),
                        Field("ClientHost", "string", "0+"),
                        Field("MemberMetadata", "bytes", "0+"),
                        Field("MemberAssignment", "bytes", "0+"),
                    ],
                    "0+",
                ),
                authorized_operations("AuthorizedOperations", "3+"),
            ],
            "0+",
        ),
    ],
)

LIST_GROUPS_REQUEST, LIST_GROUPS_RESPONSE = api(
    "ListGroups",
    api_key=16,
    versions=(0, 4),
    flexible=3,
    request=[Field("StatesFilter", "[]string", "4+")],
    response=[
        *head("1+"),
        Field(
            "Groups",
            [
                Field("GroupId", "string", "0+"),
                Field("ProtocolType", "string", "0+"),
                Field("GroupState", "string", "4+"),
            ],
            "0+",
        ),
    ],
)

DELETE_GROUPS_REQUEST, DELETE_GROUPS_RESPONSE = api(
    "DeleteGroups",
    api_key=42,
    versions=(0, 2),
    flexible=2,
    request=[Field("GroupsNames", "[]string", "0+")],
    response=[
        throttle(),
        results("Results", Field("GroupId", "string", "0+")),
    ],
)

REQUESTS = [
    FIND_COORDINATOR_REQUEST,
    JOIN_GROUP_REQUEST,
    SYNC_GROUP_REQUEST,
    HEARTBEAT_REQUEST,
    LEAVE_GROUP_REQUEST,
    OFFSET_COMMIT_REQUEST,
    OFFSET_FETCH_REQUEST,
    DESCRIBE_GROUPS_REQUEST,
    LIST_GROUPS_REQUEST,
    DELETE_GROUPS_REQUEST,
]
RESPONSES = [
    FIND_COORDINATOR_RESPONSE,
    JOIN_GROUP_RESPONSE,
    SYNC_GROUP_RESPONSE,
    HEARTBEAT_RESPONSE,
    LEAVE_GROUP_RESPONSE,
    OFFSET_COMMIT_RESPONSE,
    OFFSET_FETCH_RESPONSE,
    DESCRIBE_GROUPS_RESPONSE,
    LIST_GROUPS_RESPONSE,
    DELETE_GROUPS_RESPONSE,
]
