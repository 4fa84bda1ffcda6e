"""The cluster under fuzz: one real ZooKeeper, real broker processes, a few topics.

Everything started here is stopped by `close()`, by its own PID, whatever happened in
between; `run.py` and the pytest test call it in a `finally`. The broker runs with a
small request size limit, so that fuzzed sizes often land above it and exercise the
refusal path as well as the reads below it; the hostile run keeps Kafka's default
(100 MiB), since what it sends (sizes that lie, trickled frames) is aimed at what a
default broker lets in. With `sasl` the listeners are SASL_PLAINTEXT with SCRAM and the
ACL authorizer (everyone allowed where no ACL is found, so authenticated fuzz reaches the
same handlers as without), the users are written to ZooKeeper before any broker starts,
and the probes log in first.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import time
from pathlib import Path

from spark_replica.client import Admin, Cluster
from spark_replica.errors import ReplogError
from spark_replica.security.scram import MECHANISMS, make_credential
from spark_replica.security.settings import SecurityConfig
from spark_replica.tools.launcher.brokers import BrokerProcess, free_port
from spark_replica.tools.launcher.local_security import render_properties, scram_jaas_config
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.wire.native import ApiKey, MetadataRequest, MetadataResponse
from spark_replica.wire.native.frames import SIZE, ResponseHeader
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.primitives import Reader
from spark_replica.zk import znodes
from spark_replica.zk.security_store import write_credential
from spark_replica.zk.session import connect as zk_session
from tests.fuzz.login import MECHANISM, REPLOG, Login, login_socket
from tests.fuzz.requests import Target, body_of, request_frame

CHROOT = "/fuzz"
MAX_FRAME_BYTES = 1024 * 1024
# Topics that valid requests hit (name -> partitions), and the controller requests' victim.
FUZZ_TOPICS = {"fuzz-a": 4, "fuzz-b": 2}
VICTIM_TOPIC = "fuzz-victim"
VICTIM_PARTITIONS = 4
LEADERS_TIMEOUT_S = 60.0
ANSWER_TIMEOUT_S = 10.0
# The well-behaved client's topic: no fuzzed request names it.
STEADY_TOPIC = "steady"
BROKER_OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "socket.request.max.bytes": str(MAX_FRAME_BYTES),
}
# Kafka's default socket.request.max.bytes, which the hostile run keeps.
DEFAULT_MAX_FRAME_BYTES = 104_857_600
PROBE_CORRELATION_ID = 0x7E57
# Users of a SASL cluster: the brokers, a super user (topics, the well-behaved client)
# and the fuzzer's own logins. Test passwords, for a throwaway cluster.
BROKER_USER, ADMIN_USER, FUZZ_USER = "broker", "admin", "fuzzer"
PASSWORDS = {BROKER_USER: "broker-secret", ADMIN_USER: "admin-secret", FUZZ_USER: "fuzz-secret"}


class FuzzCluster:
    """`size` brokers under `root`, topics made by `setup()`.

    With `zk_connect` the brokers use that ZooKeeper (a test's chroot); without, the
    cluster starts a ZooKeeper of its own and stops it in `close()`.
    """

    def __init__(
        self,
        root: Path,
        size: int = 1,
        zk_connect: str | None = None,
        *,
        hostile: bool = False,
        sasl: bool = False,
        kafka_listener: bool = False,
    ) -> None:
        self.root = root
        self.size = size
        self.hostile = hostile
        self.sasl = sasl
        self.kafka_listener = kafka_listener
        self.max_frame_bytes = DEFAULT_MAX_FRAME_BYTES if hostile else MAX_FRAME_BYTES
        self.brokers: list[BrokerProcess] = []
        self.zookeeper: EmbeddedZooKeeper | None = None
        if zk_connect is None:
            self.zookeeper = EmbeddedZooKeeper(free_port(), root / "zookeeper")
            zk_connect = f"{self.zookeeper.connect_string}{CHROOT}"
        self.zk_connect = zk_connect

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return [(b.host, b.port) for b in self.brokers]

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(str(b.kafka_address) for b in self.brokers)

    def login(self, listener: str = REPLOG, user: str = FUZZ_USER) -> Login | None:
        """How a raw connection to `listener` logs in (None: no SASL, nothing to do)."""
        return Login(listener, user, PASSWORDS[user]) if self.sasl else None

    def client_security(self) -> SecurityConfig | None:
        """The super user's client settings, for the replog client (None without SASL)."""
        if not self.sasl:
            return None
        return SecurityConfig.from_properties(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": MECHANISM,
                "sasl.jaas.config": scram_jaas_config(ADMIN_USER, PASSWORDS[ADMIN_USER]),
            }
        )

    def setup(self) -> None:
        if self.zookeeper is not None:
            self.zookeeper.start()
        config_file = self._write_security() if self.sasl else None
        overrides = dict(BROKER_OVERRIDES)
        overrides["socket.request.max.bytes"] = str(self.max_frame_bytes)
        for broker_id in range(1, self.size + 1):
            broker = BrokerProcess(
                broker_id,
                free_port(),
                self.root / f"broker-{broker_id}",
                self.zk_connect,
                overrides=overrides,
                config_file=config_file,
                kafka_port=free_port() if self.kafka_listener else -1,
            )
            self.brokers.append(broker)
            broker.start()
        asyncio.run(self._create_topics())
        self.wait_for_leaders()

    def _write_security(self) -> Path:
        """Users in ZooKeeper, and the brokers' --config file (it holds their password)."""
        zk = zk_session(self.zk_connect)
        try:
            for user, password in PASSWORDS.items():
                for mechanism in MECHANISMS:
                    write_credential(zk, user, make_credential(mechanism, password))
        finally:
            zk.stop()
            zk.close()
        properties = {
            "listener.security.protocol": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.jaas.config": scram_jaas_config(BROKER_USER, PASSWORDS[BROKER_USER]),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
            "allow.everyone.if.no.acl.found": "true",
        }
        path = self.root / "broker-security.properties"
        path.write_text(render_properties(properties))
        path.chmod(0o600)
        return path

    async def _create_topics(self) -> None:
        cluster = Cluster(self.bootstrap, security=self.client_security())
        try:
            admin = Admin(cluster)
            factor = min(2, self.size)
            for topic, partitions in self.wanted_topics().items():
                if topic != VICTIM_TOPIC:
                    await admin.create_topic(topic, partitions, factor, {})
            await admin.create_topic(VICTIM_TOPIC, VICTIM_PARTITIONS, 1, {})
        finally:
            await cluster.close()

    def wanted_topics(self) -> dict[str, int]:
        topics = {**FUZZ_TOPICS, VICTIM_TOPIC: VICTIM_PARTITIONS}
        if self.hostile:
            topics[STEADY_TOPIC] = 1
        return topics

    def wait_for_leaders(self) -> None:
        """Until every broker knows a leader for every partition of the topics."""
        wanted = self.wanted_topics()
        deadline = time.monotonic() + LEADERS_TIMEOUT_S
        while True:
            led = [self._led_partitions(b, list(wanted)) for b in self.brokers]
            if all(counts == wanted for counts in led):
                return
            if time.monotonic() > deadline:
                raise ReplogError(f"partitions without a leader after setup: {led}")
            time.sleep(0.2)

    def _led_partitions(self, broker: BrokerProcess, topics: list[str]) -> dict[str, int]:
        try:
            response = metadata(broker, topics, self.login())
        except (OSError, ReplogError):
            return {}
        return {
            t.topic: sum(p.leader >= 0 for p in t.partitions)
            for t in response.topics
            if not t.error_code
        }

    def target(self, broker: BrokerProcess) -> Target:
        """What exists on `broker` now: its epoch changes with each restart."""
        zk = zk_session(self.zk_connect)
        try:
            _, stat = zk.get(znodes.broker_path(broker.broker_id))
            data, _ = zk.get(znodes.CONTROLLER_EPOCH_PATH)
        finally:
            zk.stop()
            zk.close()
        return Target(
            topics=dict(FUZZ_TOPICS),
            victim_topic=VICTIM_TOPIC,
            broker_id=broker.broker_id,
            broker_epoch=stat.czxid,
            controller_epoch=znodes.decode_controller_epoch(data),
            brokers=tuple(BrokerInfo(b.broker_id, b.host, b.port) for b in self.brokers),
        )

    def restart(self, broker: BrokerProcess) -> None:
        """Kill whatever is left of a broker (dead or hung) and start it again."""
        broker.kill()
        broker.start()
        self.wait_for_leaders()

    def keep_logs(self, broker: BrokerProcess, into: Path) -> None:
        """Copy a broker's logs next to the frames saved after it failed."""
        into.mkdir(parents=True, exist_ok=True)
        for log in broker.log_dir.glob("broker.*"):
            if log.is_file():
                shutil.copy(log, into / f"{broker.broker_id}-{log.name}")

    def close(self) -> None:
        try:
            for broker in self.brokers:
                broker.stop()
        finally:
            if self.zookeeper is not None:
                self.zookeeper.stop()


