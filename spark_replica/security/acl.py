"""Kafka's ACL model and its authorization decision, with no I/O.

The decision follows Kafka's AclAuthorizer so rules written for Kafka mean the same here:

1. A super user is always allowed.
2. The ACLs that apply to a resource are those on LITERAL patterns with its exact name or
   the wildcard "*", and on PREFIXED patterns whose name is a prefix of its name.
3. If none apply (to anyone), the answer is `allow_everyone_if_no_acl_found`.
4. Otherwise an ACL matches the request if its principal is the requester or "User:*" and
   its host is the requester's or "*". A matching DENY of the operation or of All denies;
   deny wins over any allow.
5. Else a matching ALLOW of the operation or of All allows. An allow of Read, Write,
   Delete or Alter implies Describe; an allow of AlterConfigs implies DescribeConfigs.
6. IdempotentWrite on the cluster is also allowed to whoever may Write some topic
   (KIP-679: an idempotent producer needs no ACL beyond its topics'). "Some topic" is
   Kafka's authorizeByResourceType: a literal wildcard DENY of Write refuses; else
   `allow_everyone_if_no_acl_found` allows; else an ALLOW of Write on a literal name or a
   prefix that no DENY (same literal, or a prefix of it) covers allows.
7. Anything else is denied.

Every operation, resource type and principal type Kafka stores is accepted, so ACLs that
Kafka's tools wrote (`kafka-acls --producer --idempotent` adds IdempotentWrite on the
cluster; a principal may be `Group:x` under a custom principal builder) load and
round-trip. In Kafka's ZooKeeper JSON an entry that cannot be read (an operation Kafka
may add later, a field missing) is kept aside, never fatal to its neighbours:
`decode_entries` returns it with the reason, the loader skips and reports it, and a
read-modify-write puts it back untouched.

Until its first `replace_all` an Authorizer refuses everyone but the super users, whatever
`allow_everyone_if_no_acl_found` says: a broker that has not read its ACLs yet must not
serve what a DENY forbids. The rule set is replaced whole (`replace_all`, from
ZooKeeper's thread) while `authorize` runs on the broker's thread: the index is an
immutable snapshot swapped in a single assignment, so a reader sees the old rules or the
new ones, never a mix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from spark_replica.errors import ConfigError

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = f"User:{WILDCARD}"
ACL_JSON_VERSION = 1


class ResourceType(StrEnum):
    """Kafka's resource types, with the names its ZooKeeper paths use."""

    TOPIC = "Topic"
    GROUP = "Group"
    CLUSTER = "Cluster"
    TRANSACTIONAL_ID = "TransactionalId"
    DELEGATION_TOKEN = "DelegationToken"
    USER = "User"


class PatternType(StrEnum):
    LITERAL = "Literal"
    PREFIXED = "Prefixed"


class Operation(StrEnum):
    """Kafka's operations, in Kafka's order (its listings keep it)."""

    ALL = "All"
    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"
    CREATE_TOKENS = "CreateTokens"
    DESCRIBE_TOKENS = "DescribeTokens"


class Permission(StrEnum):
    ALLOW = "Allow"
    DENY = "Deny"


# The operations whose ALLOW also allows the key (Kafka's implied Describe rules).
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}

# An operation on a resource also allowed to whoever may do another operation on some
# resource of another type (rule 6, KIP-679).
_IMPLIED_BY_ANY: dict[tuple[Operation, ResourceType], tuple[Operation, ResourceType]] = {
    (Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER): (Operation.WRITE, ResourceType.TOPIC),
}

_E = TypeVar("_E", bound=StrEnum)


def _normalized(text: str) -> str:
    return text.replace("_", "").replace("-", "").lower()


def _parse_enum(enum: type[_E], text: str, what: str) -> _E:
    """Case-insensitive, with or without '_'/'-' between words: "ClusterAction",
    "cluster_action" and "CLUSTER-ACTION" are all the same operation."""
    wanted = _normalized(text.strip())
    for member in enum:
        if _normalized(member.value) == wanted:
            return member
    valid = ", ".join(member.value for member in enum)
    raise ConfigError(f"unknown {what} {text!r} (valid: {valid})")


