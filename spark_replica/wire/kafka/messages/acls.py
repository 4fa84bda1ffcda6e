"""Tables of the ACL APIs: DescribeAcls, CreateAcls and DeleteAcls (Kafka 3.x's message
definitions: version 1 adds the resource pattern type, 2 is flexible, 3 adds the User
resource type). Resource type, pattern type, operation and permission travel as int8
codes, Kafka's numbers, which spark_replica/wire/native/acls.py names."""

from __future__ import annotations

from spark_replica.wire.kafka.messages.layouts import (
    LITERAL,
    api,
    error,
    error_message,
    head,
    resource,
    results,
    throttle,
)
from spark_replica.wire.schema import Field


def _entry_fields() -> list[Field]:
    """Who may do what from where: the four fields every ACL layout ends with."""
    return [
        Field("Principal", "string", "0+"),
        Field("Host", "string", "0+"),
        Field("Operation", "int8", "0+"),
        Field("PermissionType", "int8", "0+"),
    ]


def _filter_fields() -> list[Field]:
    """A DescribeAcls or DeleteAcls filter: null strings match anything."""
    return [
        Field("ResourceTypeFilter", "int8", "0+"),
        Field("ResourceNameFilter", "string", "0+", nullable="0+"),
        Field("PatternTypeFilter", "int8", "1+", default=LITERAL),
        Field("PrincipalFilter", "string", "0+", nullable="0+"),
        Field("HostFilter", "string", "0+", nullable="0+"),
        Field("Operation", "int8", "0+"),
        Field("PermissionType", "int8", "0+"),
    ]


DESCRIBE_ACLS_REQUEST, DESCRIBE_ACLS_RESPONSE = api(
    "DescribeAcls",
    api_key=29,
    versions=(0, 3),
    flexible=2,
    request=_filter_fields(),
    response=[
        *head("0+"),
        error_message(),
        Field("Resources", [*resource("PatternType"), Field("Acls", _entry_fields(), "0+")], "0+"),
    ],
)

CREATE_ACLS_REQUEST, CREATE_ACLS_RESPONSE = api(
    "CreateAcls",
    api_key=30,
    versions=(0, 3),
    flexible=2,
    request=[
        Field(
            "Creations",
            [*resource("ResourcePatternType"), *_entry_fields()],
            "0+",
        ),
    ],
    response=[
        throttle(),
        results("Results", message="0+"),
    ],
)

DELETE_ACLS_REQUEST, DELETE_ACLS_RESPONSE = api(
    "DeleteAcls",
    api_key=31,
    versions=(0, 3),
    flexible=2,
    request=[Field("Filters", _filter_fields(), "0+")],
    response=[
        throttle(),
        Field(
            "FilterResults",
            [
                *error(message="0+"),
                Field(
                    "MatchingAcls",
                    [*error(message="0+"), *resource("PatternType"), *_entry_fields()],
                    "0+",
                ),
            ],
            "0+",
        ),
    ],
)

REQUESTS = [DESCRIBE_ACLS_REQUEST, CREATE_ACLS_REQUEST, DELETE_ACLS_REQUEST]
RESPONSES = [DESCRIBE_ACLS_RESPONSE, CREATE_ACLS_RESPONSE, DELETE_ACLS_RESPONSE]
