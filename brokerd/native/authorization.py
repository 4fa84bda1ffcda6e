"""Which ACL each replog request needs, decided before its handler runs.

Kafka's mapping, kept in one table so that a new API cannot be served without a rule
(`rule_for` refuses an API it does not know): producing needs Write on the topic,
consuming Read, describing offsets and metadata Describe, creating topics Create (on the
cluster or the topic), deleting Delete, adding partitions Alter. The control plane
(LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers, and
fetches or epoch queries that claim a replica id) needs ClusterAction on the cluster,
which only the brokers' own principal holds, so a client cannot move the HW, poison the
controller epoch, stop replicas or end transactions. ACL and user administration needs
Describe or Alter on the cluster.

A transactional producer's requests need Kafka's rights on the TransactionalId and the
group (checked before the topics): Write on the id for InitProducerId with one,
AddPartitionsToTxn (and Write on its topics), AddOffsetsToTxn (and Read on the group),
EndTxn, TxnOffsetCommit (and Read on the group and on its topics), a Produce naming
it, and a Spark sink task's RegisterSinkParticipants (and Write on its topics, as
AddPartitionsToTxn); FindCoordinator needs Describe on the group or the transactional id
it asks about.

A request that names several topics is refused whole, naming the topics it may not
touch, rather than answered per partition: replog's clients send one topic per request
in practice, and a whole refusal cannot be mistaken for partial success.

Metadata is the exception: asking for every topic answers with the topics the principal
may describe and leaves the others out, as Kafka does, so that topic names are not
disclosed to whoever can connect.

The Kafka listener asks per resource instead, inside its handlers
(brokerd/core/authorization.py); both ask the same Authorizer, kept current by
`load_acls_into` there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from spark_replica.errors import (
    BrokerResponseError,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from spark_replica.security.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.find_coordinator import GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE
from spark_replica.wire.native.metadata import MetadataResponse, TopicMetadata

# Fetches and epoch queries from consumers carry a negative replica id.
_FIRST_REPLICA_ID = 0


@dataclass(frozen=True)
class Needs:
    """What one request needs: an operation on the cluster, on each named topic, or both
    ways allowed (CreateTopics: Create on the cluster or on every topic)."""

    cluster: Operation | None = None
    topic: Operation | None = None
    topics: tuple[str, ...] = ()
    either: bool = False  # cluster OR topics suffice; otherwise whichever is set is needed
    # (resource type, operation, name): each needed too, checked first
    resources: tuple[tuple[ResourceType, Operation, str], ...] = ()


Rule = Callable[[Any], Needs]


def _topics(request: Any) -> tuple[str, ...]:
    return tuple(sorted({t.topic for t in request.topics}))


def _replica_or(operation: Operation) -> Rule:
    def rule(request: Any) -> Needs:
        if request.replica_id >= _FIRST_REPLICA_ID:
            return Needs(cluster=Operation.CLUSTER_ACTION)
        return Needs(topic=operation, topics=_topics(request))

    return rule


def _cluster(operation: Operation) -> Rule:
    return lambda request: Needs(cluster=operation)


def _transactional_write(request: Any) -> tuple[ResourceType, Operation, str]:
    return (ResourceType.TRANSACTIONAL_ID, Operation.WRITE, request.transactional_id)


def _produce(request: Any) -> Needs:
    resources = () if request.transactional_id is None else (_transactional_write(request),)
    return Needs(topic=Operation.WRITE, topics=_topics(request), resources=resources)


def _init_producer_id(request: Any) -> Needs:
    if request.transactional_id is None:
        return Needs()
    return Needs(resources=(_transactional_write(request),))


def _find_coordinator(request: Any) -> Needs:
    resource = {
        GROUP_KEY_TYPE: ResourceType.GROUP,
        TRANSACTION_KEY_TYPE: ResourceType.TRANSACTIONAL_ID,
    }.get(request.key_type)
    if resource is None:  # refused by the handler (INVALID_REQUEST)
        return Needs()
    return Needs(resources=((resource, Operation.DESCRIBE, request.key),))


def _with_group(topic: Operation | None) -> Rule:
    def rule(request: Any) -> Needs:
        group = (ResourceType.GROUP, Operation.READ, request.group_id)
        topics = _topics(request) if topic is not None else ()
        return Needs(topic=topic, topics=topics, resources=(_transactional_write(request), group))

    return rule


_RULES: dict[int, Rule] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _replica_or(Operation.READ),
    ApiKey.LIST_OFFSETS: _replica_or(Operation.DESCRIBE),
    ApiKey.OFFSETS_FOR_LEADER_EPOCH: _replica_or(Operation.DESCRIBE),
    # Answered per topic below (filter_metadata); nothing is refused whole.
    ApiKey.METADATA: lambda r: Needs(),
    ApiKey.API_VERSIONS: lambda r: Needs(),
    # Producer ids are not a resource: anyone authenticated may ask for one. Kafka asks
    # for IdempotentWrite on the cluster, which Write on any topic implies (KIP-679), so
    # a principal Kafka would refuse could only hold ids it may not use: every produce is
    # checked for Write. Refusing here would turn a producer's missing Write into a
    # producer-id failure instead of the TOPIC_AUTHORIZATION_FAILED that names the topic.
    # With a transactional id: Write on it (below).
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.ADD_PARTITIONS_TO_TXN: lambda r: Needs(
        topic=Operation.WRITE, topics=_topics(r), resources=(_transactional_write(r),)
    ),
    ApiKey.REGISTER_SINK_PARTICIPANTS: lambda r: Needs(
        topic=Operation.WRITE, topics=_topics(r), resources=(_transactional_write(r),)
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: _with_group(None),
    ApiKey.END_TXN: lambda r: Needs(resources=(_transactional_write(r),)),
    ApiKey.TXN_OFFSET_COMMIT: _with_group(Operation.READ),
    ApiKey.CREATE_TOPICS: lambda r: Needs(
        cluster=Operation.CREATE,
        topic=Operation.CREATE,
        topics=_topics(r),
        either=True,
    ),
    ApiKey.DELETE_TOPICS: lambda r: Needs(topic=Operation.DELETE, topics=tuple(r.topics)),
    ApiKey.DELETE_RECORDS: lambda r: Needs(topic=Operation.DELETE, topics=_topics(r)),
    ApiKey.CREATE_PARTITIONS: lambda r: Needs(topic=Operation.ALTER, topics=_topics(r)),
    ApiKey.LEADER_AND_ISR: _cluster(Operation.CLUSTER_ACTION),
    ApiKey.STOP_REPLICA: _cluster(Operation.CLUSTER_ACTION),
    ApiKey.UPDATE_METADATA: _cluster(Operation.CLUSTER_ACTION),
    ApiKey.CONTROLLED_SHUTDOWN: _cluster(Operation.CLUSTER_ACTION),
    ApiKey.WRITE_TXN_MARKERS: _cluster(Operation.CLUSTER_ACTION),
    # ACL and SCRAM credential administration.
    ApiKey.DESCRIBE_ACLS: _cluster(Operation.DESCRIBE),
    ApiKey.CREATE_ACLS: _cluster(Operation.ALTER),
    ApiKey.DELETE_ACLS: _cluster(Operation.ALTER),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(Operation.DESCRIBE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _cluster(Operation.ALTER),
}


def rule_for(api_key: int) -> Rule:
    """The rule of an API; KeyError for one without a rule (never served unchecked)."""
    return _RULES[api_key]


def check(authorizer: Authorizer, principal: str, host: str, api_key: int, request: Any) -> None:
    """Raise the Kafka authorization error if `principal` may not make this request."""
    needs = rule_for(api_key)(request)

    def cluster_allowed() -> bool:
        assert needs.cluster is not None
        return authorizer.authorize(
            principal, host, needs.cluster, ResourceType.CLUSTER, CLUSTER_NAME
        )

    def denied_topics() -> list[str]:
        assert needs.topic is not None
        return [
            name
            for name in needs.topics
            if not authorizer.authorize(principal, host, needs.topic, ResourceType.TOPIC, name)
        ]

    for resource_type, operation, name in needs.resources:
        if not authorizer.authorize(principal, host, operation, resource_type, name):
            raise _resource_error(principal, resource_type, operation, name)
    if needs.either:
        if cluster_allowed():
            return
        denied = denied_topics()
        if denied:
            raise _topic_error(principal, needs, denied)
        return
    if needs.cluster is not None and not cluster_allowed():
        raise ClusterAuthorizationFailedError(
            f"{principal} is not authorized to {needs.cluster.value} the cluster "
            f"(api key {api_key})"
        )
    if needs.topic is not None:
        denied = denied_topics()
        if denied:
            raise _topic_error(principal, needs, denied)


def _topic_error(principal: str, needs: Needs, denied: Iterable[str]) -> Exception:
    assert needs.topic is not None
    names = ", ".join(repr(name) for name in denied)
    return TopicAuthorizationFailedError(
        f"{principal} is not authorized to {needs.topic.value} topic(s) {names}"
    )


def _resource_error(
    principal: str, resource_type: ResourceType, operation: Operation, name: str
) -> BrokerResponseError:
    error = (
        GroupAuthorizationFailedError
        if resource_type is ResourceType.GROUP
        else TransactionalIdAuthorizationFailedError
    )
    kind = "group" if resource_type is ResourceType.GROUP else "transactional id"
    return error(f"{principal} is not authorized to {operation.value} {kind} {name!r}")


def filter_metadata(
    authorizer: Authorizer,
    principal: str,
    host: str,
    response: MetadataResponse,
    asked_for_all: bool,
) -> MetadataResponse:
    """Leave out the topics the principal may not describe (when it asked for all), or
    answer them with TOPIC_AUTHORIZATION_FAILED (when it named them)."""
    kept: list[TopicMetadata] = []
    for topic in response.topics:
        if authorizer.authorize(
            principal, host, Operation.DESCRIBE, ResourceType.TOPIC, topic.topic
        ):
            kept.append(topic)
        elif not asked_for_all:
            kept.append(
                TopicMetadata(
                    topic.topic,
                    [],
                    TopicAuthorizationFailedError.code,
                    f"{principal} is not authorized to Describe topic {topic.topic!r}",
                )
            )
    response.topics = kept
    return response
