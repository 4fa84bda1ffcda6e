"""Helpers shared by the tests that start real processes (fixtures are in conftest.py):
brokers and clusters, topics, waiting on a condition, producing and reading back, and
the command line. A helper used by more than one test module belongs here."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from spark_replica import event_loop
from spark_replica.client import (
    Admin,
    Cluster,
    Consumer,
    ConsumerConfig,
    FetchedRecords,
    Producer,
    ProducerConfig,
    parse_bootstrap,
)
from spark_replica.client.list_offsets import LATEST
from spark_replica.errors import ReplogError
from spark_replica.records import BatchHeader, decode_payload, iter_batches
from spark_replica.security.settings import SecurityConfig, load_properties
from spark_replica.tools.launcher import cluster_dir
from spark_replica.tools.launcher.brokers import BrokerProcess, PortInUseError, free_port
from spark_replica.tools.launcher.port_plan import PortPlan
from spark_replica.topics import OFFSETS_TOPIC, TopicPartition, offsets_partition_for

T = TypeVar("T")

# Short enough that a SIGKILLed broker's registration goes away quickly on restart.
TEST_BROKER_OVERRIDES = {"zookeeper.session.timeout.ms": "3000"}
# A broker's first start on fresh ports, when a port it was given was taken meanwhile.
FIRST_START_ATTEMPTS = 3


def run(awaitable: Awaitable[T], timeout_s: float = 120.0, loop: str = event_loop.ASYNCIO) -> T:
    """Run a coroutine to completion on a fresh loop (asyncio's, as most applications
    use, unless told), with a deadline."""

    async def bounded() -> T:
        return await asyncio.wait_for(awaitable, timeout_s)

    return event_loop.run(bounded(), loop)


class BrokerFactory:
    """Starts brokers for one test and stops every one of them afterwards."""

    def __init__(self, zk_connect: str, root: Path) -> None:
        self.zk_connect = zk_connect
        self.root = root
        self.brokers: dict[int, BrokerProcess] = {}

    def start(self, broker_id: int = 1, **overrides: str) -> BrokerProcess:
        """Start the broker (again, on its own ports, if it ran before).

        A first start whose port was taken between picking and binding (an outgoing
        connection of another test worker can be given it) is made again on fresh ports:
        nobody knows the first ones yet.
        """
        broker = self.brokers.get(broker_id)
        if broker is not None:
            broker.overrides.update(overrides)
            broker.start()
            return broker
        broker = BrokerProcess(
            broker_id,
            free_port(),
            self.root / f"broker-{broker_id}",
            self.zk_connect,
            overrides={**TEST_BROKER_OVERRIDES, **overrides},
            kafka_port=free_port(),
            metrics_port=free_port(),
        )
        self.brokers[broker_id] = broker
        for _ in range(FIRST_START_ATTEMPTS - 1):
            try:
                broker.start()
                return broker
            except PortInUseError:
                broker.port, broker.kafka_port, broker.metrics_port = (
                    free_port(),
                    free_port(),
                    free_port(),
                )
        broker.start()
        return broker

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return [(b.host, b.port) for b in self.brokers.values()]

    def kafka_bootstrap(self) -> str:
        """The Kafka listeners' `host:port,host:port`, as Kafka clients take bootstrap.servers."""
        return ",".join(f"{b.host}:{b.kafka_port}" for b in self.brokers.values())

    def stop_all(self) -> None:
        for broker in self.brokers.values():
            broker.stop()


async def create_topic(
    bootstrap: list[tuple[str, int]], topic: str, partitions: int = 1, **configs: str
) -> None:
    cluster = Cluster(bootstrap)
    try:
        await Admin(cluster).create_topic(topic, partitions, 1, configs)
    finally:
        await cluster.close()


async def create(
    bootstrap: list[tuple[str, int]], topic: str, partitions: int = 1, rf: int = 3, **configs: str
) -> None:
    """Like create_topic, with a replication factor: three unless told otherwise."""
    cluster = Cluster(bootstrap)
    try:
        await Admin(cluster).create_topic(topic, partitions, rf, configs)
    finally:
        await cluster.close()


