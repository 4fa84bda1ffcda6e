"""Logins that tell an attacker nothing and work with any enabled mechanism (issue 23):
an unknown user's SCRAM exchange looks like a known user's on every broker, and
SASL/PLAIN alone lets a valid user in. Real brokers; the SCRAM steps over a raw Kafka
socket, so that every byte of the broker's answers can be compared."""

from __future__ import annotations

import base64
import socket
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_replica.client import Cluster
from spark_replica.security.scram import ScramClient
from spark_replica.security.settings import SecurityConfig
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.kafka.headers import decode_response, encode_request
from spark_replica.wire.native.frames import SIZE
from spark_replica.wire.schema import Data
from tests.security.conftest import PASSWORDS, SecureSetup
from tests.support import run

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0
HANDSHAKE, AUTHENTICATE = 17, 36
MECHANISM = "SCRAM-SHA-256"


class KafkaSocket:
    """Kafka requests over a plain socket, one at a time."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection((broker.host, broker.kafka_port), timeout=10)
        self.correlation_id = 0

    def call(self, api_key: int, version: int, body: Data) -> Data:
        self.correlation_id += 1
        frame = encode_request(api_key, version, self.correlation_id, "secrecy", body)
        self.sock.sendall(b"".join(bytes(part) for part in frame))
        (size,) = SIZE.unpack(self._exactly(SIZE.size))
        correlation_id, answer = decode_response(api_key, version, self._exactly(size))
        assert correlation_id == self.correlation_id
        return answer

    def _exactly(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return bytes(data)


def _scram_attempt(broker: BrokerProcess, user: str, password: str) -> tuple[dict[str, str], Data]:
    """A SCRAM login over a raw socket: the server-first attributes and the final answer."""
    conn = KafkaSocket(broker)
    try:
        handshake = conn.call(HANDSHAKE, 1, Data(mechanism=MECHANISM))
        assert handshake.error_code == 0
        client = ScramClient(MECHANISM, user, password)
        first = conn.call(AUTHENTICATE, 2, Data(auth_bytes=client.first_message()))
        assert first.error_code == 0, first.error_message
        server_first = bytes(first.auth_bytes)
        attributes = dict(part.split("=", 1) for part in server_first.decode().split(","))
        final = conn.call(AUTHENTICATE, 2, Data(auth_bytes=client.final_message(server_first)))
        return attributes, final
    finally:
        conn.sock.close()


def test_an_unknown_user_looks_like_a_known_one_on_every_broker(secure: SecureSetup) -> None:
    for broker_id in (1, 2):
        secure.start(broker_id, protocol="SASL_PLAINTEXT")
    brokers = list(secure.brokers.brokers.values())
    known = [_scram_attempt(broker, "alice", "not-her-password") for broker in brokers]
    unknown = [_scram_attempt(broker, "mallory", "guess") for broker in brokers]
    # The same salt for the unknown name whichever broker is asked: no broker's own
    # random choice gives the name away.
    assert unknown[0][0]["s"] == unknown[1][0]["s"]
    assert _scram_attempt(brokers[0], "mallory", "again")[0]["s"] == unknown[0][0]["s"]
    for (known_first, known_final), (unknown_first, unknown_final) in zip(
        known, unknown, strict=True
    ):
        assert len(base64.b64decode(unknown_first["s"])) == len(base64.b64decode(known_first["s"]))
        assert unknown_first["i"] == known_first["i"]
        assert (unknown_final.error_code, unknown_final.error_message) == (
            known_final.error_code,
            known_final.error_message,
        )
        assert unknown_final.error_code == 58


def _plain(user: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{password}";'
    )


def test_plain_alone_lets_a_valid_user_in(secure: SecureSetup) -> None:
    secure.start(
        1,
        **{
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.jaas.config": _plain("broker", PASSWORDS["broker"]),
        },
    )
    config = {
        "bootstrap.servers": secure.brokers.kafka_bootstrap(),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(secure.ca.cert),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": PASSWORDS["admin"],
    }
    admin = AdminClient(config)
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(DEADLINE_S)
    producer = Producer(config)
    outcomes: list[object] = []
    deadline = time.monotonic() + DEADLINE_S
    while outcomes[-1:] != [None]:
        assert time.monotonic() < deadline, f"produce over PLAIN failed: {outcomes}"
        producer.produce("plain", b"v", on_delivery=lambda error, _: outcomes.append(error))
        producer.flush(DEADLINE_S)

    async def replog_login(password: str) -> None:
        security = SecurityConfig.from_properties(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": _plain("alice", password),
                "ssl.truststore.location": str(secure.ca.cert),
            }
        )
        cluster = Cluster(secure.brokers.bootstrap, security=security)
        try:
            await cluster.refresh()
        finally:
            await cluster.close()

    run(replog_login(PASSWORDS["alice"]), timeout_s=DEADLINE_S)
