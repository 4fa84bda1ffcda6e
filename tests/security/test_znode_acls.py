"""With zookeeper.set.acl=true no znode of the cluster can be changed by an anonymous
ZooKeeper client, whoever made it and however: the brokers (registration, controller,
partition states packed into multi-ops, producer id blocks, group offsets), the command
line (topics, configs, reassignments, elections, deletions) and the SCRAM users and ACLs
written for the Kafka admin API. Whoever reaches ZooKeeper could otherwise rewrite an ISR
and have a lagging replica elected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoAuthError
from kazoo.security import Permissions

from spark_replica.security.scram import make_credential
from spark_replica.zk import znodes
from spark_replica.zk.kazoo_errors import children_if_present, read_if_present
from spark_replica.zk.security_store import write_credential
from spark_replica.zk.session import connect, split_connect_string
from tests.security.conftest import PASSWORDS, ZK_DIGEST, SecureSetup, jaas
from tests.support import (
    BrokerFactory,
    create_topic,
    leadership,
    replog_in_process,
    run,
    wait_for,
    wait_until,
)

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0
ZK_CONNECT_TIMEOUT_S = 15.0
# Far from any znode's real version: the probe can only fail, for want of rights
# (ZooKeeper checks the ACL before the version) or, on an open znode, for the version.
UNMATCHED_VERSION = 1 << 30


def _cli(setup: SecureSetup, properties: Path, *args: str, stdin: bytes = b"") -> None:
    where = ("--zookeeper", setup.zk_connect, "--command-config", str(properties))
    result = replog_in_process(*args, *where, stdin=stdin)
    assert result.returncode == 0, (args, result.stderr.decode())


def _kafka_client(setup: SecureSetup) -> dict[str, str | int | float | bool]:
    return {
        "bootstrap.servers": setup.brokers.kafka_bootstrap(),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(setup.ca.cert),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "admin",
        "sasl.password": PASSWORDS["admin"],
    }


def _through_the_cli(setup: SecureSetup, tmp_path: Path) -> None:
    """Topics, configs, a user, an ACL, a deletion, a reassignment and an election, each
    written the way `replog` writes it (through a broker or straight to ZooKeeper)."""
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.jaas.config={jaas('admin', PASSWORDS['admin'])}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={setup.ca.cert}\n"
        f"zookeeper.digest={ZK_DIGEST}\n"
    )
    create = ("topics", "create", "--replication-factor", "2", "--partitions")
    _cli(setup, properties, *create, "3", "cli-made", "--config", "retention.ms=3600000")
    _cli(setup, properties, *create, "1", "doomed")
    _cli(
        setup,
        properties,
        "configs",
        "alter",
        "--topic",
        "cli-made",
        "--add-config",
        "segment.ms=600000",
    )
    _cli(setup, properties, "users", "create", "carol", "--password-stdin", stdin=b"carol-pw\n")
    acl = ("--allow-principal", "User:carol", "--operation", "Read")
    _cli(setup, properties, "acls", "add", "--topic", "cli-made", *acl)
    _cli(setup, properties, "topics", "delete", "doomed")
    zk = connect(setup.zk_connect, digest=ZK_DIGEST)
    try:
        found = read_if_present(zk, znodes.topic_path("cli-made"))
        assert found is not None
        replicas = znodes.TopicAssignment.decode("cli-made", found[0]).partitions
        moves = [{"topic": "cli-made", "partition": 0, "replicas": replicas[0][::-1]}]
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": moves}))
        _cli(setup, properties, "reassign", "--plan", str(plan))
        wait_until(
            lambda: zk.exists(znodes.REASSIGN_PARTITIONS_PATH) is None,
            "the reassignment to finish",
            DEADLINE_S,
        )
        _cli(setup, properties, "elect-leaders", "--topic", "cli-made")
        wait_until(
            lambda: (
                zk.exists(znodes.PREFERRED_REPLICA_ELECTION_PATH) is None
                and not children_if_present(zk, znodes.DELETE_TOPICS_PATH)
            ),
            "the election and the deletion to finish",
            DEADLINE_S,
        )
    finally:
        zk.stop()
        zk.close()


def _through_kafka_clients(setup: SecureSetup) -> None:
    """A topic made with Kafka's admin client, an idempotent producer (a producer id
    block), and a consumer group that commits offsets."""
    client = _kafka_client(setup)
    admin = AdminClient(client)
    admin.create_topics([NewTopic("kafka-made", 2, 2)])["kafka-made"].result(DEADLINE_S)
    producer = Producer({**client, "enable.idempotence": True})
    for i in range(10):
        producer.produce("kafka-made", f"record-{i}".encode(), partition=i % 2)
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({**client, "group.id": "committers", "enable.auto.commit": False})
    try:
        offsets = [KafkaPartition("kafka-made", p, 5) for p in (0, 1)]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def _whole_tree(zk: KazooClient) -> list[str]:
    """Every znode under the session's root, the root included."""
    paths, pending = [], ["/"]
    while pending:
        path = pending.pop()
        paths.append(path)
        prefix = path.rstrip("/")
        pending += [f"{prefix}/{child}" for child in zk.get_children(path)]
    return sorted(paths)


