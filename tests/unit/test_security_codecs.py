"""The ACL and SCRAM credential admin codecs round-trip, and refuse what cannot be decoded."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from spark_replica.errors import ConfigError, InvalidRequestError, ProtocolError
from spark_replica.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.wire.native import REQUEST_TYPES, RESPONSE_TYPES, ApiKey
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
    OperationCode,
    PatternTypeCode,
    PermissionCode,
    ResourceTypeCode,
    WireAclBinding,
    acl_filter,
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
from spark_replica.wire.primitives import Reader, Writer

READ_ALICE = WireAclBinding(
    ResourceTypeCode.TOPIC,
    "orders",
    PatternTypeCode.LITERAL,
    "User:alice",
    "*",
    OperationCode.READ,
    PermissionCode.ALLOW,
)
DENY_PREFIX = WireAclBinding(
    ResourceTypeCode.GROUP,
    "team-",
    PatternTypeCode.PREFIXED,
    "User:bob",
    "10.0.0.1",
    OperationCode.ALL,
    PermissionCode.DENY,
)


def _round_trip(message: Any) -> Any:
    writer = Writer()
    message.write(writer)
    reader = Reader(writer.getvalue())
    decoded = type(message).read(reader)
    reader.expect_end()
    return decoded


MESSAGES = [
    DescribeAclsRequest(AclFilter()),
    DescribeAclsRequest(
        AclFilter(
            ResourceTypeCode.TOPIC,
            "orders",
            PatternTypeCode.MATCH,
            "User:alice",
            "*",
            OperationCode.READ,
            PermissionCode.ALLOW,
        )
    ),
    DescribeAclsResponse([]),
    DescribeAclsResponse([READ_ALICE, DENY_PREFIX]),
    CreateAclsRequest([READ_ALICE, DENY_PREFIX]),
    CreateAclsResponse([AclCreationResult(), AclCreationResult(42, "bad principal")]),
    DeleteAclsRequest([AclFilter(principal="User:bob"), AclFilter(resource_name="orders")]),
    DeleteAclsResponse([AclDeletionResult(0, None, [READ_ALICE]), AclDeletionResult(42, "no")]),
    DescribeUserScramCredentialsRequest(None),
    DescribeUserScramCredentialsRequest([]),
    DescribeUserScramCredentialsRequest(["alice", "bob"]),
    DescribeUserScramCredentialsResponse(
        [
            UserCredentials("alice", 0, None, [CredentialInfo(1, 4096), CredentialInfo(2, 8192)]),
            UserCredentials("carol", 91, "no such user"),
        ]
    ),
    AlterUserScramCredentialsRequest(),
    AlterUserScramCredentialsRequest(
        [ScramDeletion("bob", 2)],
        [ScramUpsertion("alice", 1, 4096, b"salt" * 4, b"\x01" * 32)],
    ),
    AlterUserScramCredentialsResponse(
        [UserAlterationResult("alice"), UserAlterationResult("bob", 91, "not there")]
    ),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_messages_round_trip(message: Any) -> None:
    assert _round_trip(message) == message


@pytest.mark.parametrize(
    "api_key",
    [
        ApiKey.DESCRIBE_ACLS,
        ApiKey.CREATE_ACLS,
        ApiKey.DELETE_ACLS,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ],
)
def test_each_api_has_its_request_and_response_types(api_key: ApiKey) -> None:
    assert api_key == REQUEST_TYPES[api_key].API_KEY
    assert api_key in RESPONSE_TYPES


def test_every_strict_prefix_of_a_request_is_refused() -> None:
    for message in MESSAGES:
        if not hasattr(message, "API_KEY"):
            continue
        writer = Writer()
        message.write(writer)
        body = writer.getvalue()
        for cut in range(len(body)):
            with pytest.raises(ProtocolError):
                type(message).read(Reader(body[:cut]))


def test_null_salt_is_refused() -> None:
    writer = Writer()
    writer.array([], writer.string)
    writer.int32(1)
    writer.string("alice")
    writer.int8(1)
    writer.int32(4096)
    writer.bytes_(None)
    writer.bytes_(b"x")
    with pytest.raises(ProtocolError, match="null"):
        AlterUserScramCredentialsRequest.read(Reader(writer.getvalue()))


def test_salted_password_stays_out_of_reprs() -> None:
    upsertion = ScramUpsertion("alice", 1, 4096, b"salty", b"secret-bytes")
    assert "secret" not in repr(AlterUserScramCredentialsRequest([], [upsertion]))
    assert "alice" in repr(upsertion)


def test_mechanism_codes_are_kafkas() -> None:
    assert MECHANISM_CODES == {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
    assert MECHANISM_NAMES[2] == "SCRAM-SHA-512"


def test_acl_codes_are_kafkas() -> None:
    assert (ResourceTypeCode.TOPIC, ResourceTypeCode.GROUP, ResourceTypeCode.CLUSTER) == (2, 3, 4)
    assert (PatternTypeCode.MATCH, PatternTypeCode.LITERAL, PatternTypeCode.PREFIXED) == (2, 3, 4)
    assert (OperationCode.ALL, OperationCode.READ, OperationCode.ALTER_CONFIGS) == (2, 3, 11)
    assert (PermissionCode.DENY, PermissionCode.ALLOW) == (2, 3)


# --------------------------------------------------------------------------- wire <-> model


def _binding(
    name: str = "orders",
    pattern_type: PatternType = PatternType.LITERAL,
    principal: str = "User:alice",
    operation: Operation = Operation.READ,
    permission: Permission = Permission.ALLOW,
    resource_type: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AclEntry(principal, "*", operation, permission),
    )


def test_bindings_convert_both_ways() -> None:
    assert binding_from_wire(READ_ALICE) == _binding()
    assert binding_to_wire(_binding()) == READ_ALICE
    deny = binding_from_wire(DENY_PREFIX)
    assert deny.pattern == ResourcePattern(ResourceType.GROUP, "team-", PatternType.PREFIXED)
    assert deny.entry == AclEntry("User:bob", "10.0.0.1", Operation.ALL, Permission.DENY)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"operation": OperationCode.ANY}, "operation code 1"),
        ({"operation": OperationCode.UNKNOWN}, "operation code 0"),
        ({"operation": 99}, "operation code 99"),
        ({"permission": PermissionCode.ANY}, "permission type code 1"),
        ({"pattern_type": PatternTypeCode.MATCH}, "pattern type code 2"),
        ({"resource_type": ResourceTypeCode.ANY}, "resource type code 1"),
        ({"principal": "alice"}, "TYPE:NAME"),
        ({"principal": "User:"}, "TYPE:NAME"),
        ({"resource_name": ""}, "resource name"),
        ({"resource_type": ResourceTypeCode.CLUSTER, "resource_name": "c"}, "kafka-cluster"),
    ],
)
def test_an_acl_that_cannot_exist_is_an_invalid_request(
    change: dict[str, Any], message: str
) -> None:
    wire = dataclasses.replace(READ_ALICE, **change)
    with pytest.raises(InvalidRequestError, match=message):
        binding_from_wire(wire)


def test_filters_refuse_unknown_codes() -> None:
    check_filter(AclFilter())
    check_filter(acl_filter(ResourceType.TOPIC, "orders", match=True))
    for bad in (
        AclFilter(resource_type=0),
        AclFilter(pattern_type=0),
        AclFilter(operation=0),
        AclFilter(permission=42),
    ):
        with pytest.raises(InvalidRequestError, match="invalid"):
            check_filter(bad)
    with pytest.raises(ConfigError):
        acl_filter(pattern_type=PatternType.LITERAL, match=True)


ALL_KINDS = [
    _binding("orders"),
    _binding("*"),
    _binding("ord", PatternType.PREFIXED),
    _binding("other"),
    _binding("orders-2", PatternType.PREFIXED),
    _binding("orders", principal="User:bob", permission=Permission.DENY),
    _binding("orders", resource_type=ResourceType.GROUP),
    _binding(CLUSTER_NAME, resource_type=ResourceType.CLUSTER, operation=Operation.ALTER),
]


@pytest.mark.parametrize(
    ("f", "expected"),
    [
        (AclFilter(), ALL_KINDS),
        (
            acl_filter(ResourceType.TOPIC, "orders", PatternType.LITERAL),
            [ALL_KINDS[0], ALL_KINDS[5]],
        ),
        (acl_filter(ResourceType.TOPIC, "orders"), [ALL_KINDS[0], ALL_KINDS[5]]),
        (
            acl_filter(ResourceType.TOPIC, "orders", match=True),
            [ALL_KINDS[0], ALL_KINDS[1], ALL_KINDS[2], ALL_KINDS[5]],
        ),
        (acl_filter(ResourceType.TOPIC, None, PatternType.PREFIXED), [ALL_KINDS[2], ALL_KINDS[4]]),
        (acl_filter(principal="User:bob"), [ALL_KINDS[5]]),
        (acl_filter(permission=Permission.DENY), [ALL_KINDS[5]]),
        (acl_filter(operation=Operation.ALTER), [ALL_KINDS[7]]),
        (acl_filter(ResourceType.GROUP), [ALL_KINDS[6]]),
        (acl_filter(host="10.0.0.1"), []),
    ],
)
def test_filters_match_as_kafkas(f: AclFilter, expected: list[AclBinding]) -> None:
    assert [b for b in ALL_KINDS if filter_matches(f, b)] == expected