def parse_resource_type(text: str) -> ResourceType:
    return _parse_enum(ResourceType, text, "resource type")


def parse_pattern_type(text: str) -> PatternType:
    return _parse_enum(PatternType, text, "resource pattern type")


def parse_operation(text: str) -> Operation:
    return _parse_enum(Operation, text, "operation")


def parse_permission(text: str) -> Permission:
    return _parse_enum(Permission, text, "permission type")


def parse_principal(text: str) -> str:
    """A principal as Kafka writes it: "TYPE:NAME" ("User:alice"; "User:*" for everyone).

    Any type is stored, as Kafka stores it; replog's logins are all of type User, so an
    ACL of another type matches no request of replog's own authentication.
    """
    kind, colon, name = text.partition(":")
    if not kind or not colon or not name:
        raise ConfigError(f"principal {text!r} must be TYPE:NAME (e.g. User:alice)")
    return text


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError(f"a {self.resource_type} ACL needs a resource name")
        if self.resource_type is ResourceType.CLUSTER and (
            self.name != CLUSTER_NAME or self.pattern_type is not PatternType.LITERAL
        ):
            raise ConfigError(f"the only cluster resource is the literal {CLUSTER_NAME!r}")
        if self.pattern_type is PatternType.PREFIXED and self.name == WILDCARD:
            raise ConfigError(f"{WILDCARD!r} is a literal wildcard, not a prefix")


@dataclass(frozen=True, order=True)
class AclEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def __post_init__(self) -> None:
        parse_principal(self.principal)
        if not self.host:
            raise ConfigError("an ACL needs a host ('*' for any host)")


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AclEntry


@dataclass(frozen=True, eq=False)
class UnreadableEntry:
    """One entry of Kafka's ACL JSON that is not an ACL this code can read, as stored."""

    raw: Any  # the JSON value itself, written back untouched
    reason: str


@dataclass
class StoredEntries:
    """The ACLs of one resource pattern: the entries read and those that could not be."""

    entries: set[AclEntry]
    unreadable: list[UnreadableEntry] = field(default_factory=list)


def encode_entries(
    entries: Iterable[AclEntry], unreadable: Iterable[UnreadableEntry] = ()
) -> bytes:
    """Kafka's ZooKeeper JSON for the ACLs of one resource pattern (sorted, no duplicates),
    followed by the unreadable entries exactly as they were read."""
    acls: list[Any] = [
        {
            "principal": entry.principal,
            "permissionType": entry.permission.value,
            "operation": entry.operation.value,
            "host": entry.host,
        }
        for entry in sorted(set(entries))
    ]
    acls.extend(kept.raw for kept in unreadable)
    return json.dumps({"version": ACL_JSON_VERSION, "acls": acls}).encode("utf-8")


