"""Kafka's ACLs enforced by real brokers: what a principal may do follows the ACLs in
ZooKeeper, changes reach the brokers within seconds, and a deny wins over an allow."""

from __future__ import annotations

import time

import pytest

from spark_replica.client import Admin, Cluster, Consumer, Producer, ProducerConfig
from spark_replica.errors import ReplogError, TopicAuthorizationFailedError
from spark_replica.security.acl import Operation
from spark_replica.security.settings import SecurityConfig
from tests.security.conftest import PASSWORDS, SecureSetup
from tests.support import replog, run

pytestmark = pytest.mark.slow

# The bound for an ACL change to reach every broker.
PROPAGATION_S = 5.0


async def _create(setup: SecureSetup, *topics: str) -> None:
    cluster = Cluster(setup.brokers.bootstrap, security=setup.client("admin"))
    try:
        for topic in topics:
            await Admin(cluster).create_topic(topic, 1, 1)
    finally:
        await cluster.close()


async def _produce(bootstrap: list[tuple[str, int]], security: SecurityConfig, topic: str) -> None:
    cluster = Cluster(bootstrap, security=security)
    try:
        config = ProducerConfig(delivery_timeout_ms=10_000)
        await Producer(cluster, config).send_records(topic, ["x"], partition=0)
    finally:
        await cluster.close()


async def _consume(bootstrap: list[tuple[str, int]], security: SecurityConfig, topic: str) -> int:
    cluster = Cluster(bootstrap, security=security)
    try:
        consumer = Consumer(cluster)
        await consumer.assign_topic(topic)
        await consumer.seek_to_beginning()
        return sum(chunk.records.num_rows for chunk in await consumer.poll(max_wait_ms=200))
    finally:
        await cluster.close()


def _eventually(check, timeout_s: float) -> float:
    """Seconds until `check()` stops raising ReplogError; fails after `timeout_s`."""
    started = time.monotonic()
    while True:
        try:
            check()
            return time.monotonic() - started
        except ReplogError:
            if time.monotonic() - started > timeout_s:
                raise
            time.sleep(0.2)


def test_write_only_principal_writes_and_is_refused_the_rest(secure: SecureSetup) -> None:
    secure.start(1)
    bootstrap = secure.brokers.bootstrap
    alice = secure.client("alice")
    run(_create(secure, "t", "u"))
    secure.allow("User:alice", Operation.WRITE, "t")
    _eventually(lambda: run(_produce(bootstrap, alice, "t")), PROPAGATION_S)

    with pytest.raises(TopicAuthorizationFailedError, match="Read"):
        run(_consume(bootstrap, alice, "t"))
    with pytest.raises(TopicAuthorizationFailedError):
        run(_produce(bootstrap, alice, "u"))

    admin_config = secure.directory / "admin.properties"
    admin_config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\n"
        f"sasl.password={PASSWORDS['admin']}\nssl.ca.location={secure.ca.cert}\n"
    )
    added = replog(
        "acls", "add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t",
        "--bootstrap", "{}:{}".format(*bootstrap[0]), "--command-config", str(admin_config),
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    _eventually(lambda: run(_consume(bootstrap, alice, "t")), PROPAGATION_S)
    assert run(_consume(bootstrap, alice, "t")) == 1


def test_a_deny_overrides_an_allow(secure: SecureSetup) -> None:
    secure.start(1)
    bootstrap = secure.brokers.bootstrap
    alice = secure.client("alice")
    run(_create(secure, "t"))
    secure.allow("User:alice", Operation.WRITE, "t")
    _eventually(lambda: run(_produce(bootstrap, alice, "t")), PROPAGATION_S)

    secure.allow("User:alice", Operation.WRITE, "t", deny=True)

    def refused() -> None:
        try:
            run(_produce(bootstrap, alice, "t"))
        except TopicAuthorizationFailedError:
            return
        raise ReplogError("still allowed")

    _eventually(refused, PROPAGATION_S)


def test_topics_a_principal_may_not_describe_are_left_out_of_metadata(
    secure: SecureSetup,
) -> None:
    secure.start(1)
    run(_create(secure, "visible", "hidden"))
    secure.allow("User:alice", Operation.READ, "visible")

    async def listed() -> set[str]:
        cluster = Cluster(secure.brokers.bootstrap, security=secure.client("alice"))
        try:
            return {t.topic for t in (await cluster.refresh()).topics}
        finally:
            await cluster.close()

    def only_visible() -> None:
        if run(listed()) != {"visible"}:
            raise ReplogError("not yet")

    _eventually(only_visible, PROPAGATION_S)