# --------------------------------------------------------------------------- clusters

FAST_REPLICATION = {"replica.lag.time.max.ms": "2000"}


@contextlib.contextmanager
def module_brokers(
    zookeeper_connect: str, root: Path, count: int = 1, **overrides: str
) -> Iterator[BrokerFactory]:
    """Brokers 1..`count` for a whole test module (a module-scoped fixture yields this),
    in a ZooKeeper chroot of their own, all stopped at the end."""
    brokers = BrokerFactory(f"{zookeeper_connect}/test-{uuid.uuid4().hex[:12]}", root)
    try:
        for broker_id in range(1, count + 1):
            brokers.start(broker_id, **overrides)
        yield brokers
    finally:
        brokers.stop_all()


def start_cluster(brokers: BrokerFactory, count: int = 3, **overrides: str) -> None:
    for broker_id in range(1, count + 1):
        brokers.start(broker_id, **{**FAST_REPLICATION, **overrides})


async def describe(bootstrap: list[tuple[str, int]], topic: str) -> list[dict[str, object]]:
    cluster = Cluster(bootstrap)
    try:
        described = await Admin(cluster).describe([topic])
        return [p.as_json() for p in described[topic]]
    finally:
        await cluster.close()


async def leadership(bootstrap: list[tuple[str, int]], topic: str) -> list[dict[str, object]]:
    """Leader, epoch, replicas and ISR per partition from metadata alone.

    Unlike describe() this asks no partition leader anything, so it cannot hang on a
    leader that is paused.
    """
    cluster = Cluster(bootstrap)
    try:
        metadata = await cluster.ensure_topic(topic)
        partitions = sorted(metadata.partitions, key=lambda p: p.partition)
        return [
            {
                "partition": p.partition,
                "leader": p.leader,
                "isr": list(p.isr),
                "replicas": list(p.replicas),
            }
            for p in partitions
        ]
    finally:
        await cluster.close()


def group_coordinator(bootstrap: list[tuple[str, int]], group_id: str) -> int:
    """The broker coordinating `group_id`: the leader of its partition of the offsets
    topic (which the group's first request created)."""
    partitions = run(leadership(bootstrap, OFFSETS_TOPIC))
    leader = partitions[offsets_partition_for(group_id, len(partitions))]["leader"]
    assert isinstance(leader, int) and leader >= 0, partitions
    return leader


async def wait_for(check, timeout_s: float = 30.0, interval_s: float = 0.2):
    """Poll an async check until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = await check()
        except ReplogError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s (last: {value!r})")
        await asyncio.sleep(interval_s)


def controller_of(zk_connect: str) -> int:
    """controller_id through a ZooKeeper connection of its own, closed after."""
    from spark_replica.zk.session import connect

    zk = connect(zk_connect)
    try:
        return controller_id(zk)
    finally:
        zk.stop()
        zk.close()


def controller_id(zk: object) -> int:
    """The current controller's broker id, waiting up to 30 s for one to be elected."""
    from brokerd.controller.zk_store import current_controller

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        controller = current_controller(zk)  # type: ignore[arg-type]
        if controller != -1:
            return controller
        time.sleep(0.1)
    raise AssertionError("no controller elected")


# --------------------------------------------------------------------------- records


async def produce(
    bootstrap: list[tuple[str, int]], topic: str, values: list[str], acks: int = -1
) -> None:
    cluster = Cluster(bootstrap)
    try:
        config = ProducerConfig(acks=acks, delivery_timeout_ms=30_000)
        await Producer(cluster, config).send_records(topic, values, partition=0)
    finally:
        await cluster.close()


async def produce_acks_all(bootstrap: list[tuple[str, int]], topic: str, partition: int) -> bool:
    """One acks=all write with a short delivery timeout; True once it is acknowledged."""
    cluster = Cluster(bootstrap)
    try:
        config = ProducerConfig(acks=-1, delivery_timeout_ms=5_000)
        await Producer(cluster, config).send_records(topic, ["x"], partition=partition)
        return True
    except ReplogError:
        return False
    finally:
        await cluster.close()


