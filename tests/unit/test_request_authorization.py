"""Which ACL each request needs (brokerd/authorization.py), with the real Authorizer and
no broker: the control plane needs ClusterAction, consumers' fetches Read, and so on."""

from __future__ import annotations

import pytest

from brokerd.native.authorization import check, filter_metadata, rule_for
from spark_replica.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from spark_replica.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclEntry,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.wire.native import REQUEST_TYPES, ApiKey
from spark_replica.wire.native.add_partitions_to_txn import AddPartitionsToTxnRequest, TxnTopic
from spark_replica.wire.native.controller_requests import ControllerHeader, UpdateMetadataRequest
from spark_replica.wire.native.end_txn import AddOffsetsToTxnRequest, EndTxnRequest
from spark_replica.wire.native.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.wire.native.find_coordinator import GROUP_KEY_TYPE, FindCoordinatorRequest
from spark_replica.wire.native.init_producer_id import InitProducerIdRequest
from spark_replica.wire.native.metadata import MetadataResponse, TopicMetadata
from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic
from spark_replica.wire.native.register_sink_participants import (
    RegisterSinkParticipantsRequest,
    SinkParticipant,
    SinkParticipantTopic,
)
from spark_replica.wire.native.topic_admin import CreateTopicsRequest, NewTopic
from spark_replica.wire.native.txn_offset_commit import (
    TxnOffset,
    TxnOffsetCommitRequest,
    TxnOffsetTopic,
)

ALICE = "User:alice"


def _authorizer(*bindings: tuple[ResourceType, str, Operation]) -> Authorizer:
    authorizer = Authorizer(frozenset({"User:broker"}))
    authorizer.replace_all(
        AclBinding(
            ResourcePattern(kind, name, PatternType.LITERAL),
            AclEntry(ALICE, "*", operation, Permission.ALLOW),
        )
        for kind, name, operation in bindings
    )
    return authorizer


def _fetch(replica_id: int) -> FetchRequest:
    return FetchRequest(0, 1, 1024, [FetchTopic("t", [FetchPartition(0, 0, 1024)])], replica_id)


def test_every_api_served_has_a_rule() -> None:
    for api_key in REQUEST_TYPES:
        if api_key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            rule_for(api_key)


def test_a_consumer_fetch_needs_read_and_a_replica_fetch_needs_cluster_action() -> None:
    authorizer = _authorizer((ResourceType.TOPIC, "t", Operation.READ))
    check(authorizer, ALICE, "127.0.0.1", ApiKey.FETCH, _fetch(-1))
    with pytest.raises(ClusterAuthorizationFailedError, match="ClusterAction"):
        check(authorizer, ALICE, "127.0.0.1", ApiKey.FETCH, _fetch(1))
    check(authorizer, "User:broker", "127.0.0.1", ApiKey.FETCH, _fetch(1))


def test_controller_requests_need_cluster_action_whatever_the_topic_acls() -> None:
    authorizer = _authorizer((ResourceType.TOPIC, "t", Operation.ALL))
    request = UpdateMetadataRequest(ControllerHeader(1, 2**31 - 1, 5), [], [])
    with pytest.raises(ClusterAuthorizationFailedError):
        check(authorizer, ALICE, "127.0.0.1", ApiKey.UPDATE_METADATA, request)
    granted = _authorizer((ResourceType.CLUSTER, CLUSTER_NAME, Operation.CLUSTER_ACTION))
    check(granted, ALICE, "127.0.0.1", ApiKey.UPDATE_METADATA, request)


def test_produce_names_every_topic_it_may_not_write() -> None:
    authorizer = _authorizer((ResourceType.TOPIC, "t", Operation.WRITE))
    request = ProduceRequest(
        -1,
        1000,
        [ProduceTopic(name, [ProducePartition(0, b"")]) for name in ("t", "u", "v")],
    )
    with pytest.raises(TopicAuthorizationFailedError, match="'u', 'v'"):
        check(authorizer, ALICE, "127.0.0.1", ApiKey.PRODUCE, request)


def test_creating_topics_needs_create_on_the_cluster_or_on_each_topic() -> None:
    request = CreateTopicsRequest([NewTopic("t", 1, 1)])
    check(
        _authorizer((ResourceType.TOPIC, "t", Operation.CREATE)),
        ALICE,
        "h",
        ApiKey.CREATE_TOPICS,
        request,
    )
    check(
        _authorizer((ResourceType.CLUSTER, CLUSTER_NAME, Operation.CREATE)),
        ALICE,
        "h",
        ApiKey.CREATE_TOPICS,
        request,
    )
    with pytest.raises(TopicAuthorizationFailedError):
        check(_authorizer(), ALICE, "h", ApiKey.CREATE_TOPICS, request)


