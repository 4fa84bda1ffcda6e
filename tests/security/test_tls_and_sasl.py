"""TLS and SASL on a broker's listener, with real broker processes: the right settings
get in (and the brokers replicate over the same secured listener); wrong ones fail at
once with an error that says why, and not after a minute of retries."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spark_replica.client import Admin, Cluster, Consumer, Producer, ProducerConfig
from spark_replica.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    SslHandshakeError,
)
from spark_replica.event_loop import ENVIRONMENT_VARIABLE as EVENT_LOOP_VARIABLE
from spark_replica.event_loop import EVENT_LOOPS
from spark_replica.security.acl import Operation
from spark_replica.security.certs import make_ca
from spark_replica.security.settings import SecurityConfig
from tests.security.conftest import PASSWORDS, SecureSetup
from tests.support import replog, run

pytestmark = pytest.mark.slow

# Failing "at once": well under the client's metadata wait and request timeouts.
FAST_S = 10.0
# The same for the CLI, whose interpreter and imports take a few seconds to start.
CLI_FAST_S = 30.0


async def _topics(bootstrap: list[tuple[str, int]], security: SecurityConfig | None) -> None:
    cluster = Cluster(bootstrap, security=security)
    try:
        await cluster.refresh()
    finally:
        await cluster.close()


def _fails_fast(setup: SecureSetup, security: SecurityConfig | None, error: type) -> str:
    started = time.monotonic()
    with pytest.raises(error) as caught:
        run(_topics(setup.brokers.bootstrap, security), timeout_s=60)
    assert time.monotonic() - started < FAST_S
    return str(caught.value)


def _runs_on(setup: SecureSetup, broker_id: int, loop: str) -> None:
    """The broker says, in its log, that it runs on `loop`."""
    log = (setup.brokers.brokers[broker_id].log_dir / "broker.log").read_text()
    assert f"running on the {loop} event loop" in log


@pytest.mark.parametrize("loop", EVENT_LOOPS)
def test_a_plaintext_client_is_told_the_listener_needs_tls(
    secure: SecureSetup, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EVENT_LOOP_VARIABLE, loop)  # inherited by the broker
    secure.start(1)
    _runs_on(secure, 1, loop)
    message = _fails_fast(secure, None, SaslAuthenticationFailedError)
    assert "requires TLS" in message


def test_a_client_that_does_not_trust_the_ca_fails(secure: SecureSetup) -> None:
    secure.start(1)
    other = make_ca(secure.directory / "other-ca")
    security = secure.client(**{"ssl.truststore.location": str(other.cert)})
    message = _fails_fast(secure, security, SslHandshakeError)
    assert "certificate verify failed" in message


def test_a_wrong_password_fails_naming_authentication(secure: SecureSetup) -> None:
    secure.start(1)
    message = _fails_fast(
        secure, secure.client("alice", "not-her-password"), SaslAuthenticationFailedError
    )
    assert "authentication" in message and "alice" in message


def test_an_unknown_user_fails_like_a_wrong_password(secure: SecureSetup) -> None:
    secure.start(1)
    unknown = SecurityConfig.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "mallory",
            "sasl.password": "guess",
            "ssl.ca.location": str(secure.ca.cert),
        }
    )
    _fails_fast(secure, unknown, SaslAuthenticationFailedError)


def test_tls_without_sasl_on_a_sasl_listener_is_refused(secure: SecureSetup) -> None:
    secure.start(1)
    tls_only = SecurityConfig.from_properties(
        {"security.protocol": "SSL", "ssl.ca.location": str(secure.ca.cert)}
    )
    message = _fails_fast(secure, tls_only, IllegalSaslStateError)
    assert "requires SASL" in message


@pytest.mark.parametrize("loop", EVENT_LOOPS)
def test_brokers_replicate_and_clients_round_trip_over_sasl_ssl(
    secure: SecureSetup, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EVENT_LOOP_VARIABLE, loop)  # inherited by the brokers
    for broker_id in (1, 2):
        secure.start(broker_id)
        _runs_on(secure, broker_id, loop)
    topic = "secured"
    secure.allow("User:alice", Operation.WRITE, topic)
    secure.allow("User:alice", Operation.READ, topic)
    values = [f"v{i}" for i in range(50)]

    async def scenario() -> list[str]:
        admin_cluster = Cluster(secure.brokers.bootstrap, security=secure.client("admin"))
        try:
            await Admin(admin_cluster).create_topic(topic, 1, 2, {"min.insync.replicas": "2"})
        finally:
            await admin_cluster.close()
        cluster = Cluster(secure.brokers.bootstrap, security=secure.client("alice"))
        try:
            # acks=all with min.insync.replicas=2: acknowledged only once the follower,
            # fetching over SASL_SSL as User:broker, has the records.
            producer = Producer(cluster, ProducerConfig(delivery_timeout_ms=30_000))
            await producer.send_records(topic, values, partition=0)
            consumer = Consumer(cluster)
            await consumer.assign_topic(topic)
            await consumer.seek_to_beginning()
            seen: list[str] = []
            deadline = time.monotonic() + 30
            while len(seen) < len(values) and time.monotonic() < deadline:
                for chunk in await consumer.poll(max_wait_ms=200):
                    seen += [row["value"].decode() for row in chunk.records.to_pylist()]
            return seen
        finally:
            await cluster.close()

    assert run(scenario(), loop=loop) == values


def _properties(path: Path, **props: str) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    return path


def test_the_cli_exits_non_zero_naming_each_failure(secure: SecureSetup) -> None:
    secure.start(1)
    address = "{}:{}".format(*secure.brokers.bootstrap[0])
    good = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "admin",
        "sasl.password": PASSWORDS["admin"],
        "ssl.ca.location": str(secure.ca.cert),
    }
    other_ca = make_ca(secure.directory / "other-ca")
    cases = {
        "requires TLS": None,
        "certificate verify failed": {**good, "ssl.ca.location": str(other_ca.cert)},
        "authentication": {**good, "sasl.password": "wrong"},
    }
    for expected, props in cases.items():
        args = ["topics", "list", "--bootstrap", address]
        if props is not None:
            config = _properties(secure.directory / "client.properties", **props)
            args += ["--command-config", str(config)]
        started = time.monotonic()
        result = replog(*args)
        assert result.returncode != 0, expected
        assert expected in result.stderr.decode(), result.stderr
        assert time.monotonic() - started < CLI_FAST_S
    config = _properties(secure.directory / "client.properties", **good)
    result = replog("topics", "list", "--bootstrap", address, "--command-config", str(config))
    assert result.returncode == 0, result.stderr


def test_sasl_plain_over_tls_checks_the_scram_credential(secure: SecureSetup) -> None:
    secure.start(1, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"})

    def config(password: str) -> SecurityConfig:
        return SecurityConfig.from_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": password,
                "ssl.ca.location": str(secure.ca.cert),
            }
        )

    run(_topics(secure.brokers.bootstrap, config(PASSWORDS["alice"])), timeout_s=60)
    _fails_fast(secure, config("wrong"), SaslAuthenticationFailedError)