async def consume_all(
    bootstrap: list[tuple[str, int]], topic: str, expected: int, partitions: int = 1
) -> list[FetchedRecords]:
    cluster = Cluster(bootstrap)
    try:
        consumer = Consumer(cluster)
        await consumer.assign_topic(topic)
        await consumer.seek_to_beginning()
        fetched: list[FetchedRecords] = []
        seen = 0
        for _ in range(200):
            if seen >= expected:
                break
            for chunk in await consumer.poll(max_wait_ms=100):
                fetched.append(chunk)
                seen += chunk.records.num_rows
        return fetched
    finally:
        await cluster.close()


def rows_of(fetched: list[FetchedRecords]) -> list[dict[str, object]]:
    rows = []
    for chunk in fetched:
        for n, row in enumerate(chunk.records.to_pylist()):
            row["offset"] = chunk.first_offset + n
            row["partition"] = chunk.tp.partition
            rows.append(row)
    return rows


async def native_read_to_end(
    bootstrap: list[tuple[str, int]], topic: str, isolation: str, wait_s: float = 30.0
) -> tuple[list[bytes], int]:
    """Every value the native consumer reads of partition 0 up to its end offset under
    `isolation`, and that end offset (the LSO under read_committed)."""
    cluster = Cluster(bootstrap)
    try:
        consumer = Consumer(cluster, ConsumerConfig(isolation_level=isolation))
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning()
        end, _ = (await consumer.list_offsets([tp], LATEST))[tp]
        values: list[bytes] = []
        async with asyncio.timeout(wait_s):
            while consumer.position(tp) < end:
                for chunk in await consumer.poll(max_wait_ms=200):
                    values += chunk.records.column("value").to_pylist()
        return values, end
    finally:
        await cluster.close()


async def read_everything(
    bootstrap: list[tuple[str, int]], topic: str, expected: int
) -> list[dict[str, object]]:
    cluster = Cluster(bootstrap)
    try:
        consumer = Consumer(cluster)
        await consumer.assign_topic(topic)
        await consumer.seek_to_beginning()
        fetched = []
        seen = 0
        deadline = time.monotonic() + 30
        while seen < expected and time.monotonic() < deadline:
            for chunk in await consumer.poll(max_wait_ms=200):
                fetched.append(chunk)
                seen += chunk.records.num_rows
        return rows_of(fetched)
    finally:
        await cluster.close()


