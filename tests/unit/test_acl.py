"""The ACL model and Kafka's AclAuthorizer rules, with plain values and hypothesis."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_replica.errors import ConfigError
from spark_replica.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclEntry,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    decode_entries,
    encode_entries,
    parse_operation,
    parse_pattern_type,
    parse_permission,
    parse_principal,
    parse_resource_type,
)

ALICE = "User:alice"
BOB = "User:bob"
ALLOW = Permission.ALLOW
DENY = Permission.DENY


def topic(name: str, pattern_type: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


def binding(
    pattern: ResourcePattern,
    principal: str,
    operation: Operation,
    permission: Permission = ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(pattern, AclEntry(principal, host, operation, permission))


def authorizer(*bindings: AclBinding, allow_if_none: bool = False) -> Authorizer:
    auth = Authorizer(frozenset({"User:admin"}), allow_everyone_if_no_acl_found=allow_if_none)
    auth.replace_all(bindings)
    return auth


def can(auth: Authorizer, principal: str, operation: Operation, name: str = "t") -> bool:
    return auth.authorize(principal, "10.0.0.1", operation, ResourceType.TOPIC, name)


def test_literal_allow_grants_only_that_operation_on_that_topic() -> None:
    auth = authorizer(binding(topic("t"), ALICE, Operation.WRITE))
    assert can(auth, ALICE, Operation.WRITE)
    assert not can(auth, ALICE, Operation.READ)
    assert not can(auth, ALICE, Operation.WRITE, "u")
    assert not can(auth, BOB, Operation.WRITE)


def test_deny_wins_over_allow() -> None:
    auth = authorizer(
        binding(topic("t"), ALICE, Operation.ALL),
        binding(topic("t"), ALICE, Operation.READ, DENY),
    )
    assert can(auth, ALICE, Operation.WRITE)
    assert not can(auth, ALICE, Operation.READ)


def test_deny_of_all_denies_every_operation() -> None:
    auth = authorizer(
        binding(topic("t"), ALICE, Operation.READ),
        binding(topic("t", PatternType.PREFIXED), ALICE, Operation.ALL, DENY),
    )
    assert not can(auth, ALICE, Operation.READ)
    assert not can(auth, ALICE, Operation.DESCRIBE)


def test_wildcard_principal_host_and_resource_name() -> None:
    auth = authorizer(
        binding(topic("*"), "User:*", Operation.READ),
        binding(topic("t"), ALICE, Operation.WRITE, host="10.0.0.2"),
    )
    assert can(auth, BOB, Operation.READ, "anything")
    assert not can(auth, ALICE, Operation.WRITE)
    assert auth.authorize(ALICE, "10.0.0.2", Operation.WRITE, ResourceType.TOPIC, "t")


def test_prefixed_pattern_matches_names_starting_with_it() -> None:
    auth = authorizer(binding(topic("logs-", PatternType.PREFIXED), ALICE, Operation.READ))
    assert can(auth, ALICE, Operation.READ, "logs-")
    assert can(auth, ALICE, Operation.READ, "logs-app")
    assert not can(auth, ALICE, Operation.READ, "logs")
    assert not can(auth, ALICE, Operation.READ, "app-logs-x")


def test_literal_pattern_is_not_a_prefix() -> None:
    auth = authorizer(binding(topic("logs"), ALICE, Operation.READ))
    assert not can(auth, ALICE, Operation.READ, "logs-app")


@pytest.mark.parametrize(
    ("granted", "implied"),
    [
        (Operation.READ, Operation.DESCRIBE),
        (Operation.WRITE, Operation.DESCRIBE),
        (Operation.DELETE, Operation.DESCRIBE),
        (Operation.ALTER, Operation.DESCRIBE),
        (Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS),
    ],
)
def test_implied_describe(granted: Operation, implied: Operation) -> None:
    auth = authorizer(binding(topic("t"), ALICE, granted))
    assert can(auth, ALICE, implied)


@pytest.mark.parametrize(
    ("granted", "not_implied"),
    [
        (Operation.DESCRIBE, Operation.READ),
        (Operation.CREATE, Operation.DESCRIBE),
        (Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
        (Operation.READ, Operation.DESCRIBE_CONFIGS),
    ],
)
def test_no_other_implications(granted: Operation, not_implied: Operation) -> None:
    auth = authorizer(binding(topic("t"), ALICE, granted))
    assert not can(auth, ALICE, not_implied)


def test_deny_of_describe_is_not_overridden_by_an_implying_allow() -> None:
    auth = authorizer(
        binding(topic("t"), ALICE, Operation.READ),
        binding(topic("t"), ALICE, Operation.DESCRIBE, DENY),
    )
    assert not can(auth, ALICE, Operation.DESCRIBE)
    assert can(auth, ALICE, Operation.READ)


def cluster_idempotent_write(auth: Authorizer, principal: str = ALICE) -> bool:
    return auth.authorize(
        principal, "10.0.0.1", Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME
    )


def cluster(name: str = CLUSTER_NAME) -> ResourcePattern:
    return ResourcePattern(ResourceType.CLUSTER, name)


@pytest.mark.parametrize(
    "grant",
    [
        binding(cluster(), ALICE, Operation.IDEMPOTENT_WRITE),
        binding(topic("t"), ALICE, Operation.WRITE),
        binding(topic("t"), ALICE, Operation.ALL),
        binding(topic("logs-", PatternType.PREFIXED), ALICE, Operation.WRITE),
        binding(topic("*"), ALICE, Operation.WRITE),
    ],
)
def test_idempotent_write_is_implied_by_write_on_any_topic(grant: AclBinding) -> None:
    """KIP-679: an idempotent producer needs Write on its topics, nothing on the cluster."""
    assert cluster_idempotent_write(authorizer(grant))
    assert not cluster_idempotent_write(authorizer(grant), BOB)


@pytest.mark.parametrize(
    "acls",
    [
        [binding(topic("t"), ALICE, Operation.READ)],
        [binding(ResourcePattern(ResourceType.GROUP, "t"), ALICE, Operation.ALL)],
        [binding(topic("t"), ALICE, Operation.WRITE, host="10.9.9.9")],
        # Write allowed on t, but denied there by a literal, a prefix or the wildcard.
        [
            binding(topic("t"), ALICE, Operation.WRITE),
            binding(topic("t"), ALICE, Operation.ALL, DENY),
        ],
        [
            binding(topic("team-a", PatternType.PREFIXED), ALICE, Operation.WRITE),
            binding(topic("team-", PatternType.PREFIXED), "User:*", Operation.WRITE, DENY),
        ],
        [
            binding(topic("t"), ALICE, Operation.WRITE),
            binding(topic("*"), ALICE, Operation.WRITE, DENY),
        ],
        [
            binding(cluster(), ALICE, Operation.IDEMPOTENT_WRITE, DENY),
            binding(cluster(), ALICE, Operation.IDEMPOTENT_WRITE),
        ],
    ],
)
def test_idempotent_write_is_refused_without_an_undenied_write(acls: list[AclBinding]) -> None:
    assert not cluster_idempotent_write(authorizer(*acls))


def test_idempotent_write_follows_allow_everyone_unless_write_is_denied_everywhere() -> None:
    cluster_acl = binding(cluster(), BOB, Operation.ALTER)
    some_topic = binding(topic("t"), BOB, Operation.READ)
    assert cluster_idempotent_write(authorizer(some_topic, allow_if_none=True))
    denied_everywhere = binding(topic("*"), ALICE, Operation.WRITE, DENY)
    assert not cluster_idempotent_write(
        authorizer(cluster_acl, denied_everywhere, allow_if_none=True)
    )


def test_an_authorizer_refuses_all_but_super_users_until_its_acls_are_loaded() -> None:
    auth = Authorizer(frozenset({"User:admin"}), allow_everyone_if_no_acl_found=True)
    assert not auth.loaded
    assert not can(auth, ALICE, Operation.WRITE)
    assert not cluster_idempotent_write(auth)
    assert can(auth, "User:admin", Operation.WRITE)
    auth.replace_all([])
    assert auth.loaded and can(auth, ALICE, Operation.WRITE)


def test_acls_of_other_principal_types_match_no_user() -> None:
    auth = authorizer(binding(topic("t"), "Group:alice", Operation.READ))
    assert not can(auth, ALICE, Operation.READ)
    assert can(auth, "Group:alice", Operation.READ)


def test_no_acl_on_resource_follows_allow_everyone_setting() -> None:
    other = binding(topic("other"), BOB, Operation.READ)
    assert not can(authorizer(other), ALICE, Operation.READ)
    assert can(authorizer(other, allow_if_none=True), ALICE, Operation.READ)
    # An ACL for someone else on the resource means "not everyone" any more.
    bobs = binding(topic("t"), BOB, Operation.READ)
    assert not can(authorizer(bobs, allow_if_none=True), ALICE, Operation.READ)


def test_super_users_are_always_allowed() -> None:
    auth = authorizer(binding(topic("t"), "User:admin", Operation.ALL, DENY))
    assert can(auth, "User:admin", Operation.DELETE)
    assert auth.authorize(
        "User:admin", "h", Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
    )


def test_resource_types_are_separate() -> None:
    auth = authorizer(binding(topic("g"), ALICE, Operation.READ))
    assert not auth.authorize(ALICE, "h", Operation.READ, ResourceType.GROUP, "g")


def test_replace_all_replaces_and_bindings_lists_sorted_without_duplicates() -> None:
    first = binding(topic("t"), ALICE, Operation.READ)
    second = binding(topic("a", PatternType.PREFIXED), BOB, Operation.WRITE)
    auth = authorizer(first, first, second)
    assert auth.bindings() == sorted([first, second])
    auth.replace_all([second])
    assert auth.bindings() == [second]
    assert not can(auth, ALICE, Operation.READ)


@pytest.mark.parametrize(
    ("parser", "text", "expected"),
    [
        (parse_operation, "ClusterAction", Operation.CLUSTER_ACTION),
        (parse_operation, "cluster_action", Operation.CLUSTER_ACTION),
        (parse_operation, "DESCRIBE-CONFIGS", Operation.DESCRIBE_CONFIGS),
        (parse_operation, " read ", Operation.READ),
        (parse_pattern_type, "PREFIXED", PatternType.PREFIXED),
        (parse_pattern_type, "literal", PatternType.LITERAL),
        (parse_resource_type, "topic", ResourceType.TOPIC),
        (parse_permission, "deny", Permission.DENY),
    ],
)
def test_parsers_are_case_insensitive(
    parser: Callable[[str], object], text: str, expected: object
) -> None:
    assert parser(text) == expected


@pytest.mark.parametrize(
    ("parser", "text", "valid_named"),
    [
        (parse_operation, "Fly", "IdempotentWrite"),
        (parse_pattern_type, "match", "Prefixed"),
        (parse_resource_type, "Broker", "TransactionalId"),
        (parse_permission, "maybe", "Deny"),
    ],
)
def test_parsers_reject_unknown_values_listing_valid_ones(
    parser: Callable[[str], object], text: str, valid_named: str
) -> None:
    with pytest.raises(ConfigError, match=valid_named):
        parser(text)


@pytest.mark.parametrize("text", ["alice", "User:", ":alice", ""])
def test_parse_principal_rejects_what_is_not_type_and_name(text: str) -> None:
    with pytest.raises(ConfigError, match="TYPE:NAME"):
        parse_principal(text)


@pytest.mark.parametrize("text", ["User:alice", "User:*", "Group:ops", "user:a:b"])
def test_parse_principal_accepts_any_principal_type_as_kafka_stores_it(text: str) -> None:
    assert parse_principal(text) == text


@pytest.mark.parametrize(
    "make",
    [
        lambda: ResourcePattern(ResourceType.TOPIC, ""),
        lambda: ResourcePattern(ResourceType.CLUSTER, "other"),
        lambda: ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.PREFIXED),
        lambda: ResourcePattern(ResourceType.TOPIC, "*", PatternType.PREFIXED),
        lambda: AclEntry("alice", "*", Operation.READ, ALLOW),
        lambda: AclEntry(ALICE, "", Operation.READ, ALLOW),
        lambda: Authorizer(frozenset({"admin"})),
    ],
)
def test_invalid_model_values_are_config_errors(make: Callable[[], object]) -> None:
    with pytest.raises(ConfigError):
        make()


def test_entries_json_is_kafkas_zookeeper_format() -> None:
    entries = [AclEntry(ALICE, "*", Operation.READ, ALLOW)]
    assert json.loads(encode_entries(entries)) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    kafka_written = (
        b'{"version":1,"acls":[{"principal":"User:bob","permissionType":"Deny",'
        b'"operation":"DescribeConfigs","host":"1.2.3.4"}]}'
    )
    assert decode_entries(kafka_written).entries == {
        AclEntry(BOB, "1.2.3.4", Operation.DESCRIBE_CONFIGS, DENY)
    }


def test_every_operation_kafka_acls_writes_is_read() -> None:
    """What `kafka-acls --producer --idempotent` and token ACLs leave in ZooKeeper."""
    kafka_written = json.dumps(
        {
            "version": 1,
            "acls": [
                {"principal": p, "permissionType": "Allow", "operation": op, "host": "*"}
                for p, op in [
                    ("User:alice", "IdempotentWrite"),
                    ("User:alice", "CreateTokens"),
                    ("User:alice", "DescribeTokens"),
                    ("Group:ops", "Read"),
                ]
            ],
        }
    ).encode()
    stored = decode_entries(kafka_written)
    assert stored.unreadable == []
    assert {(e.principal, e.operation) for e in stored.entries} == {
        (ALICE, Operation.IDEMPOTENT_WRITE),
        (ALICE, Operation.CREATE_TOKENS),
        (ALICE, Operation.DESCRIBE_TOKENS),
        ("Group:ops", Operation.READ),
    }
    assert [op.value for op in Operation] == [
        "All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
        "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff",
        b"[]",
        b'{"version":2,"acls":[]}',
        b'{"version":1}',
    ],
)
def test_decode_entries_rejects_data_that_is_not_acl_json(data: bytes) -> None:
    with pytest.raises(ConfigError):
        decode_entries(data)


@pytest.mark.parametrize(
    "bad",
    [
        1,
        {"principal": "User:a", "permissionType": "Allow", "host": "*"},
        {"principal": "User:a", "permissionType": "Allow", "operation": "Fly", "host": "*"},
        {"principal": "a", "permissionType": "Allow", "operation": "Read", "host": "*"},
    ],
)
def test_an_unreadable_entry_is_set_aside_and_written_back_untouched(bad: object) -> None:
    good = {"principal": "User:a", "permissionType": "Deny", "operation": "Write", "host": "*"}
    stored = decode_entries(json.dumps({"version": 1, "acls": [bad, good]}).encode())
    assert stored.entries == {AclEntry("User:a", "*", Operation.WRITE, DENY)}
    assert [kept.raw for kept in stored.unreadable] == [bad]
    assert stored.unreadable[0].reason
    rewritten = json.loads(encode_entries(stored.entries, stored.unreadable))
    assert rewritten["acls"] == [good, bad]


# --- properties -------------------------------------------------------------------------

NAMES = st.sampled_from(["t", "ta", "tab", "u", "*"])
PRINCIPALS = st.sampled_from([ALICE, BOB, "User:*"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
OPERATIONS = st.sampled_from(list(Operation))
PATTERNS = st.builds(
    lambda name, prefixed: topic(
        name, PatternType.PREFIXED if prefixed and name != "*" else PatternType.LITERAL
    ),
    NAMES,
    st.booleans(),
)
ENTRIES = st.builds(AclEntry, PRINCIPALS, HOSTS, OPERATIONS, st.sampled_from(list(Permission)))
BINDINGS = st.lists(st.builds(AclBinding, PATTERNS, ENTRIES), max_size=8)
REQUESTS = st.tuples(
    st.sampled_from([ALICE, BOB, "User:carol"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from([op for op in Operation if op is not Operation.ALL]),
    st.sampled_from(["t", "ta", "tab", "u", "v"]),
)


def decide(
    bindings: list[AclBinding],
    request: tuple[str, str, Operation, str],
    allow_if_none: bool,
) -> bool:
    principal, host, operation, name = request
    auth = authorizer(*bindings, allow_if_none=allow_if_none)
    return auth.authorize(principal, host, operation, ResourceType.TOPIC, name)


@settings(max_examples=300, deadline=None)
@given(BINDINGS, PATTERNS, ENTRIES, REQUESTS, st.booleans())
def test_adding_a_deny_never_widens_access(
    bindings: list[AclBinding],
    pattern: ResourcePattern,
    entry: AclEntry,
    request: tuple[str, str, Operation, str],
    allow_if_none: bool,
) -> None:
    deny = AclBinding(pattern, AclEntry(entry.principal, entry.host, entry.operation, DENY))
    if decide([*bindings, deny], request, allow_if_none):
        assert decide(bindings, request, allow_if_none)


@settings(max_examples=300, deadline=None)
@given(BINDINGS, PATTERNS, ENTRIES, REQUESTS)
def test_adding_an_allow_never_narrows_access_when_no_acl_means_deny(
    bindings: list[AclBinding],
    pattern: ResourcePattern,
    entry: AclEntry,
    request: tuple[str, str, Operation, str],
) -> None:
    allow = AclBinding(pattern, AclEntry(entry.principal, entry.host, entry.operation, ALLOW))
    if decide(bindings, request, allow_if_none=False):
        assert decide([*bindings, allow], request, allow_if_none=False)


@settings(max_examples=200, deadline=None)
@given(BINDINGS, REQUESTS, st.booleans())
def test_super_users_are_allowed_whatever_the_acls(
    bindings: list[AclBinding], request: tuple[str, str, Operation, str], allow_if_none: bool
) -> None:
    _, host, operation, name = request
    assert decide(bindings, ("User:admin", host, operation, name), allow_if_none)


@settings(max_examples=200, deadline=None)
@given(st.lists(ENTRIES, max_size=8))
def test_entries_json_round_trips(entries: list[AclEntry]) -> None:
    assert decode_entries(encode_entries(entries)).entries == set(entries)
