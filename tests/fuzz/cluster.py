"""The cluster under fuzz: one real ZooKeeper, real broker processes, a few topics.

Everything started here is stopped by `close()`, by its own PID, whatever happened in
between; `run.py` and the pytest test call it in a `finally`. The broker runs with a
small request size limit, so that fuzzed sizes often land above it and exercise the
refusal path as well as the reads below it.
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
from spark_replica.launcher import BrokerProcess, free_port
from spark_replica.protocol import ApiKey, MetadataRequest, MetadataResponse
from spark_replica.protocol.frames import SIZE, ResponseHeader
from spark_replica.protocol.metadata import BrokerInfo
from spark_replica.protocol.primitives import Reader
from spark_replica.zk import znodes
from spark_replica.zk.embedded import EmbeddedZooKeeper
from spark_replica.zk.session import connect as zk_session
from tests.fuzz.requests import Target, body_of, request_frame

CHROOT = "/fuzz"
MAX_FRAME_BYTES = 1024 * 1024
# Topics that valid requests hit (name -> partitions), and the controller requests' victim.
FUZZ_TOPICS = {"fuzz-a": 4, "fuzz-b": 2}
VICTIM_TOPIC = "fuzz-victim"
VICTIM_PARTITIONS = 4
LEADERS_TIMEOUT_S = 60.0
ANSWER_TIMEOUT_S = 10.0
BROKER_OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "socket.request.max.bytes": str(MAX_FRAME_BYTES),
}
PROBE_CORRELATION_ID = 0x7E57


class FuzzCluster:
    """`size` brokers under `root`, topics made by `setup()`.

    With `zk_connect` the brokers use that ZooKeeper (a test's chroot); without, the
    cluster starts a ZooKeeper of its own and stops it in `close()`.
    """

    def __init__(self, root: Path, size: int = 1, zk_connect: str | None = None) -> None:
        self.root = root
        self.size = size
        self.brokers: list[BrokerProcess] = []
        self.zookeeper: EmbeddedZooKeeper | None = None
        if zk_connect is None:
            self.zookeeper = EmbeddedZooKeeper(free_port(), root / "zookeeper")
            zk_connect = f"{self.zookeeper.connect_string}{CHROOT}"
        self.zk_connect = zk_connect

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return [(b.host, b.port) for b in self.brokers]

    def setup(self) -> None:
        if self.zookeeper is not None:
            self.zookeeper.start()
        for broker_id in range(1, self.size + 1):
            broker = BrokerProcess(
                broker_id,
                free_port(),
                self.root / f"broker-{broker_id}",
                self.zk_connect,
                overrides=dict(BROKER_OVERRIDES),
            )
            self.brokers.append(broker)
            broker.start()
        asyncio.run(self._create_topics())
        self.wait_for_leaders()

    async def _create_topics(self) -> None:
        cluster = Cluster(self.bootstrap)
        try:
            admin = Admin(cluster)
            factor = min(2, self.size)
            for topic, partitions in FUZZ_TOPICS.items():
                await admin.create_topic(topic, partitions, factor, {})
            await admin.create_topic(VICTIM_TOPIC, VICTIM_PARTITIONS, 1, {})
        finally:
            await cluster.close()

    def wait_for_leaders(self) -> None:
        """Until every broker knows a leader for every partition of the topics."""
        wanted = {**FUZZ_TOPICS, VICTIM_TOPIC: VICTIM_PARTITIONS}
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
            response = metadata(broker, topics)
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


def rss_mb(broker: BrokerProcess) -> float:
    """VmRSS of the broker process, in MB (0 when it is not running)."""
    if broker.pid is None:
        return 0.0
    try:
        status = Path(f"/proc/{broker.pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_fds(broker: BrokerProcess) -> int:
    if broker.pid is None:
        return 0
    try:
        return len(os.listdir(f"/proc/{broker.pid}/fd"))
    except OSError:
        return 0


def metadata(broker: BrokerProcess, topics: list[str] | None = None) -> MetadataResponse:
    """Ask a broker for Metadata on a fresh connection, with a deadline; raise if it fails."""
    request = request_frame(ApiKey.METADATA, body_of(MetadataRequest(topics)), PROBE_CORRELATION_ID)
    with socket.create_connection((broker.host, broker.port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.settimeout(ANSWER_TIMEOUT_S)
        sock.sendall(request)
        (size,) = SIZE.unpack(_recv_exactly(sock, SIZE.size))
        reader = Reader(_recv_exactly(sock, size))
    header = ResponseHeader.read(reader)
    if header.correlation_id != PROBE_CORRELATION_ID or header.error_code:
        raise ReplogError(f"Metadata answered {header}")
    response = MetadataResponse.read(reader)
    reader.expect_end()
    return response


def answers_metadata(broker: BrokerProcess) -> bool:
    try:
        metadata(broker)
    except (OSError, ReplogError):
        return False
    return True


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ReplogError(f"connection closed after {len(data)} of {count} bytes")
        data += chunk
    return bytes(data)
