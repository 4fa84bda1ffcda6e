"""DescribeAcls, CreateAcls and DeleteAcls: ACL administration through any broker.

Codes and field meanings are Kafka's (resource type, pattern type, operation and
permission travel as int8 with Kafka's numbers, so UNKNOWN and ANY exist on the wire);
layouts are replog's own, flat, without throttle times. A binding is
(resource type, resource name, pattern type, principal, host, operation, permission). A
filter has the same fields, with the resource name, principal and host nullable (null
matches any) and ANY allowed for the codes; its pattern type may also be MATCH: every
pattern that applies to the named resource (the literal name, the literal wildcard, and
prefixed patterns that are a prefix of it).

DescribeAcls request: one filter; response: the matching bindings.
CreateAcls request: bindings; response: per binding an error code and message, in order.
DeleteAcls request: filters; response: per filter an error code, message and the
bindings it matched (and removed). Errors of the request as a whole (a filter that
cannot match anything well defined) travel in the response header.

After the codecs: conversion between wire bindings and the ACL model
(spark_replica.security.acl), and Kafka's filter matching, shared by broker and client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import TypeVar

from spark_replica.errors import ConfigError, InvalidRequestError
from spark_replica.security.acl import (
    WILDCARD,
    AclBinding,
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import ERROR, struct, struct_array, wire_field
from spark_replica.wire.schema import Field, Tabled, tabled


class ResourceTypeCode(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternTypeCode(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class OperationCode(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionCode(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _acl_fields(nullable_names: bool) -> tuple[Field, ...]:
    """A binding's fields in wire order; a filter's are the same with its resource name,
    principal and host nullable."""
    return (
        wire_field("resource_type", "int8"),
        wire_field("resource_name", "string", nullable=nullable_names),
        wire_field("pattern_type", "int8"),
        wire_field("principal", "string", nullable=nullable_names),
        wire_field("host", "string", nullable=nullable_names),
        wire_field("operation", "int8"),
        wire_field("permission", "int8"),
    )


BINDING_FIELDS = _acl_fields(nullable_names=False)
FILTER_FIELDS = _acl_fields(nullable_names=True)


@tabled(*BINDING_FIELDS)
@dataclass(slots=True)
class WireAclBinding(Tabled):
    """One ACL as it travels: codes as plain ints, since a peer may send any int8."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@tabled(*FILTER_FIELDS)
@dataclass(slots=True)
class AclFilter(Tabled):
    """Which bindings to describe or delete; None and the ANY codes match everything."""

    resource_type: int = ResourceTypeCode.ANY
    resource_name: str | None = None
    pattern_type: int = PatternTypeCode.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = OperationCode.ANY
    permission: int = PermissionCode.ANY


def _bindings(name: str) -> Field:
    return struct_array(name, WireAclBinding, *BINDING_FIELDS)


@tabled(struct("filter", AclFilter, *FILTER_FIELDS))
@dataclass(slots=True)
class DescribeAclsRequest(Tabled):
    API_KEY = ApiKey.DESCRIBE_ACLS
    filter: AclFilter


@tabled(_bindings("bindings"))
@dataclass(slots=True)
class DescribeAclsResponse(Tabled):
    bindings: list[WireAclBinding]


@tabled(_bindings("creations"))
@dataclass(slots=True)
class CreateAclsRequest(Tabled):
    API_KEY = ApiKey.CREATE_ACLS
    creations: list[WireAclBinding]


@dataclass(slots=True)
class AclCreationResult:
    error_code: int = 0
    error_message: str | None = None


@tabled(struct_array("results", AclCreationResult, *ERROR))
@dataclass(slots=True)
class CreateAclsResponse(Tabled):
    results: list[AclCreationResult]


@tabled(struct_array("filters", AclFilter, *FILTER_FIELDS))
@dataclass(slots=True)
class DeleteAclsRequest(Tabled):
    API_KEY = ApiKey.DELETE_ACLS
    filters: list[AclFilter]


@dataclass(slots=True)
class AclDeletionResult:
    error_code: int = 0
    error_message: str | None = None
    matched: list[WireAclBinding] = field(default_factory=list)


@tabled(struct_array("results", AclDeletionResult, *ERROR, _bindings("matched")))
@dataclass(slots=True)
class DeleteAclsResponse(Tabled):
    results: list[AclDeletionResult]


# --------------------------------------------------------------------------- the ACL model
# Wire codes and the model's enums share member names (TOPIC, READ, ALLOW, ...): a code
# converts by name, and UNKNOWN, ANY and MATCH, which the model has no member for, are
# exactly the codes only a filter may carry.

_M = TypeVar("_M", bound=StrEnum)


