"""SCRAM users and ACLs through the brokers, as Kafka's Admin client manages them.

A password never leaves this process: the client picks a random salt and sends the
salted password (PBKDF2 with the mechanism's hash), from which the broker derives the
keys it stores. The brokers write to ZooKeeper and every broker picks the change up
from there; an answer means "written", and enforcement follows within seconds.

Errors are the brokers' typed errors (spark_replica.errors): ResourceNotFoundError for a
user that has no credential, InvalidRequestError for an ACL that cannot exist,
ClusterAuthorizationFailedError when the caller may not administer the cluster.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from spark_replica.errors import ConfigError, raise_for_code
from spark_replica.security import scram
from spark_replica.security.acl import AclBinding
from spark_replica.wire.native.acls import (
    AclFilter,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    binding_from_wire,
    binding_to_wire,
)
from spark_replica.wire.native.scram_credentials import (
    MECHANISM_CODES,
    MECHANISM_NAMES,
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    ScramDeletion,
    ScramUpsertion,
)

from .cluster import Cluster

DEFAULT_MECHANISM = "SCRAM-SHA-256"
SALT_BYTES = 32
ADMIN_REQUEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ScramUser:
    """A user with SCRAM credentials: the iteration count of each mechanism it has."""

    name: str
    iterations: dict[str, int]


class SecurityAdmin:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def create_user(
        self,
        name: str,
        password: str,
        mechanism: str = DEFAULT_MECHANISM,
        iterations: int = scram.MIN_ITERATIONS,
    ) -> None:
        """Create the user's credential for `mechanism`, or replace it (a new password)."""
        code = _mechanism_code(mechanism)
        if not password:
            raise ConfigError(f"the password of user {name!r} is empty")
        if not scram.MIN_ITERATIONS <= iterations <= scram.MAX_ITERATIONS:
            # Checked here too: hashing a huge count would hang before the broker refuses.
            raise ConfigError(
                f"iterations must be in [{scram.MIN_ITERATIONS}, {scram.MAX_ITERATIONS}], "
                f"not {iterations}"
            )
        salt = secrets.token_bytes(SALT_BYTES)
        salted = scram.salted_password(mechanism, password, salt, iterations)
        await self._alter(
            AlterUserScramCredentialsRequest(
                [], [ScramUpsertion(name, code, iterations, salt, salted)]
            )
        )

    async def delete_user(self, name: str, mechanism: str | None = None) -> list[str]:
        """Delete the user's credential for `mechanism`, or all of them; return the
        mechanisms deleted. ResourceNotFoundError if there is none to delete."""
        if mechanism is None:
            (user,) = await self.describe_users([name])
            mechanisms = sorted(user.iterations)
        else:
            _mechanism_code(mechanism)
            mechanisms = [mechanism]
        deletions = [ScramDeletion(name, MECHANISM_CODES[m]) for m in mechanisms]
        await self._alter(AlterUserScramCredentialsRequest(deletions, []))
        return mechanisms

    async def list_users(self) -> list[ScramUser]:
        return await self.describe_users(None)

    async def describe_users(self, names: list[str] | None) -> list[ScramUser]:
        conn = await self.cluster.any_connection()
        response = await conn.send(
            DescribeUserScramCredentialsRequest(names), timeout_s=ADMIN_REQUEST_TIMEOUT_S
        )
        users = []
        for result in response.results:
            raise_for_code(result.error_code, result.error_message or result.user)
            iterations = {
                MECHANISM_NAMES.get(info.mechanism, f"mechanism {info.mechanism}"): info.iterations
                for info in result.credentials
            }
            users.append(ScramUser(result.user, iterations))
        return users

    async def _alter(self, request: AlterUserScramCredentialsRequest) -> None:
        conn = await self.cluster.any_connection()
        response = await conn.send(request, timeout_s=ADMIN_REQUEST_TIMEOUT_S)
        for result in response.results:
            raise_for_code(result.error_code, f"user {result.user!r}: {result.error_message}")

    async def add_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Add ACLs (adding one that exists is a no-op); the first refused one raises its
        typed error, after the brokers have stored the others."""
        bindings = list(bindings)
        conn = await self.cluster.any_connection()
        response = await conn.send(
            CreateAclsRequest([binding_to_wire(b) for b in bindings]),
            timeout_s=ADMIN_REQUEST_TIMEOUT_S,
        )
        for binding, result in zip(bindings, response.results, strict=True):
            raise_for_code(result.error_code, f"{describe(binding)}: {result.error_message}")

    async def remove_acls(self, filters: Iterable[AclFilter]) -> list[AclBinding]:
        """Remove every ACL a filter matches; return those removed."""
        conn = await self.cluster.any_connection()
        response = await conn.send(
            DeleteAclsRequest(list(filters)), timeout_s=ADMIN_REQUEST_TIMEOUT_S
        )
        removed: set[AclBinding] = set()
        for result in response.results:
            raise_for_code(result.error_code, result.error_message or "")
            removed.update(binding_from_wire(wire) for wire in result.matched)
        return sorted(removed)

    async def list_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        conn = await self.cluster.any_connection()
        response = await conn.send(
            DescribeAclsRequest(acl_filter or AclFilter()), timeout_s=ADMIN_REQUEST_TIMEOUT_S
        )
        return sorted(binding_from_wire(wire) for wire in response.bindings)


def describe(binding: AclBinding) -> str:
    """One ACL in words, e.g. "User:alice Allow Read from * on Topic:Literal:orders"."""
    pattern, entry = binding.pattern, binding.entry
    return (
        f"{entry.principal} {entry.permission} {entry.operation} from {entry.host} "
        f"on {pattern.resource_type}:{pattern.pattern_type}:{pattern.name}"
    )


def _mechanism_code(mechanism: str) -> int:
    code = MECHANISM_CODES.get(mechanism)
    if code is None:
        raise ConfigError(
            f"unknown SCRAM mechanism {mechanism!r} (valid: {', '.join(MECHANISM_CODES)})"
        )
    return code