def _world_may_change(zk: KazooClient, path: str) -> bool:
    acls, _ = zk.get_acls(path)
    world = [a for a in acls if (a.id.scheme, a.id.id) == ("world", "anyone")]
    return any(a.perms & ~Permissions.READ for a in world)


def _audit(zk_connect: str) -> tuple[list[str], list[str]]:
    """Every znode of the cluster, and those whose ACL lets the world change them.

    Listed by the cluster's own identity: some znodes (credentials) are not even readable
    by others, so an anonymous session could not list what lies under them."""
    zk = connect(zk_connect, digest=ZK_DIGEST)
    try:
        paths = _whole_tree(zk)
        return paths, [p for p in paths if _world_may_change(zk, p)]
    finally:
        zk.stop()
        zk.close()


def _anonymous_set_outcomes(zk_connect: str, paths: list[str]) -> dict[str, str]:
    """What an unauthenticated session's `set` on each znode met (pipelined)."""
    anonymous = KazooClient(hosts=zk_connect)
    anonymous.start(timeout=ZK_CONNECT_TIMEOUT_S)
    try:
        pending = [anonymous.set_async(p, b"planted", version=UNMATCHED_VERSION) for p in paths]
        outcomes = {}
        for path, answer in zip(paths, pending, strict=True):
            try:
                answer.get(timeout=DEADLINE_S)
                outcomes[path] = "written"
            except (NoAuthError, BadVersionError) as exc:
                outcomes[path] = type(exc).__name__
        return outcomes
    finally:
        anonymous.stop()
        anonymous.close()


def test_no_znode_of_a_secured_cluster_is_open_to_anonymous_writers(
    secure: SecureSetup, tmp_path: Path
) -> None:
    secure.start(1)
    secure.start(2)
    _through_the_cli(secure, tmp_path)
    _through_kafka_clients(secure)

    paths, open_to_world = _audit(secure.zk_connect)
    expected = [
        znodes.partition_state_path("cli-made", 2),
        znodes.partition_state_path("kafka-made", 1),
        znodes.topic_config_path("cli-made"),
        znodes.DELETE_TOPICS_PATH,
        znodes.ISR_CHANGE_NOTIFICATION_PATH,
        f"{znodes.CONFIG_CHANGE_PREFIX}0000000000",
        "/config/users/carol",
        "/kafka-acl/Topic/cli-made",
        "/kafka-acl-changes/acl_changes_0000000000",
        "/brokers/ids/2",
        "/controller",
        "/latest_producer_id_block",
    ]
    assert set(expected) <= set(paths), sorted(set(expected) - set(paths))
    # `replog zookeeper lock-znodes` knows every top-level znode the cluster makes.
    assert {p.split("/")[1] for p in paths if p != "/"} <= znodes.CLUSTER_ROOTS
    assert open_to_world == []
    outcomes = _anonymous_set_outcomes(secure.zk_connect, paths)
    assert {p: o for p, o in outcomes.items() if o != "NoAuthError"} == {}


