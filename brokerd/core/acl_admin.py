"""ACL admin, the same on both listeners: describe, create and delete stored ACLs.

On the wire model of spark_replica/wire/native/acls.py: the replog listener's handlers
(brokerd/native/security_admin.py) and the Kafka listener's (brokerd/kafka/acls.py) only
translate layouts, so both manage the same ACLs with the same checks (Kafka's: an ACL
to create must name a concrete resource type, pattern type, operation and permission and
a `TYPE:NAME` principal). A bad item gets its own typed error; the others are served.

ACLs live in ZooKeeper (spark_replica/zk/security_store.py), which every broker watches:
an answer means "written". kazoo blocks, so each request's ZooKeeper work runs in one
worker thread (`in_zookeeper`, which the credential admin uses too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from kazoo.client import KazooClient

from brokerd.core.context import BrokerContext
from spark_replica.errors import (
    BrokerResponseError,
    ConfigError,
    InvalidRequestError,
    ReplogError,
    UnknownServerError,
    code_of,
    error_for_code,
    wire_message,
)
from spark_replica.security.acl import AclBinding, AclEntry, ResourcePattern
from spark_replica.wire.native.acls import (
    AclCreationResult,
    AclDeletionResult,
    AclFilter,
    WireAclBinding,
    binding_from_wire,
    binding_to_wire,
    check_filter,
    filter_matches,
)
from spark_replica.zk import security_store

T = TypeVar("T")


async def describe_acls(ctx: BrokerContext, f: AclFilter) -> list[AclBinding]:
    """The stored ACLs the filter matches, sorted; InvalidRequestError for a bad filter."""
    check_filter(f)
    bindings = await in_zookeeper(ctx, security_store.read_all_acls)
    return [b for b in sorted(bindings) if filter_matches(f, b)]


async def create_acls(
    ctx: BrokerContext, creations: list[WireAclBinding]
) -> list[AclCreationResult]:
    """Store each ACL; one result per creation, in order (a bad one gets its error)."""
    results = [AclCreationResult() for _ in creations]
    by_pattern: dict[ResourcePattern, list[tuple[int, AclEntry]]] = {}
    for index, wire in enumerate(creations):
        try:
            binding = _acl_to_create(wire)
        except BrokerResponseError as exc:
            results[index] = AclCreationResult(exc.code, wire_message(exc))
            continue
        by_pattern.setdefault(binding.pattern, []).append((index, binding.entry))

    def create(zk: KazooClient) -> None:
        for pattern, items in by_pattern.items():
            try:
                security_store.add_acls(zk, pattern, [entry for _, entry in items])
            except ReplogError as exc:
                for index, _ in items:
                    results[index] = AclCreationResult(code_of(exc), wire_message(exc))

    if by_pattern:
        await in_zookeeper(ctx, create)
    return results


def _acl_to_create(wire: WireAclBinding) -> AclBinding:
    binding = binding_from_wire(wire)
    check_node_name(
        binding.pattern.name, partial(security_store.acl_path, binding.pattern), InvalidRequestError
    )
    return binding


async def delete_acls(ctx: BrokerContext, filters: list[AclFilter]) -> list[AclDeletionResult]:
    """Each filter removes the ACLs it matches, and lists them; one ACL matched by two
    filters is listed under both, as in Kafka."""

    def delete(zk: KazooClient) -> list[AclDeletionResult]:
        existing = sorted(security_store.read_all_acls(zk))
        return [_delete_matching(zk, f, existing) for f in filters]

    return await in_zookeeper(ctx, delete)


def _delete_matching(
    zk: KazooClient, f: AclFilter, existing: list[AclBinding]
) -> AclDeletionResult:
    try:
        check_filter(f)
        matched = [b for b in existing if filter_matches(f, b)]
        by_pattern: dict[ResourcePattern, list[AclEntry]] = {}
        for binding in matched:
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        for pattern, entries in by_pattern.items():
            security_store.remove_acls(zk, pattern, entries)
    except ReplogError as exc:
        return AclDeletionResult(code_of(exc), wire_message(exc))
    return AclDeletionResult(0, None, [binding_to_wire(b) for b in matched])


def check_node_name(
    name: str, path_of: Callable[[], str], error: type[BrokerResponseError]
) -> None:
    """Refuse (with `error`) a name that cannot be a znode name before kazoo sees it
    (the store's path functions check ZooKeeper's rule)."""
    try:
        path_of()
    except ConfigError as exc:
        raise error(str(exc)) from None


async def in_zookeeper(ctx: BrokerContext, work: Callable[[KazooClient], T]) -> T:
    """Run blocking ZooKeeper work off the event loop; its untyped failures (ZooKeeper
    lost, unreadable data) become the wire error that says so."""
    if ctx.zk is None:
        raise UnknownServerError("the broker has no ZooKeeper session")
    try:
        return await asyncio.to_thread(work, ctx.zk)
    except BrokerResponseError:
        raise
    except ReplogError as exc:
        raise error_for_code(code_of(exc), wire_message(exc)) from exc