def is_running(broker: BrokerProcess) -> bool:
    return broker.process is not None and broker.process.poll() is None


def rss_mb(broker: BrokerProcess, field: str = "VmRSS") -> float:
    """VmRSS of the broker process, in MB (0 when it is not running); or another of its
    /proc status fields, such as RssAnon (heap) and RssFile (mapped files: log segments)."""
    if broker.pid is None:
        return 0.0
    try:
        status = Path(f"/proc/{broker.pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_fds(broker: BrokerProcess) -> int:
    if broker.pid is None:
        return 0
    try:
        return len(os.listdir(f"/proc/{broker.pid}/fd"))
    except OSError:
        return 0


def metadata(
    broker: BrokerProcess, topics: list[str] | None = None, login: Login | None = None
) -> MetadataResponse:
    """Ask a broker for Metadata on a fresh connection, with a deadline; raise if it fails.

    With `login` the connection logs in first (SASL: nothing else is answered before)."""
    request = request_frame(ApiKey.METADATA, body_of(MetadataRequest(topics)), PROBE_CORRELATION_ID)
    with socket.create_connection((broker.host, broker.port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.settimeout(ANSWER_TIMEOUT_S)
        if login is not None:
            login_socket(sock, login)
        sock.sendall(request)
        (size,) = SIZE.unpack(_recv_exactly(sock, SIZE.size))
        reader = Reader(_recv_exactly(sock, size))
    header = ResponseHeader.read(reader)
    if header.correlation_id != PROBE_CORRELATION_ID or header.error_code:
        raise ReplogError(f"Metadata answered {header}")
    response = MetadataResponse.read(reader)
    reader.expect_end()
    return response


def answers_metadata(broker: BrokerProcess, login: Login | None = None) -> bool:
    try:
        metadata(broker, login=login)
    except (OSError, ReplogError):
        return False
    return True


def answers_kafka(broker: BrokerProcess) -> bool:
    """The Kafka listener answers ApiVersions v0 (served before login too)."""
    request = request_frame(ApiKey.API_VERSIONS, b"", PROBE_CORRELATION_ID)
    address = (broker.host, broker.kafka_port)
    try:
        with socket.create_connection(address, timeout=ANSWER_TIMEOUT_S) as sock:
            sock.settimeout(ANSWER_TIMEOUT_S)
            sock.sendall(request)
            (size,) = SIZE.unpack(_recv_exactly(sock, SIZE.size))
            answer = _recv_exactly(sock, size)
    except (OSError, ReplogError):
        return False
    return answer[:6] == PROBE_CORRELATION_ID.to_bytes(4, "big") + b"\x00\x00"


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ReplogError(f"connection closed after {len(data)} of {count} bytes")
        data += chunk
    return bytes(data)
