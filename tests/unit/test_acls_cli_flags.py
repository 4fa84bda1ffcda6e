"""`replog acls` flags for the ACLs Kafka's tools write: IdempotentWrite on the cluster,
transactional ids, delegation tokens and users as resources (kafka-acls' flag names)."""

from __future__ import annotations

import argparse

import pytest

from spark_replica.errors import ConfigError
from spark_replica.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclEntry,
    Operation,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.tools.cli import acls


def _parse(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    acls.add_parser(parser.add_subparsers())
    return parser.parse_args(["acls", "add", *args])


def _allow(resource_type: ResourceType, name: str, operation: Operation) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name),
        AclEntry("User:alice", "*", operation, Permission.ALLOW),
    )


def test_kafka_acls_producer_idempotent_acls_can_be_added() -> None:
    args = _parse(
        "--allow-principal", "User:alice", "--operation", "IdempotentWrite", "--cluster",
    )  # fmt: skip
    assert acls.bindings_to_add(args) == [
        _allow(ResourceType.CLUSTER, CLUSTER_NAME, Operation.IDEMPOTENT_WRITE)
    ]


def test_every_kafka_resource_type_has_its_flag() -> None:
    args = _parse(
        "--allow-principal", "User:alice", "--operation", "All",
        "--transactional-id", "tx", "--delegation-token", "tok", "--user-principal", "User:bob",
    )  # fmt: skip
    assert acls.bindings_to_add(args) == [
        _allow(ResourceType.TRANSACTIONAL_ID, "tx", Operation.ALL),
        _allow(ResourceType.DELEGATION_TOKEN, "tok", Operation.ALL),
        _allow(ResourceType.USER, "User:bob", Operation.ALL),
    ]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--topic", "t", "--operation", "IdempotentWrite"], "Topic ACL cannot be for"),
        (["--user-principal", "User:bob", "--operation", "Read"], "User ACL cannot be for"),
        (["--transactional-id", ""], "--transactional-id needs a name"),
    ],
)
def test_operations_a_resource_type_cannot_have_are_refused(flags: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        acls.bindings_to_add(_parse("--allow-principal", "User:alice", *flags))
