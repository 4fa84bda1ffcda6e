"""`replog users` and `replog acls` against a real broker and ZooKeeper: what an operator
types, what they see, and what lands in ZooKeeper. The command line's main() runs in this
process (replog_in_process), since the interpreter a real `replog` starts would cost
about a second per command; the tests in test_cli.py run it as a process."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from spark_replica.client import Cluster
from spark_replica.errors import (
    DuplicateResourceError,
    InvalidRequestError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from spark_replica.security import scram
from spark_replica.security.acl import (
    AclBinding,
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.native.acls import (
    AclFilter,
    CreateAclsRequest,
    DescribeAclsRequest,
    OperationCode,
    PatternTypeCode,
    PermissionCode,
    ResourceTypeCode,
    WireAclBinding,
)
from spark_replica.wire.native.scram_credentials import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    ScramDeletion,
    ScramUpsertion,
)
from spark_replica.zk import security_store
from spark_replica.zk.session import connect
from tests.support import replog_in_process, run

pytestmark = pytest.mark.slow


@pytest.fixture
def zk(broker: BrokerProcess) -> Iterator[KazooClient]:
    session = connect(broker.zookeeper)
    try:
        yield session
    finally:
        session.stop()
        session.close()


def test_users_create_list_delete(broker: BrokerProcess, zk: KazooClient) -> None:
    bootstrap = ["--bootstrap", broker.address]
    created = replog_in_process(
        "users", "create", "alice", "--password-stdin", *bootstrap, stdin=b"s3cret\n"
    )
    assert created.returncode == 0, created.stderr
    created = replog_in_process(
        "users",
        "create",
        "alice",
        "--password-stdin",
        "--mechanism",
        "SCRAM-SHA-512",
        "--iterations",
        "8192",
        *bootstrap,
        stdin=b"other pass\n",
    )
    assert created.returncode == 0, created.stderr

    stored = security_store.read_credential(zk, "alice", "SCRAM-SHA-256")
    assert stored is not None and stored.iterations == scram.MIN_ITERATIONS
    assert scram.verify_password(stored, "s3cret")
    assert not scram.verify_password(stored, "s3cret\n")
    stored_512 = security_store.read_credential(zk, "alice", "SCRAM-SHA-512")
    assert stored_512 is not None and stored_512.iterations == 8192
    assert scram.verify_password(stored_512, "other pass")
    raw, _ = zk.get(security_store.user_path("alice"))
    assert b"s3cret" not in raw

    listed = replog_in_process("users", "list", "--json", *bootstrap)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096},
        {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 8192},
    ]
    table = replog_in_process("users", "list", *bootstrap).stdout.decode()
    assert "alice" in table and "SCRAM-SHA-512" in table and "8192" in table

    deleted = replog_in_process(
        "users", "delete", "alice", "--mechanism", "SCRAM-SHA-512", *bootstrap
    )
    assert deleted.returncode == 0, deleted.stderr
    assert security_store.list_users(zk) == {"alice": ["SCRAM-SHA-256"]}
    deleted = replog_in_process("users", "delete", "alice", *bootstrap)
    assert deleted.returncode == 0, deleted.stderr
    assert security_store.list_users(zk) == {}
    assert replog_in_process("users", "list", *bootstrap).stdout == b""

    again = replog_in_process("users", "delete", "alice", *bootstrap)
    assert again.returncode == 1
    assert b"alice" in again.stderr and b"no SCRAM credential" in again.stderr


def test_users_bad_input_fails_clearly(broker: BrokerProcess) -> None:
    bootstrap = ["--bootstrap", broker.address]
    empty = replog_in_process("users", "create", "bob", "--password-stdin", *bootstrap, stdin=b"\n")
    assert empty.returncode == 2 and b"password" in empty.stderr and b"empty" in empty.stderr
    nothing = replog_in_process("users", "create", "bob", "--password-stdin", *bootstrap)
    assert nothing.returncode == 2 and b"empty" in nothing.stderr
    few = replog_in_process(
        "users", "create", "bob", "--password-stdin", "--iterations", "10", *bootstrap, stdin=b"p\n"
    )
    assert few.returncode == 2 and b"iterations" in few.stderr
    slash = replog_in_process(
        "users", "create", "a/b", "--password-stdin", *bootstrap, stdin=b"p\n"
    )
    assert slash.returncode == 1 and b"a/b" in slash.stderr
    mechanism = replog_in_process(
        "users", "create", "bob", "--password-stdin", "--mechanism", "PLAIN"
    )
    assert mechanism.returncode == 2 and b"SCRAM-SHA-256" in mechanism.stderr


def test_acls_add_list_remove(broker: BrokerProcess, zk: KazooClient) -> None:
    bootstrap = ["--bootstrap", broker.address]
    added = replog_in_process(
        "acls",
        "add",
        "--allow-principal",
        "User:alice",
        "--allow-principal",
        "User:bob",
        "--operation",
        "read",
        "--operation",
        "DESCRIBE",
        "--topic",
        "orders",
        *bootstrap,
    )
    assert added.returncode == 0, added.stderr
    denied = replog_in_process(
        "acls",
        "add",
        "--deny-principal",
        "User:bob",
        "--deny-host",
        "10.0.0.9",
        "--operation",
        "Write",
        "--topic",
        "ord",
        "--resource-pattern-type",
        "prefixed",
        *bootstrap,
    )
    assert denied.returncode == 0, denied.stderr
    group = replog_in_process(
        "acls", "add", "--allow-principal", "User:*", "--group", "g1", *bootstrap
    )
    assert group.returncode == 0, group.stderr

    orders = ResourcePattern(ResourceType.TOPIC, "orders")
    prefix = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
    deny = AclBinding(prefix, AclEntry("User:bob", "10.0.0.9", Operation.WRITE, Permission.DENY))
    stored = security_store.read_all_acls(zk)
    assert deny in stored and len(stored) == 6
    assert (
        AclBinding(orders, AclEntry("User:alice", "*", Operation.READ, Permission.ALLOW)) in stored
    )

    literal = replog_in_process("acls", "list", "--topic", "orders", "--json", *bootstrap)
    assert literal.returncode == 0, literal.stderr
    assert [
        (a["principal"], a["permission"], a["operation"], a["host"])
        for a in json.loads(literal.stdout)
    ] == [
        ("User:alice", "Allow", "Read", "*"),
        ("User:alice", "Allow", "Describe", "*"),
        ("User:bob", "Allow", "Read", "*"),
        ("User:bob", "Allow", "Describe", "*"),
    ]
    assert {
        (a["resource_type"], a["pattern_type"], a["resource"]) for a in json.loads(literal.stdout)
    } == {("Topic", "Literal", "orders")}
    matching = replog_in_process(
        "acls", "list", "--topic", "orders", "--resource-pattern-type", "match", *bootstrap
    )
    assert b"Prefixed" in matching.stdout and b"Literal" in matching.stdout
    assert b"Group" not in matching.stdout
    everything = json.loads(replog_in_process("acls", "list", "--json", *bootstrap).stdout)
    assert {"Group"} == {a["resource_type"] for a in everything if a["resource"] == "g1"}
    assert {
        "resource_type": "Group",
        "pattern_type": "Literal",
        "resource": "g1",
        "principal": "User:*",
        "permission": "Allow",
        "operation": "All",
        "host": "*",
    } in everything
    bobs = replog_in_process("acls", "list", "--principal", "User:bob", *bootstrap).stdout.decode()
    assert "User:alice" not in bobs and "Deny" in bobs and "Write" in bobs

    removed = replog_in_process(
        "acls",
        "remove",
        "--allow-principal",
        "User:bob",
        "--operation",
        "Read",
        "--topic",
        "orders",
        *bootstrap,
    )
    assert removed.returncode == 0, removed.stderr
    assert "User:bob has Allow permission for operations: Read" in removed.stdout.decode()
    assert len(security_store.read_all_acls(zk)) == 5
    removed = replog_in_process(
        "acls", "remove", "--topic", "o", "--resource-pattern-type", "any", *bootstrap
    )
    assert removed.stdout == b"No ACL matched.\n"
    removed = replog_in_process(
        "acls", "remove", "--topic", "ord", "--resource-pattern-type", "prefixed", *bootstrap
    )
    assert removed.returncode == 0 and b"Deny" in removed.stdout
    removed = replog_in_process("acls", "remove", "--topic", "orders", "--group", "g1", *bootstrap)
    assert removed.returncode == 0, removed.stderr
    assert security_store.read_all_acls(zk) == []
    assert replog_in_process("acls", "list", *bootstrap).stdout == b""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], b"Fly"),
        (["--allow-principal", "alice", "--topic", "t"], b"TYPE:NAME"),
        (["--allow-principal", "User:a"], b"--topic"),
        (["--topic", "t"], b"--allow-principal"),
        (["--allow-principal", "User:a", "--operation", "Write", "--group", "g"], b"Write"),
        (["--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "x"], b"x"),
        (
            ["--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
            b"match",
        ),
        (["--allow-host", "h", "--deny-principal", "User:a", "--topic", "t"], b"--allow-host"),
    ],
)
def test_acls_bad_flags_fail_before_connecting(args: list[str], message: bytes) -> None:
    failed = replog_in_process("acls", "add", *args, "--bootstrap", "127.0.0.1:1")
    assert failed.returncode == 2, failed.stderr
    assert failed.stderr.startswith(b"replog: ") and message in failed.stderr


def test_brokers_refuse_bad_items_one_by_one(broker: BrokerProcess, zk: KazooClient) -> None:
    """The wire checks that the CLI cannot reach, each with its typed error."""

    async def scenario() -> None:
        cluster = Cluster([(broker.host, broker.port)], client_id="test")
        try:
            conn = await cluster.any_connection()
            salted = scram.salted_password("SCRAM-SHA-256", "p", b"salt", 4096)
            upsert = ScramUpsertion("carol", 1, 4096, b"salt", salted)
            alter = AlterUserScramCredentialsRequest(
                [ScramDeletion("nobody", 1), ScramDeletion("carol", 1)],
                [
                    upsert,
                    ScramUpsertion("dave", 7, 4096, b"salt", salted),
                    ScramUpsertion("erin", 1, 1000, b"salt", salted),
                    ScramUpsertion("erin2", 1, 20000, b"salt", salted),
                    ScramUpsertion("", 1, 4096, b"salt", salted),
                    ScramUpsertion("frank", 2, 4096, b"salt", salted),
                    ScramUpsertion("gina", 1, 4096, b"salt", salted),
                ],
            )
            results = {r.user: r for r in (await conn.send(alter)).results}
            expected = {
                "nobody": ResourceNotFoundError,
                "carol": DuplicateResourceError,
                "dave": UnsupportedSaslMechanismError,
                "erin": UnacceptableCredentialError,
                "erin2": UnacceptableCredentialError,
                "": UnacceptableCredentialError,
                "frank": UnacceptableCredentialError,  # a SHA-256 sized salted password
            }
            for user, error in expected.items():
                assert results[user].error_code == error.code, (user, results[user])
            assert results["gina"].error_code == 0
            assert security_store.list_users(zk) == {"gina": ["SCRAM-SHA-256"]}

            described = await conn.send(DescribeUserScramCredentialsRequest(["gina", "x", "gina"]))
            codes = {r.user: r.error_code for r in described.results}
            assert codes == {"gina": DuplicateResourceError.code, "x": ResourceNotFoundError.code}

            created = await conn.send(CreateAclsRequest([_wire(OperationCode.ANY), _wire()]))
            assert [r.error_code for r in created.results] == [InvalidRequestError.code, 0]
            with pytest.raises(InvalidRequestError, match="resource type code 0"):
                await conn.send(DescribeAclsRequest(AclFilter(resource_type=0)))
            listed = await conn.send(DescribeAclsRequest(AclFilter()))
            assert listed.bindings == [_wire()]
        finally:
            await cluster.close()

    run(scenario(), timeout_s=60)


def _wire(operation: int = OperationCode.READ) -> WireAclBinding:
    """An allow of `operation` on the literal topic t for User:a."""
    return WireAclBinding(
        ResourceTypeCode.TOPIC,
        "t",
        PatternTypeCode.LITERAL,
        "User:a",
        "*",
        operation,
        PermissionCode.ALLOW,
    )


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(b"\xff\xfe".decode("utf-8", "surrogateescape"), id="not-utf8"),
        pytest.param("a\x01b", id="control-character"),
        pytest.param("\ue000", id="private-use"),
    ],
)
def test_names_zookeeper_cannot_hold_are_refused_and_zookeeper_stays_up(
    broker: BrokerProcess, zk: KazooClient, bad: str
) -> None:
    """A name ZooKeeper cannot hold gets a typed error, and the session survives.

    One that is not valid UTF-8 (it arrives as lone surrogates) must never reach kazoo:
    encoding it fails inside kazoo's connection thread, which closes the broker's
    ZooKeeper session for good (found by the protocol fuzzer). ZooKeeper itself refuses
    control and private-use characters in paths.
    """

    async def scenario() -> None:
        cluster = Cluster([(broker.host, broker.port)], client_id="test")
        try:
            conn = await cluster.any_connection()
            salted = scram.salted_password("SCRAM-SHA-256", "p", b"salt", 4096)
            alter = AlterUserScramCredentialsRequest(
                [], [ScramUpsertion(bad, 1, 4096, b"salt", salted)]
            )
            (altered,) = (await conn.send(alter)).results
            assert altered.error_code == UnacceptableCredentialError.code
            described = await conn.send(DescribeUserScramCredentialsRequest([bad]))
            assert described.results[0].error_code == ResourceNotFoundError.code
            acl = dataclasses.replace(_wire(), resource_name=bad)
            (created,) = (await conn.send(CreateAclsRequest([acl]))).results
            assert created.error_code == InvalidRequestError.code
            # The broker still reaches ZooKeeper.
            alter = AlterUserScramCredentialsRequest(
                [], [ScramUpsertion("after", 1, 4096, b"salt", salted)]
            )
            (altered,) = (await conn.send(alter)).results
            assert altered.error_code == 0, altered
        finally:
            await cluster.close()

    run(scenario(), timeout_s=60)
    assert security_store.list_users(zk) == {"after": ["SCRAM-SHA-256"]}
