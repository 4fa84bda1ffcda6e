"""ACL admin, the same on both listeners: describe, create and delete stored ACLs.

On the ACL model of spark_replica.security.acl, free of either wire: the replog
listener's handlers (brokerd/native/security_admin.py) and the Kafka listener's
(brokerd/kafka/acls.py) translate their layouts to bindings and filters (a filter is a
predicate on bindings) and back, so both manage the same ACLs with the same checks
(Kafka's: an ACL to create must name a concrete resource type, pattern type, operation and
permission and a `TYPE:NAME` principal). An item the dialect could not translate arrives
as its typed error and is answered with it; the others are served.

ACLs live in ZooKeeper (spark_replica/zk/security_store.py), which every broker watches:
an answer means "written". kazoo blocks, so each request's ZooKeeper work runs in one
worker thread (`in_zookeeper`, which the credential admin uses too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
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
from spark_replica.zk import security_store

T = TypeVar("T")
W = TypeVar("W")
# A filter: whether it matches a stored binding.
AclMatcher = Callable[[AclBinding], bool]


@dataclass(slots=True)
class AclResult:
    """One creation's or one filter's outcome: its error, or the bindings it matched."""

    error: ReplogError | None = None
    matched: list[AclBinding] = field(default_factory=list)


def each_or_error(convert: Callable[[W], T], items: Iterable[W]) -> list[T | BrokerResponseError]:
    """Each item of a request translated (to a binding or a filter's predicate), or the
    typed error that refused it, which is then that item's answer."""
    converted: list[T | BrokerResponseError] = []
    for item in items:
        try:
            converted.append(convert(item))
        except BrokerResponseError as exc:
            converted.append(exc)
    return converted


async def describe_acls(ctx: BrokerContext, matches: AclMatcher) -> list[AclBinding]:
    """The stored ACLs the filter matches, sorted."""
    bindings = await in_zookeeper(ctx, security_store.read_all_acls)
    return [b for b in sorted(bindings) if matches(b)]


async def create_acls(
    ctx: BrokerContext, creations: Sequence[AclBinding | BrokerResponseError]
) -> list[AclResult]:
    """Store each ACL; one result per creation, in order (a bad one gets its error)."""
    results = [AclResult() for _ in creations]
    by_pattern: dict[ResourcePattern, list[tuple[int, AclEntry]]] = {}
    for index, creation in enumerate(creations):
        try:
            binding = _acl_to_create(creation)
        except BrokerResponseError as exc:
            results[index].error = exc
            continue
        by_pattern.setdefault(binding.pattern, []).append((index, binding.entry))

    def create(zk: KazooClient) -> None:
        for pattern, items in by_pattern.items():
            try:
                security_store.add_acls(zk, pattern, [entry for _, entry in items])
            except ReplogError as exc:
                for index, _ in items:
                    results[index].error = exc

    if by_pattern:
        await in_zookeeper(ctx, create)
    return results


def _acl_to_create(creation: AclBinding | BrokerResponseError) -> AclBinding:
    if isinstance(creation, BrokerResponseError):
        raise creation
    check_node_name(
        creation.pattern.name,
        partial(security_store.acl_path, creation.pattern),
        InvalidRequestError,
    )
    return creation


async def delete_acls(
    ctx: BrokerContext, filters: Sequence[AclMatcher | BrokerResponseError]
) -> list[AclResult]:
    """Each filter removes the ACLs it matches, and lists them; one ACL matched by two
    filters is listed under both, as in Kafka."""

    def delete(zk: KazooClient) -> list[AclResult]:
        existing = sorted(security_store.read_all_acls(zk))
        return [_delete_matching(zk, f, existing) for f in filters]

    return await in_zookeeper(ctx, delete)


def _delete_matching(
    zk: KazooClient, matches: AclMatcher | BrokerResponseError, existing: list[AclBinding]
) -> AclResult:
    if isinstance(matches, BrokerResponseError):
        return AclResult(matches)
    try:
        matched = [b for b in existing if matches(b)]
        by_pattern: dict[ResourcePattern, list[AclEntry]] = {}
        for binding in matched:
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        for pattern, entries in by_pattern.items():
            security_store.remove_acls(zk, pattern, entries)
    except ReplogError as exc:
        return AclResult(exc)
    return AclResult(None, matched)


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
