"""The replog listener's DeleteRecords needs Delete on every topic it names, as Kafka's
does; decided with the real Authorizer before the handler runs, no broker needed."""

from __future__ import annotations

import pytest

from brokerd.native.authorization import check
from spark_replica.errors import TopicAuthorizationFailedError
from spark_replica.security.acl import (
    AclBinding,
    AclEntry,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.wire.native import ApiKey
from spark_replica.wire.native.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)

ALICE = "User:alice"


def authorizer_allowing(operation: Operation, topic: str) -> Authorizer:
    authorizer = Authorizer(frozenset({"User:broker"}))
    authorizer.replace_all(
        [
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                AclEntry(ALICE, "*", operation, Permission.ALLOW),
            )
        ]
    )
    return authorizer


def request(*topics: str) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(
        [DeleteRecordsTopic(topic, [DeleteRecordsPartition(0, 5)]) for topic in topics]
    )


def test_delete_on_the_topic_is_needed() -> None:
    allowed = authorizer_allowing(Operation.DELETE, "t")
    check(allowed, ALICE, "127.0.0.1", ApiKey.DELETE_RECORDS, request("t"))
    with pytest.raises(TopicAuthorizationFailedError, match="'u'"):
        check(allowed, ALICE, "127.0.0.1", ApiKey.DELETE_RECORDS, request("t", "u"))


def test_describe_is_not_enough() -> None:
    describe_only = authorizer_allowing(Operation.DESCRIBE, "t")
    with pytest.raises(TopicAuthorizationFailedError, match="Delete"):
        check(describe_only, ALICE, "127.0.0.1", ApiKey.DELETE_RECORDS, request("t"))