def test_the_cluster_root_is_made_by_the_secured_broker_not_by_whoever_looked_first(
    zk_connect: str, tmp_path: Path
) -> None:
    """The launcher looks for a stale registration before the first broker runs; had that
    look made the missing chroot, it would carry the launcher's open ACL, and anyone could
    delete /controller or plant znodes at the cluster's top."""
    brokers = BrokerFactory(zk_connect, tmp_path)
    try:
        brokers.start(1, **{"zookeeper.set.acl": "true", "zookeeper.digest": ZK_DIGEST})
        hosts, chroot = split_connect_string(zk_connect)
        assert chroot is not None
        zk = connect(hosts, digest=ZK_DIGEST)
        try:
            assert not _world_may_change(zk, chroot)
        finally:
            zk.stop()
            zk.close()
    finally:
        brokers.stop_all()


def test_lock_znodes_closes_what_a_cluster_made_before_it_was_secured(
    zk_connect: str, tmp_path: Path
) -> None:
    """Kafka's zookeeper-security-migration: brokers restarted with zookeeper.set.acl,
    then the znodes they made open are locked; the cluster keeps working."""
    brokers = BrokerFactory(zk_connect, tmp_path)
    try:
        brokers.start(1)
        run(create_topic(brokers.bootstrap, "before", 2))
        unsecured = connect(zk_connect)
        try:
            write_credential(unsecured, "early", make_credential("SCRAM-SHA-256", "pw"))
        finally:
            unsecured.stop()
            unsecured.close()
        assert _audit(zk_connect)[1], "an unsecured cluster's znodes are open"
        brokers.brokers[1].stop()
        brokers.start(1, **{"zookeeper.set.acl": "true", "zookeeper.digest": ZK_DIGEST})

        anonymous = replog_in_process("zookeeper", "lock-znodes", "--zookeeper", zk_connect)
        assert anonymous.returncode != 0 and b"zookeeper.digest" in anonymous.stderr
        properties = tmp_path / "zk.properties"
        properties.write_text(f"zookeeper.digest={ZK_DIGEST}\n")
        where = ("--zookeeper", zk_connect, "--command-config", str(properties))
        locked = replog_in_process("zookeeper", "lock-znodes", *where)
        assert locked.returncode == 0, locked.stderr.decode()
        paths, open_to_world = _audit(zk_connect)
        assert open_to_world == []
        assert set(_anonymous_set_outcomes(zk_connect, paths).values()) == {"NoAuthError"}
        secret = KazooClient(hosts=zk_connect)
        secret.start(timeout=ZK_CONNECT_TIMEOUT_S)
        try:
            with pytest.raises(NoAuthError):
                secret.get("/config/users/early")  # a credential: not even readable now
        finally:
            secret.stop()
            secret.close()
        again = replog_in_process("zookeeper", "lock-znodes", *where)
        assert again.stdout.startswith(b"Locked 0 znode(s)"), again.stdout

        # The broker still writes where it wrote before: a new topic under the locked
        # parents, its partition states, a config change.
        run(create_topic(brokers.bootstrap, "after", 2, **{"retention.ms": "3600000"}))
        run(wait_for(lambda: _led_by(brokers, "after", 1), DEADLINE_S))
    finally:
        brokers.stop_all()


async def _led_by(brokers: BrokerFactory, topic: str, broker_id: int) -> bool:
    return all(p["leader"] == broker_id for p in await leadership(brokers.bootstrap, topic))
