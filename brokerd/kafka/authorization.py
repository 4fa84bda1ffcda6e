"""Which ACL each Kafka request needs, answered per resource as Kafka does.

The replog listener refuses a request whole (brokerd/core/authorization.py); Kafka's clients
expect the refusal inside the answer instead: a Produce naming two topics, one of them
forbidden, gets TOPIC_AUTHORIZATION_FAILED for that topic's partitions and is served
for the other. So the Kafka handlers ask here, resource by resource, and put the error
where the response layout has room for it. The rules are Kafka's:

- Produce: Write on the topic. Fetch: Read. ListOffsets, OffsetForLeaderEpoch, Metadata:
  Describe (Metadata for every topic leaves out the ones the principal may not
  describe, so that names are not disclosed to whoever can connect).
- CreateTopics: Create on the cluster, or else on the topic. DeleteTopics: Delete.
  CreatePartitions: Alter. DescribeConfigs: DescribeConfigs on the topic or cluster.
- InitProducerId without a transactional id: any authenticated principal (producer ids
  are not a resource here; the Write is checked on every produce).
- DescribeAcls: Describe on the cluster; CreateAcls and DeleteAcls: Alter on the cluster
  (brokerd/kafka/acls.py).
- Groups (brokerd/groups/handlers.py calls `authorize_group`): FindCoordinator,
  DescribeGroups and OffsetFetch Describe the group, JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup and OffsetCommit Read it, DeleteGroups Delete it; OffsetCommit also needs
  Read on each topic, OffsetFetch Describe; ListGroups Describe on the cluster, else
  only the groups the principal may describe.

Without an authorizer every check passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from spark_replica.security.acl import CLUSTER_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from brokerd.core.context import BrokerContext


def _authorize(
    ctx: BrokerContext,
    request: KafkaRequest,
    operation: Operation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(
        request.principal, request.client_host, operation, resource_type, name
    )


def authorize_topic(
    ctx: BrokerContext, request: KafkaRequest, operation: Operation, topic: str
) -> bool:
    return _authorize(ctx, request, operation, ResourceType.TOPIC, topic)


def authorize_group(
    ctx: BrokerContext, request: KafkaRequest, operation: Operation, group: str
) -> bool:
    return _authorize(ctx, request, operation, ResourceType.GROUP, group)


def authorize_cluster(ctx: BrokerContext, request: KafkaRequest, operation: Operation) -> bool:
    return _authorize(ctx, request, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def topic_denied(
    request: KafkaRequest, operation: Operation, topic: str
) -> TopicAuthorizationFailedError:
    """The error a handler answers for a topic the principal may not touch."""
    return TopicAuthorizationFailedError(
        f"{request.principal} is not authorized to {operation.value} topic {topic!r}"
    )


def group_denied(
    request: KafkaRequest, operation: Operation, group: str
) -> GroupAuthorizationFailedError:
    return GroupAuthorizationFailedError(
        f"{request.principal} is not authorized to {operation.value} group {group!r}"
    )


def cluster_denied(request: KafkaRequest, operation: Operation) -> ClusterAuthorizationFailedError:
    return ClusterAuthorizationFailedError(
        f"{request.principal} is not authorized to {operation.value} the cluster"
    )