def decode_entries(data: bytes) -> StoredEntries:
    """The ACLs of Kafka's ZooKeeper JSON, each unreadable entry set aside with its reason;
    ConfigError if the data as a whole is not that JSON (nothing in it can be trusted)."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"ACL data is not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != ACL_JSON_VERSION:
        raise ConfigError(f"ACL data is not version {ACL_JSON_VERSION} ACL JSON: {document!r}")
    acls = document.get("acls")
    if not isinstance(acls, list):
        raise ConfigError("ACL data has no 'acls' list")
    stored = StoredEntries(set())
    for acl in acls:
        try:
            stored.entries.add(_decode_entry(acl))
        except ConfigError as exc:
            stored.unreadable.append(UnreadableEntry(acl, str(exc)))
    return stored


def _decode_entry(acl: object) -> AclEntry:
    if not isinstance(acl, Mapping):
        raise ConfigError(f"an ACL must be a JSON object, not {acl!r}")
    fields = ("principal", "permissionType", "operation", "host")
    values = [acl.get(name) for name in fields]
    if not all(isinstance(value, str) for value in values):
        raise ConfigError(f"an ACL needs string fields {', '.join(fields)}: {acl!r}")
    principal, permission, operation, host = (str(value) for value in values)
    return AclEntry(principal, host, parse_operation(operation), parse_permission(permission))


_Index = dict[tuple[ResourceType, PatternType, str], tuple[AclEntry, ...]]


class Authorizer:
    """Kafka's AclAuthorizer decision over an in-memory copy of the ACLs."""

    def __init__(
        self, super_users: frozenset[str], allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        for principal in super_users:
            parse_principal(principal)
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        # None until the ACLs are first loaded: refuse everyone but the super users rather
        # than let `allow_everyone_if_no_acl_found` void DENYs not read yet.
        self._index: _Index | None = None

    @property
    def loaded(self) -> bool:
        return self._index is not None

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        grouped: dict[tuple[ResourceType, PatternType, str], set[AclEntry]] = {}
        for binding in bindings:
            pattern = binding.pattern
            key = (pattern.resource_type, pattern.pattern_type, pattern.name)
            grouped.setdefault(key, set()).add(binding.entry)
        self._index = {key: tuple(sorted(entries)) for key, entries in grouped.items()}

    def bindings(self) -> list[AclBinding]:
        return sorted(
            AclBinding(ResourcePattern(resource_type, name, pattern_type), entry)
            for (resource_type, pattern_type, name), entries in (self._index or {}).items()
            for entry in entries
        )

    def matching_entries(self, resource_type: ResourceType, name: str) -> list[AclEntry]:
        """Every ACL entry that applies to the resource, whoever it is for (rule 2)."""
        index = self._index or {}
        keys = {
            (resource_type, PatternType.LITERAL, name),
            (resource_type, PatternType.LITERAL, WILDCARD),
        } | {(resource_type, PatternType.PREFIXED, name[:end]) for end in range(1, len(name) + 1)}
        return [entry for key in keys for entry in index.get(key, ())]

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        if self._allowed_by_acls(principal, host, operation, resource_type, name):
            return True
        implied = _IMPLIED_BY_ANY.get((operation, resource_type))
        return implied is not None and self.authorize_any(principal, host, *implied)

    def _allowed_by_acls(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Rules 2 to 5 and 7."""
        if self._index is None:
            return False
        entries = self.matching_entries(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        mine = [entry for entry in entries if _concerns(entry, principal, host)]
        if any(
            entry.permission is Permission.DENY and entry.operation in (operation, Operation.ALL)
            for entry in mine
        ):
            return False
        allowing = _IMPLIED_BY.get(operation, frozenset({operation})) | {Operation.ALL}
        return any(
            entry.permission is Permission.ALLOW and entry.operation in allowing for entry in mine
        )

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may do `operation` on at least one resource of the type
        (Kafka's authorizeByResourceType, rule 6). Walks every ACL of the type: it is
        asked once per producer id, not per request."""
        if principal in self.super_users:
            return True
        index = self._index
        if index is None:
            return False
        names: dict[tuple[Permission, PatternType], set[str]] = {
            (permission, pattern_type): set()
            for permission in Permission
            for pattern_type in PatternType
        }
        for (of_type, pattern_type, name), entries in index.items():
            if of_type is not resource_type:
                continue
            for entry in entries:
                if _concerns(entry, principal, host) and entry.operation in (
                    operation,
                    Operation.ALL,
                ):
                    names[entry.permission, pattern_type].add(name)
        denied_literals = names[Permission.DENY, PatternType.LITERAL]
        denied_prefixes = names[Permission.DENY, PatternType.PREFIXED]
        if WILDCARD in denied_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        allowed_literals = names[Permission.ALLOW, PatternType.LITERAL]
        if WILDCARD in allowed_literals:
            return True

        def under_denied_prefix(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in denied_prefixes)

        return any(
            not under_denied_prefix(name) and name not in denied_literals
            for name in allowed_literals
        ) or any(
            not under_denied_prefix(prefix)
            for prefix in names[Permission.ALLOW, PatternType.PREFIXED]
        )


def _concerns(entry: AclEntry, principal: str, host: str) -> bool:
    """Whether an ACL entry is for this requester (its principal or everyone, from its
    host or any)."""
    return entry.principal in (principal, WILDCARD_PRINCIPAL) and entry.host in (host, WILDCARD)
