"""Authorization per resource: may this caller do this to this topic, group or cluster.

One Authorizer (spark_replica.security.acl) holds the broker's ACLs; `load_acls_into`
keeps it current, called at start-up and after every ACL change notification: it
applies every ACL that can be read and reports the rest. Without an authorizer every
check passes.

The replog listener refuses a request whole, from one table of what each of its APIs
needs (brokerd/native/authorization.py). Kafka's clients expect the refusal inside the
answer instead: a Produce naming two topics, one of them forbidden, gets
TOPIC_AUTHORIZATION_FAILED for that topic's partitions and is served for the other.
So the Kafka handlers ask here, resource by resource, and put the error where the
response layout has room for it. The rules are Kafka's:

- Produce: Write on the topic. Fetch and DescribeProducers: Read. ListOffsets,
  OffsetForLeaderEpoch, Metadata: Describe (Metadata for every topic leaves out the ones
  the principal may not describe, so that names are not disclosed to whoever can
  connect).
- CreateTopics: Create on the cluster, or else on the topic. DeleteTopics: Delete.
  CreatePartitions: Alter. DescribeConfigs: DescribeConfigs on the topic or cluster.
- InitProducerId without a transactional id: any authenticated principal (producer ids
  are not a resource here; the Write is checked on every produce).
- A Produce holding transactional batches: Write on its TransactionalId as well as on
  each topic; without a transactional id, or without that Write, the whole request is
  refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (brokerd/kafka/produce.py).
- Transactions (brokerd/kafka/transactions.py and find_coordinator.py): Write on the
  TransactionalId for InitProducerId with one, AddPartitionsToTxn (and Write on each of
  its topics), AddOffsetsToTxn (and Read on the group) and EndTxn; Describe on it for
  FindCoordinator and DescribeTransactions; ListTransactions lists only the ids the
  principal may describe.
- DescribeAcls: Describe on the cluster; CreateAcls and DeleteAcls: Alter on the cluster
  (brokerd/kafka/acls.py).
- Groups (brokerd/kafka/groups.py calls `authorize_group`): FindCoordinator,
  DescribeGroups and OffsetFetch Describe the group, JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup and OffsetCommit Read it, DeleteGroups Delete it; OffsetCommit also needs
  Read on each topic, OffsetFetch Describe; ListGroups Describe on the cluster, else
  only the groups the principal may describe.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from spark_replica.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from spark_replica.security.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType
from spark_replica.zk.security_store import load_acls

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from brokerd.core.context import BrokerContext
    from brokerd.metrics.registry import BrokerMetrics

logger = logging.getLogger("brokerd.authorization")


class Caller(Protocol):
    """Who asks: a request's principal and the host it came from."""

    @property
    def principal(self) -> str: ...

    @property
    def client_host(self) -> str: ...


def _authorize(
    ctx: BrokerContext,
    request: Caller,
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


def authorize_topic(ctx: BrokerContext, request: Caller, operation: Operation, topic: str) -> bool:
    return _authorize(ctx, request, operation, ResourceType.TOPIC, topic)


def authorize_group(ctx: BrokerContext, request: Caller, operation: Operation, group: str) -> bool:
    return _authorize(ctx, request, operation, ResourceType.GROUP, group)


def authorize_transactional_id(
    ctx: BrokerContext, request: Caller, operation: Operation, transactional_id: str
) -> bool:
    return _authorize(ctx, request, operation, ResourceType.TRANSACTIONAL_ID, transactional_id)


def authorize_cluster(ctx: BrokerContext, request: Caller, operation: Operation) -> bool:
    return _authorize(ctx, request, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def topic_denied(
    request: Caller, operation: Operation, topic: str
) -> TopicAuthorizationFailedError:
    """The error a handler answers for a topic the principal may not touch."""
    return TopicAuthorizationFailedError(
        f"{request.principal} is not authorized to {operation.value} topic {topic!r}"
    )


def group_denied(
    request: Caller, operation: Operation, group: str
) -> GroupAuthorizationFailedError:
    return GroupAuthorizationFailedError(
        f"{request.principal} is not authorized to {operation.value} group {group!r}"
    )


def transactional_id_denied(
    request: Caller, operation: Operation, transactional_id: str
) -> TransactionalIdAuthorizationFailedError:
    return TransactionalIdAuthorizationFailedError(
        f"{request.principal} is not authorized to {operation.value} "
        f"transactional id {transactional_id!r}"
    )


def cluster_denied(request: Caller, operation: Operation) -> ClusterAuthorizationFailedError:
    return ClusterAuthorizationFailedError(
        f"{request.principal} is not authorized to {operation.value} the cluster"
    )


def load_acls_into(authorizer: Authorizer, zk: KazooClient, metrics: BrokerMetrics) -> None:
    """Replace the authorizer's ACLs by those in ZooKeeper. What cannot be read is logged
    at WARN, one line each, and counted in the metrics; every other ACL applies, so one
    unfamiliar entry never leaves a broker without its DENYs. ZooKeeperError if ZooKeeper
    cannot be read at all (the ACLs known so far stay)."""
    load = load_acls(zk)
    for skipped in load.skipped:
        logger.warning("skipped ACL data at %s: %s", skipped.path, skipped.reason)
    metrics.acls_unreadable.set(len(load.skipped))
    metrics.acls_total.set(len(load.bindings))
    authorizer.replace_all(load.bindings)