def replica_records(log_dir: Path) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in a partition directory, read from the files."""
    records: list[tuple[int, bytes]] = []
    for segment in sorted(log_dir.glob("*.log")):
        for header, batch in iter_batches(segment.read_bytes()):
            values = decode_payload(batch).column("value").to_pylist()
            records.extend((header.base_offset + i, v) for i, v in enumerate(values))
    return records


def assert_replicas_identical(brokers: BrokerFactory, partition_dir: str) -> None:
    """Stop every broker cleanly, then compare what each holds on disk."""
    brokers.stop_all()
    held = {b: replica_records(p.log_dir / partition_dir) for b, p in brokers.brokers.items()}
    first = next(iter(held.values()))
    assert first, "the partition holds records"
    for broker_id, records in held.items():
        assert records == first, f"broker {broker_id} differs"


# --------------------------------------------------------------------------- command line


CLI_TIMEOUT_S = 90


def replog(
    *args: str, stdin: bytes = b"", cwd: Path | None = None, timeout_s: float = CLI_TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    """Run the `replog` command line as a user would, with a deadline."""
    return subprocess.run(
        [sys.executable, "-m", "spark_replica.tools.cli.main", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=timeout_s,
        check=False,
    )


# Test clusters' port bases: above the fixed defaults a developer's own `replog up` uses,
# and low enough that every port (Kafka's at base + 10000) stays below the kernel's range
# for outgoing connections' local ports, which could take one before a broker binds it.
LOWEST_TEST_PORT_BASE = 10_000
HIGHEST_TEST_PORT_BASE = 22_000
UP_PORT_ATTEMPTS = 5


def free_port_base(brokers: int = 3, zookeeper_nodes: int = 1) -> int:
    """A `replog up --port-base` whose every port is free right now, chosen at random so
    that test workers starting clusters at once rarely pick the same."""
    for _ in range(200):
        base = random.randint(LOWEST_TEST_PORT_BASE, HIGHEST_TEST_PORT_BASE)
        plan = PortPlan(base, brokers, zookeeper_nodes)
        ports = [plan.replog(i) for i in range(1, brokers + 1)]
        ports += [plan.kafka(i) for i in range(1, brokers + 1)]
        ports += [plan.metrics(i) for i in range(1, brokers + 1)]
        ports += plan.ensemble_ports()
        if all(_bindable(port) for port in ports):
            return base
    raise AssertionError("no port base with every port free")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def replog_up(
    directory: Path,
    *args: str,
    brokers: int = 3,
    global_options: tuple[str, ...] = (),
    timeout_s: float = CLI_TIMEOUT_S,
) -> subprocess.CompletedProcess[bytes]:
    """`replog GLOBAL_OPTIONS up --dir DIRECTORY --brokers N --port-base B ARGS` on a free
    base; again on another base when a port was taken between the choice and the start
    (another test worker's cluster), which `up` refuses with exit 1 leaving nothing
    running."""
    for _ in range(UP_PORT_ATTEMPTS):
        base = free_port_base(brokers)
        result = replog(
            *global_options,
            *("up", "--dir", str(directory), "--brokers", str(brokers), "--port-base", str(base)),
            *args,
            timeout_s=timeout_s,
        )
        if result.returncode != 1 or b"--port-base" not in result.stderr:
            return result
    return result


def idempotent_header(
    record_count: int, producer_id: int, producer_epoch: int, base_sequence: int
) -> BatchHeader:
    """The header of an idempotent batch, for tests that drive the broker's producer
    state with a client's window and no bytes."""
    return BatchHeader(
        base_offset=0,
        batch_length=100,
        leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=record_count - 1,
        first_timestamp=0,
        max_timestamp=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=record_count,
    )


# --------------------------------------------------------------------------- secure cluster

SECURE_UP_TIMEOUT_S = 120


@dataclass(frozen=True)
class SecureCluster:
    """A cluster started by `replog up --security MODE`, and how its admin logs in."""

    dir: Path
    bootstrap: str  # host:port,host:port,...
    zookeeper: str
    ca_file: Path
    admin_properties: Path
    admin_security: SecurityConfig
    zk_digest: str  # USER:PASSWORD of a ZooKeeper session that may change the znodes

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return parse_bootstrap(self.bootstrap)

    def admin_cluster(self) -> Cluster:
        return Cluster(self.addresses, client_id="test-admin", security=self.admin_security)


@contextlib.contextmanager
def secure_cluster(
    directory: Path, mode: str = "sasl_ssl", brokers: int = 3
) -> Iterator[SecureCluster]:
    """`replog up --security MODE` in `directory`; `replog down` at the end whatever happens,
    then SIGKILL to any process it recorded that still runs (checked by its command line)."""
    seen: list[cluster_dir.RecordedProcess] = []

    def remember() -> None:
        if cluster_dir.exists(directory):
            info = cluster_dir.load(directory)
            seen.extend(p for p in info.processes() if p.pid is not None)

    try:
        result = replog_up(
            directory,
            *("--security", mode, "--timeout", str(SECURE_UP_TIMEOUT_S)),
            *(arg for k, v in TEST_BROKER_OVERRIDES.items() for arg in ("--override", f"{k}={v}")),
            brokers=brokers,
            timeout_s=SECURE_UP_TIMEOUT_S + 60,
        )
        remember()
        assert result.returncode == 0, result.stderr.decode()
        info = cluster_dir.load(directory)
        admin_properties = directory / cluster_dir.ADMIN_PROPERTIES
        properties = load_properties(admin_properties)
        yield SecureCluster(
            dir=directory,
            bootstrap=info.bootstrap_servers,
            zookeeper=info.zookeeper,
            ca_file=directory.resolve() / "security" / "ca.pem",
            admin_properties=admin_properties,
            admin_security=SecurityConfig.from_properties(properties),
            zk_digest=properties["zookeeper.digest"],
        )
    finally:
        remember()
        replog("down", "--dir", str(directory))
        for process in seen:
            if process.pid is not None and process.running():
                os.kill(process.pid, signal.SIGKILL)


# --------------------------------------------------------------------------- console

CONSOLE_START_TIMEOUT_S = 30.0


def http_get(url: str, path: str, method: str = "GET") -> tuple[int, str, bytes]:
    """(status, content type, body) of one request to `url` (http://host:port), no proxy."""
    import http.client
    from urllib.parse import urlsplit

    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


@contextlib.contextmanager
def running_console(*args: str) -> Iterator[str]:
    """`replog console ARGS` on a free port as a subprocess; yields its URL once it answers,
    and stops it (SIGTERM, then SIGKILL) afterwards."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spark_replica.tools.cli.main",
            "console",
            "--port",
            str(port),
            *args,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + CONSOLE_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                _, stderr = process.communicate()
                raise AssertionError(f"console exited {process.returncode}: {stderr.decode()}")
            with contextlib.suppress(OSError):
                if http_get(url, "/")[0] == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"console not serving within {CONSOLE_START_TIMEOUT_S} s")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        process.stdout.close()  # type: ignore[union-attr]
        process.stderr.close()  # type: ignore[union-attr]


# --------------------------------------------------------------------------- broker run


def run_broker_command(
    brokers: BrokerFactory, broker_id: int, log_dir: Path, *args: str
) -> BrokerProcess:
    """Start `replog broker run ARGS` as an operator would (any flags, `--config`), wait
    until broker `broker_id` (whose data are in `log_dir`) registers, and leave it to the
    factory to stop."""
    log_dir.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(broker_id, 0, log_dir, brokers.zk_connect)
    brokers.brokers[broker_id] = broker
    with (log_dir / "broker.stderr").open("ab") as stderr:
        broker.process = subprocess.Popen(
            [sys.executable, "-m", "spark_replica.tools.cli.main", "broker", "run", *args],
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            start_new_session=True,
        )
    broker.wait_registered(CLI_TIMEOUT_S)
    return broker


def kafka_broker_configs(kafka_bootstrap: str, broker_id: int) -> dict[str, str]:
    """A broker's configs as Kafka's DescribeConfigs (confluent-kafka's AdminClient) sees them."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource("broker", str(broker_id))
    described = admin.describe_configs([resource], request_timeout=30)[resource].result(timeout=30)
    return {name: entry.value for name, entry in described.items()}


# --------------------------------------------------------------------------- CLI in-process


def replog_in_process(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Like replog(), but the command line's main() runs in this process: for tests of what
    a command prints or stores, whose every call would otherwise pay about a second of
    interpreter start. An argparse error's exit status is returned as a process's would be.
    Tests of the process itself (its exit on a signal, stdin streaming) keep replog()."""
    import io

    from spark_replica.tools.cli.main import main

    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", write_through=True)
    saved_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            out.flush()
            err.flush()
    finally:
        sys.stdin = saved_stdin
    return subprocess.CompletedProcess(list(args), code, out_bytes.getvalue(), err_bytes.getvalue())


def eventually(check: Callable[[], T | None], what: str, timeout_s: float = 30.0) -> T:
    """Poll `check` every 0.3 s until it returns something true, and return that; fail
    after `timeout_s` (for checks that read a scrape or a listing, not cheap flags)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.3)


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    """Poll `condition` (a cheap, blocking check) until true; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
