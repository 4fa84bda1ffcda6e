"""SCRAM credentials and ACLs in a real ZooKeeper: layout, concurrent writers, change
notifications and znode ACLs of digest-authenticated sessions."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from spark_replica.errors import ConfigError, ZnodeNoAuthError, ZooKeeperError
from spark_replica.security.acl import (
    AclBinding,
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.security.scram import make_credential
from spark_replica.zk import security_store, znodes
from spark_replica.zk.kazoo_errors import translated
from spark_replica.zk.security_store import (
    AclChangeWatcher,
    add_acls,
    delete_credential,
    list_users,
    private_acl,
    read_all_acls,
    read_credential,
    remove_acls,
    write_credential,
)
from spark_replica.zk.session import connect
from tests.support import wait_until

pytestmark = pytest.mark.slow

DIGEST = "broker:broker-secret"
SHA256 = "SCRAM-SHA-256"
SHA512 = "SCRAM-SHA-512"
TOPIC_T = ResourcePattern(ResourceType.TOPIC, "t")
LOGS_PREFIX = ResourcePattern(ResourceType.TOPIC, "logs-", PatternType.PREFIXED)
DEADLINE_S = 20.0


def entry(
    principal: str, operation: Operation, permission: Permission = Permission.ALLOW
) -> AclEntry:
    return AclEntry(principal, "*", operation, permission)


def config_changes(zk: KazooClient) -> list[dict[str, object]]:
    children = sorted(zk.get_children(znodes.CONFIG_CHANGES_PATH))
    return [json.loads(zk.get(znodes.config_change_path(c))[0]) for c in children]


# --- credentials ----------------------------------------------------------------------


def test_credentials_round_trip_in_kafkas_layout(zk: KazooClient) -> None:
    sha256 = make_credential(SHA256, "pw")
    sha512 = make_credential(SHA512, "pw")
    write_credential(zk, "alice", sha256)
    write_credential(zk, "alice", sha512)
    write_credential(zk, "bob", sha512)

    assert read_credential(zk, "alice", SHA256) == sha256
    assert read_credential(zk, "alice", SHA512) == sha512
    assert read_credential(zk, "bob", SHA256) is None
    assert read_credential(zk, "nobody", SHA256) is None
    assert list_users(zk) == {"alice": [SHA256, SHA512], "bob": [SHA512]}
    stored = json.loads(zk.get("/config/users/alice")[0])
    assert stored == {"version": 1, "config": {SHA256: sha256.encode(), SHA512: sha512.encode()}}
    assert config_changes(zk) == [{"version": 2, "entity_path": "users/alice"}] * 2 + [
        {"version": 2, "entity_path": "users/bob"}
    ]


def test_delete_credential_one_mechanism_all_or_absent(zk: KazooClient) -> None:
    write_credential(zk, "alice", make_credential(SHA256, "pw"))
    write_credential(zk, "alice", make_credential(SHA512, "pw"))
    assert delete_credential(zk, "alice", SHA256)
    assert list_users(zk) == {"alice": [SHA512]}
    assert not delete_credential(zk, "alice", SHA256)
    assert delete_credential(zk, "alice")
    assert zk.exists("/config/users/alice") is None
    assert not delete_credential(zk, "alice")
    assert not delete_credential(zk, "never-existed", SHA512)
    assert list_users(zk) == {}


def test_other_user_configs_are_kept(zk: KazooClient) -> None:
    """Kafka keeps quotas in the same znode; replog must not drop them."""
    zk.create(
        "/config/users/carol",
        b'{"version":1,"config":{"producer_byte_rate":"1024"}}',
        makepath=True,
    )
    write_credential(zk, "carol", make_credential(SHA256, "pw"))
    assert delete_credential(zk, "carol")
    assert json.loads(zk.get("/config/users/carol")[0])["config"] == {"producer_byte_rate": "1024"}
    assert list_users(zk) == {}


@pytest.mark.parametrize("name", ["", "a/b", ".", ".."])
def test_bad_user_names_are_config_errors(zk: KazooClient, name: str) -> None:
    with pytest.raises(ConfigError):
        write_credential(zk, name, make_credential(SHA256, "pw"))


def test_bad_stored_credential_is_a_zookeeper_error_naming_the_path(zk: KazooClient) -> None:
    zk.create(
        "/config/users/mallory", b'{"version":1,"config":{"SCRAM-SHA-256":"x"}}', makepath=True
    )
    with pytest.raises(ZooKeeperError, match="/config/users/mallory"):
        read_credential(zk, "mallory", SHA256)
    zk.set("/config/users/mallory", b"not json")
    with pytest.raises(ZooKeeperError, match="/config/users/mallory"):
        list_users(zk)


def test_concurrent_credential_writes_keep_every_mechanism(zk_connect: str) -> None:
    sessions = [connect(zk_connect) for _ in range(4)]
    try:
        credentials = {m: make_credential(m, "pw") for m in (SHA256, SHA512)}
        barrier = threading.Barrier(8)
        errors: list[BaseException] = []

        def write(index: int) -> None:
            mechanism = (SHA256, SHA512)[index % 2]
            try:
                barrier.wait(timeout=DEADLINE_S)
                write_credential(sessions[index % 4], f"user{index // 2}", credentials[mechanism])
            except BaseException as exc:
                errors.append(exc)

        run_threads(write, 8)
        assert errors == []
        assert list_users(sessions[0]) == {f"user{i}": [SHA256, SHA512] for i in range(4)}
    finally:
        for session in sessions:
            session.stop()
            session.close()


def run_threads(target: Callable[[int], None], count: int) -> None:
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE_S * 3)
        assert not thread.is_alive(), "a writer thread hung"


# --- ACLs -----------------------------------------------------------------------------


def test_acls_round_trip_in_kafkas_layout(zk: KazooClient) -> None:
    read_alice = entry("User:alice", Operation.READ)
    deny_bob = entry("User:bob", Operation.ALL, Permission.DENY)
    add_acls(zk, TOPIC_T, [read_alice])
    add_acls(zk, TOPIC_T, [read_alice, deny_bob])
    add_acls(zk, LOGS_PREFIX, [read_alice])
    group = ResourcePattern(ResourceType.GROUP, "g1")
    add_acls(zk, group, [read_alice])

    assert read_all_acls(zk) == sorted(
        [
            AclBinding(TOPIC_T, read_alice),
            AclBinding(TOPIC_T, deny_bob),
            AclBinding(LOGS_PREFIX, read_alice),
            AclBinding(group, read_alice),
        ]
    )
    literal = json.loads(zk.get("/kafka-acl/Topic/t")[0])
    assert literal["version"] == 1
    assert {"principal": "User:bob", "permissionType": "Deny", "operation": "All", "host": "*"} in (
        literal["acls"]
    )
    assert zk.exists("/kafka-acl-extended/prefixed/Topic/logs-") is not None
    assert zk.exists("/kafka-acl/Group/g1") is not None
    # Two literal changes (the repeated entry wrote nothing new), one prefixed change.
    assert len(zk.get_children("/kafka-acl-changes")) == 3
    prefixed_changes = zk.get_children("/kafka-acl-extended-changes")
    assert len(prefixed_changes) == 1
    assert prefixed_changes[0].startswith("acl_changes_")
    assert json.loads(zk.get(f"/kafka-acl-extended-changes/{prefixed_changes[0]}")[0]) == {
        "version": 1,
        "resourceType": "Topic",
        "name": "logs-",
        "patternType": "Prefixed",
    }


def test_remove_acls_counts_and_deletes_empty_nodes(zk: KazooClient) -> None:
    read_alice = entry("User:alice", Operation.READ)
    write_alice = entry("User:alice", Operation.WRITE)
    add_acls(zk, TOPIC_T, [read_alice, write_alice])
    assert remove_acls(zk, TOPIC_T, [read_alice, entry("User:x", Operation.READ)]) == 1
    assert read_all_acls(zk) == [AclBinding(TOPIC_T, write_alice)]
    assert remove_acls(zk, TOPIC_T, [read_alice]) == 0
    add_acls(zk, TOPIC_T, [read_alice])
    assert remove_acls(zk, TOPIC_T, None) == 2
    assert zk.exists("/kafka-acl/Topic/t") is None
    assert remove_acls(zk, TOPIC_T, None) == 0
    assert remove_acls(zk, LOGS_PREFIX, None) == 0
    assert read_all_acls(zk) == []


def test_acl_data_that_cannot_be_read_is_skipped_and_reported_never_lost(
    zk: KazooClient,
) -> None:
    kafka_json = {"principal": "User:a", "permissionType": "Allow", "host": "*"}
    future = {**kafka_json, "operation": "SomethingNew"}
    idempotent = {**kafka_json, "operation": "IdempotentWrite"}
    zk.create(
        "/kafka-acl/Cluster/kafka-cluster",
        json.dumps({"version": 1, "acls": [future, idempotent]}).encode(),
        makepath=True,
    )
    write = {**kafka_json, "operation": "Write"}
    zk.create(
        "/kafka-acl/TransactionalId/tx",
        json.dumps({"version": 1, "acls": [write]}).encode(),
        makepath=True,
    )
    zk.create("/kafka-acl/Topic/broken", b"{", makepath=True)
    zk.create("/kafka-acl/Cluster/not-the-cluster", b'{"version":1,"acls":[]}')
    zk.create("/kafka-acl/Broker/b", b'{"version":1,"acls":[]}', makepath=True)

    loaded = security_store.load_acls(zk)
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")
    transactional_id = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx")
    assert loaded.bindings == [
        AclBinding(cluster, entry("User:a", Operation.IDEMPOTENT_WRITE)),
        AclBinding(transactional_id, entry("User:a", Operation.WRITE)),
    ]
    assert sorted(skipped.path for skipped in loaded.skipped) == [
        "/kafka-acl/Broker",
        "/kafka-acl/Cluster/kafka-cluster",
        "/kafka-acl/Cluster/not-the-cluster",
        "/kafka-acl/Topic/broken",
    ]
    assert read_all_acls(zk) == loaded.bindings

    # A write keeps the entry it cannot read; removing all the pattern's ACLs drops it.
    add_acls(zk, cluster, [entry("User:b", Operation.ALTER)])
    stored = json.loads(zk.get("/kafka-acl/Cluster/kafka-cluster")[0])["acls"]
    assert future in stored and idempotent in stored and len(stored) == 3
    assert remove_acls(zk, cluster, None) == 3
    assert zk.exists("/kafka-acl/Cluster/kafka-cluster") is None
    # Data that is not ACL JSON at all is never overwritten.
    with pytest.raises(ZooKeeperError, match="/kafka-acl/Topic/broken"):
        add_acls(
            zk, ResourcePattern(ResourceType.TOPIC, "broken"), [entry("User:a", Operation.READ)]
        )
    assert zk.get("/kafka-acl/Topic/broken")[0] == b"{"


def test_concurrent_add_acls_never_lose_an_entry(zk_connect: str) -> None:
    writers, per_writer = 8, 6
    sessions = [connect(zk_connect) for _ in range(4)]
    try:
        barrier = threading.Barrier(writers)
        errors: list[BaseException] = []

        def write(index: int) -> None:
            try:
                barrier.wait(timeout=DEADLINE_S)
                for n in range(per_writer):
                    add_acls(
                        sessions[index % 4], TOPIC_T, [entry(f"User:w{index}-{n}", Operation.READ)]
                    )
            except BaseException as exc:
                errors.append(exc)

        run_threads(write, writers)
        assert errors == []
        principals = {b.entry.principal for b in read_all_acls(sessions[0])}
        assert principals == {f"User:w{i}-{n}" for i in range(writers) for n in range(per_writer)}
    finally:
        for session in sessions:
            session.stop()
            session.close()


def test_old_notifications_are_purged(zk: KazooClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(security_store, "KEEP_NOTIFICATIONS", 3)
    for n in range(6):
        add_acls(zk, TOPIC_T, [entry(f"User:u{n}", Operation.READ)])
    children = sorted(zk.get_children("/kafka-acl-changes"))
    assert children == [f"acl_changes_{n:010d}" for n in range(3, 6)]


# --- change notifications -------------------------------------------------------------


class Calls:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def __call__(self) -> None:
        with self._lock:
            self.count += 1


def test_watcher_calls_once_at_start_and_after_each_change(
    zk: KazooClient, zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(security_store, "KEEP_NOTIFICATIONS", 1)
    calls = Calls()
    watching = connect(zk_connect)
    watcher = AclChangeWatcher(watching, calls)
    try:
        watcher.start()
        assert calls.count == 1
        add_acls(zk, TOPIC_T, [entry("User:alice", Operation.READ)])
        wait_until(lambda: calls.count == 2, "the literal change")
        add_acls(zk, LOGS_PREFIX, [entry("User:alice", Operation.READ)])
        wait_until(lambda: calls.count == 3, "the prefixed change")
        # This write also purges the first literal notification: one call, not two.
        add_acls(zk, TOPIC_T, [entry("User:bob", Operation.READ)])
        wait_until(lambda: calls.count == 4, "the second literal change")
        time.sleep(0.5)
        assert calls.count == 4
        watcher.stop()
        remove_acls(zk, TOPIC_T, None)
        time.sleep(0.5)
        assert calls.count == 4
    finally:
        watcher.stop()
        watching.stop()
        watching.close()


def test_watcher_survives_a_failing_callback(zk: KazooClient, zk_connect: str) -> None:
    calls = Calls()

    def flaky() -> None:
        calls()
        if calls.count == 2:
            raise RuntimeError("reload failed")

    watching = connect(zk_connect)
    watcher = AclChangeWatcher(watching, flaky)
    try:
        watcher.start()
        add_acls(zk, TOPIC_T, [entry("User:a", Operation.READ)])
        wait_until(lambda: calls.count == 2, "the first change")
        add_acls(zk, TOPIC_T, [entry("User:b", Operation.READ)])
        wait_until(lambda: calls.count == 3, "the change after the failure")
    finally:
        watcher.stop()
        watching.stop()
        watching.close()


# --- ZooKeeper ACLs -------------------------------------------------------------------


def test_private_acl_drops_world_entries(zk: KazooClient, zk_connect: str) -> None:
    assert private_acl(zk) is None
    secure = connect(zk_connect, digest=DIGEST)
    try:
        acl = private_acl(secure)
        assert acl is not None and [(a.id.scheme, a.perms) for a in acl] == [("digest", 31)]
    finally:
        secure.stop()
        secure.close()


def test_credentials_of_a_digest_session_are_unreadable_without_credentials(
    zk: KazooClient, zk_connect: str
) -> None:
    secure = connect(zk_connect, digest=DIGEST)
    try:
        credential = make_credential(SHA512, "pw")
        write_credential(secure, "alice", credential)
        add_acls(secure, TOPIC_T, [entry("User:alice", Operation.READ)])
        assert read_credential(secure, "alice", SHA512) == credential

        with pytest.raises(ZnodeNoAuthError):
            read_credential(zk, "alice", SHA512)
        with pytest.raises(ZnodeNoAuthError):
            list_users(zk)
        # ACLs are world-readable (as in Kafka) but only the digest identity may change them.
        assert read_all_acls(zk) == [AclBinding(TOPIC_T, entry("User:alice", Operation.READ))]
        with pytest.raises(ZnodeNoAuthError):
            add_acls(zk, TOPIC_T, [entry("User:mallory", Operation.ALL)])
        with pytest.raises(ZnodeNoAuthError):
            write_credential(zk, "alice", make_credential(SHA512, "mallory"))
        with pytest.raises(ZnodeNoAuthError), translated():
            zk.set("/config/users/alice", b"{}")
        assert read_credential(secure, "alice", SHA512) == credential
    finally:
        secure.stop()
        secure.close()
