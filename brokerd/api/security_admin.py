"""Serving DescribeAcls, CreateAcls, DeleteAcls and the SCRAM credential APIs.

The ACL work is dialect-free (`describe_acls`, `create_acls`, `delete_acls`, on the
wire model of spark_replica/wire/native/acls.py): the replog listener's handlers below and
the Kafka listener's (brokerd/kafka/acls.py) only translate layouts, so both manage the
same ACLs with the same checks.

ACLs and credentials live in ZooKeeper (spark_replica/zk/security_store.py), which every
broker watches: an answer means "written", and brokers apply it within their watch delay.
kazoo blocks, so each request's ZooKeeper work runs in one worker thread. Whether the
caller may do this at all (Describe or Alter on the Cluster) is decided before a handler
runs (brokerd/core/authorization.py; on the Kafka listener, in its handlers).

Checks follow Kafka's: an ACL to create must name a concrete resource type, pattern type,
operation and permission and a `TYPE:NAME` principal; a credential needs a known
mechanism, a non-empty user name and Kafka's iteration bounds. A bad item gets its own
typed error; the others of the request are still served. A user's credential changes
are all refused if any of them is invalid, otherwise applied one mechanism at a time.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from kazoo.client import KazooClient

from brokerd.core.context import BrokerContext
from spark_replica.errors import (
    BrokerResponseError,
    ConfigError,
    DuplicateResourceError,
    InvalidRequestError,
    ReplogError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnknownServerError,
    UnsupportedSaslMechanismError,
    code_of,
    error_for_code,
    wire_message,
)
from spark_replica.security import scram
from spark_replica.security.acl import AclBinding, AclEntry, ResourcePattern
from spark_replica.wire.native.acls import (
    AclCreationResult,
    AclDeletionResult,
    AclFilter,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    WireAclBinding,
    binding_from_wire,
    binding_to_wire,
    check_filter,
    filter_matches,
)
from spark_replica.wire.native.scram_credentials import (
    MECHANISM_CODES,
    MECHANISM_NAMES,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ScramDeletion,
    ScramUpsertion,
    UserAlterationResult,
    UserCredentials,
)
from spark_replica.zk import security_store

T = TypeVar("T")


# --------------------------------------------------------------------------- ACLs


async def describe_acls(ctx: BrokerContext, f: AclFilter) -> list[AclBinding]:
    """The stored ACLs the filter matches, sorted; InvalidRequestError for a bad filter."""
    check_filter(f)
    bindings = await _in_zookeeper(ctx, security_store.read_all_acls)
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
        await _in_zookeeper(ctx, create)
    return results


def _acl_to_create(wire: WireAclBinding) -> AclBinding:
    binding = binding_from_wire(wire)
    _check_node_name(
        binding.pattern.name, partial(security_store.acl_path, binding.pattern), InvalidRequestError
    )
    return binding


async def delete_acls(ctx: BrokerContext, filters: list[AclFilter]) -> list[AclDeletionResult]:
    """Each filter removes the ACLs it matches, and lists them; one ACL matched by two
    filters is listed under both, as in Kafka."""

    def delete(zk: KazooClient) -> list[AclDeletionResult]:
        existing = sorted(security_store.read_all_acls(zk))
        return [_delete_matching(zk, f, existing) for f in filters]

    return await _in_zookeeper(ctx, delete)


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


async def handle_describe_acls(
    ctx: BrokerContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    bindings = await describe_acls(ctx, request.filter)
    return DescribeAclsResponse([binding_to_wire(b) for b in bindings])


async def handle_create_acls(ctx: BrokerContext, request: CreateAclsRequest) -> CreateAclsResponse:
    return CreateAclsResponse(await create_acls(ctx, request.creations))


async def handle_delete_acls(ctx: BrokerContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    return DeleteAclsResponse(await delete_acls(ctx, request.filters))


# --------------------------------------------------------------------------- SCRAM users


async def handle_describe_user_scram_credentials(
    ctx: BrokerContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    """Null or empty names every user (as Kafka); a name asked twice is answered once,
    with DUPLICATE_RESOURCE."""
    users = request.users

    def describe(zk: KazooClient) -> list[UserCredentials]:
        if not users:
            return [_describe_user(zk, user) for user in sorted(security_store.list_users(zk))]
        counts = Counter(users)
        return [
            _describe_user(zk, user)
            if counts[user] == 1
            else _user_error(user, DuplicateResourceError(f"user {user!r} is named twice"))
            for user in counts
        ]

    return DescribeUserScramCredentialsResponse(await _in_zookeeper(ctx, describe))


def _describe_user(zk: KazooClient, user: str) -> UserCredentials:
    try:
        _check_node_name(user, partial(security_store.user_path, user), ResourceNotFoundError)
        infos = []
        for mechanism, code in MECHANISM_CODES.items():
            credential = security_store.read_credential(zk, user, mechanism)
            if credential is not None:
                infos.append(CredentialInfo(code, credential.iterations))
    except ReplogError as exc:
        return _user_error(user, exc)
    if not infos:
        return _user_error(user, ResourceNotFoundError(f"user {user!r} has no SCRAM credential"))
    return UserCredentials(user, 0, None, infos)


def _user_error(user: str, error: ReplogError) -> UserCredentials:
    return UserCredentials(user, code_of(error), wire_message(error))


async def handle_alter_user_scram_credentials(
    ctx: BrokerContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    changes: dict[str, list[ScramDeletion | ScramUpsertion]] = {}
    requested: list[ScramDeletion | ScramUpsertion] = [*request.deletions, *request.upsertions]
    for change in requested:
        changes.setdefault(change.user, []).append(change)

    def alter(zk: KazooClient) -> list[UserAlterationResult]:
        results = []
        for user, user_changes in changes.items():
            try:
                _alter_user(zk, user, user_changes)
            except ReplogError as exc:
                results.append(UserAlterationResult(user, code_of(exc), wire_message(exc)))
            else:
                results.append(UserAlterationResult(user))
        return results

    return AlterUserScramCredentialsResponse(await _in_zookeeper(ctx, alter) if changes else [])


def _alter_user(zk: KazooClient, user: str, changes: list[ScramDeletion | ScramUpsertion]) -> None:
    """Check every change of one user, then apply them; nothing is applied if one is bad."""
    if not user:
        raise UnacceptableCredentialError("the user name is empty")
    _check_node_name(user, partial(security_store.user_path, user), UnacceptableCredentialError)
    mechanisms = [_mechanism_name(change.mechanism) for change in changes]
    if len(set(mechanisms)) != len(mechanisms):
        raise DuplicateResourceError(
            f"a credential of user {user!r} is altered twice in one request"
        )
    credentials = {
        mechanism: _credential(mechanism, change)
        for mechanism, change in zip(mechanisms, changes, strict=True)
        if isinstance(change, ScramUpsertion)
    }
    for mechanism, change in zip(mechanisms, changes, strict=True):
        if (
            isinstance(change, ScramDeletion)
            and security_store.read_credential(zk, user, mechanism) is None
        ):
            raise ResourceNotFoundError(f"user {user!r} has no {mechanism} credential to delete")
    for mechanism, change in zip(mechanisms, changes, strict=True):
        if isinstance(change, ScramDeletion):
            security_store.delete_credential(zk, user, mechanism)
        else:
            security_store.write_credential(zk, user, credentials[mechanism])


def _mechanism_name(code: int) -> str:
    name = MECHANISM_NAMES.get(code)
    if name is None:
        valid = ", ".join(f"{c} ({n})" for n, c in MECHANISM_CODES.items())
        raise UnsupportedSaslMechanismError(f"unknown SCRAM mechanism code {code} (valid: {valid})")
    return name


def _credential(mechanism: str, upsertion: ScramUpsertion) -> scram.ScramCredential:
    if not scram.MIN_ITERATIONS <= upsertion.iterations <= scram.MAX_ITERATIONS:
        raise UnacceptableCredentialError(
            f"{mechanism} iterations {upsertion.iterations} out of range "
            f"[{scram.MIN_ITERATIONS}, {scram.MAX_ITERATIONS}]"
        )
    if not upsertion.salt:
        raise UnacceptableCredentialError("the salt is empty")
    try:
        return scram.credential_from_salted_password(
            mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
        )
    except ConfigError as exc:
        raise UnacceptableCredentialError(str(exc)) from None


# --------------------------------------------------------------------------- ZooKeeper


def _check_node_name(
    name: str, path_of: Callable[[], str], error: type[BrokerResponseError]
) -> None:
    """Refuse (with `error`) a name that cannot be a znode name before kazoo sees it
    (the store's path functions check ZooKeeper's rule)."""
    try:
        path_of()
    except ConfigError as exc:
        raise error(str(exc)) from None


async def _in_zookeeper(ctx: BrokerContext, work: Callable[[KazooClient], T]) -> T:
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