def test_metadata_hides_topics_when_listing_and_refuses_them_when_named() -> None:
    authorizer = _authorizer((ResourceType.TOPIC, "t", Operation.READ))

    def response() -> MetadataResponse:
        return MetadataResponse([], 1, [TopicMetadata("t"), TopicMetadata("secret")])

    listed = filter_metadata(authorizer, ALICE, "h", response(), asked_for_all=True)
    assert [t.topic for t in listed.topics] == ["t"]
    named = filter_metadata(authorizer, ALICE, "h", response(), asked_for_all=False)
    assert [(t.topic, t.error_code) for t in named.topics] == [
        ("t", 0),
        ("secret", TopicAuthorizationFailedError.code),
    ]


# -- a transactional producer's requests: Kafka's rules on TransactionalId and Group -------

TXN = (ResourceType.TRANSACTIONAL_ID, "orders", Operation.WRITE)
TOPIC_WRITE = (ResourceType.TOPIC, "t", Operation.WRITE)
GROUP_READ = (ResourceType.GROUP, "g", Operation.READ)


def _transactional_produce() -> ProduceRequest:
    return ProduceRequest(-1, 100, [ProduceTopic("t", [ProducePartition(0, b"")])], "orders")


@pytest.mark.parametrize(
    ("api_key", "request_", "needed"),
    [
        (ApiKey.PRODUCE, _transactional_produce(), [TXN, TOPIC_WRITE]),
        (ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest("orders"), [TXN]),
        (
            ApiKey.ADD_PARTITIONS_TO_TXN,
            AddPartitionsToTxnRequest("orders", 7, 0, [TxnTopic("t", [0])]),
            [TXN, TOPIC_WRITE],
        ),
        (ApiKey.ADD_OFFSETS_TO_TXN, AddOffsetsToTxnRequest("orders", 7, 0, "g"), [TXN, GROUP_READ]),
        (ApiKey.END_TXN, EndTxnRequest("orders", 7, 0, True), [TXN]),
        (
            ApiKey.REGISTER_SINK_PARTICIPANTS,
            RegisterSinkParticipantsRequest(
                "orders", 7, 0, 3, [SinkParticipantTopic("t", [SinkParticipant(0, 2**62, 3)])]
            ),
            [TXN, TOPIC_WRITE],
        ),
        (
            ApiKey.TXN_OFFSET_COMMIT,
            TxnOffsetCommitRequest("orders", "g", 7, 0, [TxnOffsetTopic("t", [TxnOffset(0, 1)])]),
            [TXN, GROUP_READ, (ResourceType.TOPIC, "t", Operation.READ)],
        ),
        (
            ApiKey.FIND_COORDINATOR,
            FindCoordinatorRequest("orders"),
            [(ResourceType.TRANSACTIONAL_ID, "orders", Operation.DESCRIBE)],
        ),
        (
            ApiKey.FIND_COORDINATOR,
            FindCoordinatorRequest("g", GROUP_KEY_TYPE),
            [(ResourceType.GROUP, "g", Operation.DESCRIBE)],
        ),
    ],
)
def test_transaction_requests_need_kafkas_acls_each_of_them(
    api_key: ApiKey, request_: object, needed: list[tuple[ResourceType, str, Operation]]
) -> None:
    check(_authorizer(*needed), ALICE, "127.0.0.1", api_key, request_)
    for missing in needed:
        allowed = [binding for binding in needed if binding != missing]
        with pytest.raises(
            (
                TransactionalIdAuthorizationFailedError,
                GroupAuthorizationFailedError,
                TopicAuthorizationFailedError,
            ),
            match=f"{missing[2].value} .*{missing[1]!r}",
        ):
            check(_authorizer(*allowed), ALICE, "127.0.0.1", api_key, request_)


def test_an_idempotent_producer_needs_no_transactional_id_acl() -> None:
    check(_authorizer(), ALICE, "127.0.0.1", ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest())
    plain = ProduceRequest(-1, 100, [ProduceTopic("t", [ProducePartition(0, b"")])])
    check(_authorizer(TOPIC_WRITE), ALICE, "127.0.0.1", ApiKey.PRODUCE, plain)
