"""Serving DescribeAcls, CreateAcls, DeleteAcls and the SCRAM credential APIs.

The ACL work is the core's (brokerd/core/acl_admin.py), shared with the Kafka listener
(brokerd/kafka/acls.py); the handlers below only translate layouts.

ACLs and credentials live in ZooKeeper (spark_replica/zk/security_store.py), which every
broker watches: an answer means "written", and brokers apply it within their watch delay.
kazoo blocks, so each request's ZooKeeper work runs in one worker thread. Whether the
caller may do this at all (Describe or Alter on the Cluster) is decided before a handler
runs (brokerd/native/authorization.py; on the Kafka listener, in its handlers).

Checks follow Kafka's: an ACL to create must name a concrete resource type, pattern type,
operation and permission and a `TYPE:NAME` principal; a credential needs a known
mechanism, a non-empty user name and Kafka's iteration bounds. A bad item gets its own
typed error; the others of the request are still served. A user's credential changes
are all refused if any of them is invalid, otherwise applied one mechanism at a time.
"""

from __future__ import annotations

from collections import Counter
from functools import partial

from kazoo.client import KazooClient

from brokerd.core.acl_admin import (
    AclMatcher,
    check_node_name,
    create_acls,
    delete_acls,
    describe_acls,
    each_or_error,
    in_zookeeper,
)
from brokerd.core.context import BrokerContext
from spark_replica.errors import (
    ConfigError,
    DuplicateResourceError,
    ReplogError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
    code_of,
    wire_message,
)
from spark_replica.security import scram
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


async def handle_describe_acls(
    ctx: BrokerContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    bindings = await describe_acls(ctx, _matcher(request.filter))
    return DescribeAclsResponse([binding_to_wire(b) for b in bindings])


async def handle_create_acls(ctx: BrokerContext, request: CreateAclsRequest) -> CreateAclsResponse:
    results = await create_acls(ctx, each_or_error(binding_from_wire, request.creations))
    return CreateAclsResponse(
        [
            AclCreationResult()
            if r.error is None
            else AclCreationResult(code_of(r.error), wire_message(r.error))
            for r in results
        ]
    )


async def handle_delete_acls(ctx: BrokerContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    results = await delete_acls(ctx, each_or_error(_matcher, request.filters))
    return DeleteAclsResponse(
        [
            AclDeletionResult(0, None, [binding_to_wire(b) for b in r.matched])
            if r.error is None
            else AclDeletionResult(code_of(r.error), wire_message(r.error))
            for r in results
        ]
    )


def _matcher(f: AclFilter) -> AclMatcher:
    """The filter's predicate; InvalidRequestError for a filter that matches nothing
    well defined."""
    check_filter(f)
    return partial(filter_matches, f)


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

    return DescribeUserScramCredentialsResponse(await in_zookeeper(ctx, describe))


def _describe_user(zk: KazooClient, user: str) -> UserCredentials:
    try:
        check_node_name(user, partial(security_store.user_path, user), ResourceNotFoundError)
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

    return AlterUserScramCredentialsResponse(await in_zookeeper(ctx, alter) if changes else [])


def _alter_user(zk: KazooClient, user: str, changes: list[ScramDeletion | ScramUpsertion]) -> None:
    """Check every change of one user, then apply them; nothing is applied if one is bad."""
    if not user:
        raise UnacceptableCredentialError("the user name is empty")
    check_node_name(user, partial(security_store.user_path, user), UnacceptableCredentialError)
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