def _model_value(model: type[_M], codes: type[IntEnum], code: int, what: str) -> _M:
    try:
        return model[codes(code).name]
    except (ValueError, KeyError):
        valid = ", ".join(f"{codes[m.name].value} ({m.value})" for m in model)
        raise InvalidRequestError(
            f"{what} code {code} cannot be stored in an ACL (valid: {valid})"
        ) from None


def binding_from_wire(wire: WireAclBinding) -> AclBinding:
    """The ACL a client asked to create; InvalidRequestError naming what is wrong with it."""
    resource_type = _model_value(
        ResourceType, ResourceTypeCode, wire.resource_type, "resource type"
    )
    pattern_type = _model_value(PatternType, PatternTypeCode, wire.pattern_type, "pattern type")
    operation = _model_value(Operation, OperationCode, wire.operation, "operation")
    permission = _model_value(Permission, PermissionCode, wire.permission, "permission type")
    try:
        return AclBinding(
            ResourcePattern(resource_type, wire.resource_name, pattern_type),
            AclEntry(wire.principal, wire.host, operation, permission),
        )
    except ConfigError as exc:
        raise InvalidRequestError(str(exc)) from None


def binding_to_wire(binding: AclBinding) -> WireAclBinding:
    pattern, entry = binding.pattern, binding.entry
    return WireAclBinding(
        ResourceTypeCode[pattern.resource_type.name],
        pattern.name,
        PatternTypeCode[pattern.pattern_type.name],
        entry.principal,
        entry.host,
        OperationCode[entry.operation.name],
        PermissionCode[entry.permission.name],
    )


def acl_filter(
    resource_type: ResourceType | None = None,
    resource_name: str | None = None,
    pattern_type: PatternType | None = None,
    *,
    match: bool = False,
    principal: str | None = None,
    host: str | None = None,
    operation: Operation | None = None,
    permission: Permission | None = None,
) -> AclFilter:
    """A filter from model values, None meaning any; `match` asks for every pattern that
    applies to `resource_name` (Kafka's MATCH) and excludes naming a pattern type."""
    if match and pattern_type is not None:
        raise ConfigError("a filter matches either one pattern type or every applicable pattern")
    if match:
        pattern_code = PatternTypeCode.MATCH
    elif pattern_type is None:
        pattern_code = PatternTypeCode.ANY
    else:
        pattern_code = PatternTypeCode[pattern_type.name]
    return AclFilter(
        ResourceTypeCode.ANY if resource_type is None else ResourceTypeCode[resource_type.name],
        resource_name,
        pattern_code,
        principal,
        host,
        OperationCode.ANY if operation is None else OperationCode[operation.name],
        PermissionCode.ANY if permission is None else PermissionCode[permission.name],
    )


def check_filter(f: AclFilter) -> None:
    """InvalidRequestError unless every code of the filter is one it may hold.

    As in Kafka, a filter with an UNKNOWN (or unheard-of) code is refused rather than
    matching nothing, since a delete with it would silently do nothing.
    """
    fields = (
        (ResourceTypeCode, f.resource_type, "resource type"),
        (PatternTypeCode, f.pattern_type, "pattern type"),
        (OperationCode, f.operation, "operation"),
        (PermissionCode, f.permission, "permission type"),
    )
    for codes, code, what in fields:
        if code == 0 or code not in set(codes):
            valid = ", ".join(f"{c.value} ({c.name})" for c in codes if c.value)
            raise InvalidRequestError(f"ACL filter {what} code {code} is invalid (valid: {valid})")


def filter_matches(f: AclFilter, binding: AclBinding) -> bool:
    """Kafka's AclBindingFilter.matches, for a filter that passed check_filter."""
    pattern, entry = binding.pattern, binding.entry
    if f.resource_type not in (ResourceTypeCode.ANY, ResourceTypeCode[pattern.resource_type.name]):
        return False
    stored_pattern = PatternTypeCode[pattern.pattern_type.name]
    if f.pattern_type not in (PatternTypeCode.ANY, PatternTypeCode.MATCH, stored_pattern):
        return False
    if f.resource_name is not None and not _name_matches(f.resource_name, f.pattern_type, pattern):
        return False
    return (
        f.principal in (None, entry.principal)
        and f.host in (None, entry.host)
        and f.operation in (OperationCode.ANY, OperationCode[entry.operation.name])
        and f.permission in (PermissionCode.ANY, PermissionCode[entry.permission.name])
    )


def _name_matches(name: str, pattern_filter: int, pattern: ResourcePattern) -> bool:
    if pattern_filter != PatternTypeCode.MATCH:
        return name == pattern.name
    if pattern.pattern_type is PatternType.PREFIXED:
        return name.startswith(pattern.name)
    return pattern.name in (name, WILDCARD)
