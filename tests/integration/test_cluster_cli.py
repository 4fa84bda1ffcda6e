"""`replog up|status|down|broker` against real processes, in a cluster directory of a test's own.

Each test stops what it started: `replog down`, then SIGKILL to any recorded PID that
still runs (checked against its command line, so no unrelated process is signalled).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_replica.tools.launcher import cluster_dir
from spark_replica.tools.launcher.zookeeper import is_answering
from tests.support import replog, replog_in_process, replog_up

pytestmark = pytest.mark.slow

# Short, so that a SIGKILLed broker's registration goes away quickly on restart.
OVERRIDE = ("--override", "zookeeper.session.timeout.ms=3000")


def status(directory: Path) -> dict:
    result = replog("status", "--json", "--dir", str(directory))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def alive(directory: Path) -> dict[int, bool]:
    return {b["id"]: b["alive"] for b in status(directory)["brokers"]}


class LocalCluster:
    """Runs `replog up` on a directory and remembers every process it ever recorded."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.seen: list[cluster_dir.RecordedProcess] = []

    def up(self, brokers: int) -> None:
        result = replog_up(self.directory, *OVERRIDE, brokers=brokers)
        self.remember()
        assert result.returncode == 0, result.stderr

    def remember(self) -> None:
        if cluster_dir.exists(self.directory):
            info = cluster_dir.load(self.directory)
            self.seen += [p for p in [*info.brokers, info.embedded_zookeeper] if p and p.pid]

    def stop_everything(self) -> None:
        self.remember()
        replog("down", "--dir", str(self.directory))
        for process in self.seen:
            if process.running() and process.pid is not None:
                os.kill(process.pid, signal.SIGKILL)


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / ".replog")
    try:
        yield cluster
    finally:
        cluster.stop_everything()


def test_up_status_kill_start_down_and_up_again(local_cluster: LocalCluster) -> None:
    directory = local_cluster.directory
    cwd = directory.parent  # commands without --dir find ./.replog from here
    local_cluster.up(3)

    document = status(directory)
    info = cluster_dir.load(directory)
    addresses = [f"127.0.0.1:{b.port}" for b in info.brokers]
    kafka_addresses = [f"127.0.0.1:{b.kafka_port}" for b in info.brokers]
    assert document == {
        "zookeeper": info.zookeeper,
        "bootstrap_servers": ",".join(addresses),
        "kafka_bootstrap_servers": ",".join(kafka_addresses),
        "controller": document["controller"],
        "brokers": [
            {
                "id": b.id,
                "host": "127.0.0.1",
                "port": b.port,
                "kafka_port": b.kafka_port,
                "metrics_url": f"http://127.0.0.1:{b.metrics_port}/metrics",
                "pid": b.pid,
                "alive": True,
            }
            for b in info.brokers
        ],
    }
    assert all(b.kafka_port > 0 for b in info.brokers)
    assert [b.id for b in info.brokers] == [1, 2, 3]
    assert document["controller"] in (1, 2, 3)
    table = replog("status", cwd=cwd)
    assert table.returncode == 0 and b"Controller:" in table.stdout
    assert all(address.encode() in table.stdout for address in addresses)
    for what, expected in (
        ("bootstrap", ",".join(addresses)),
        ("kafka-bootstrap", ",".join(kafka_addresses)),
        ("zookeeper", info.zookeeper),
    ):
        got = replog("status", "--get", what, cwd=cwd)
        assert got.returncode == 0 and got.stdout.decode().strip() == expected
    no_groups = replog("groups", "list", cwd=cwd)
    assert no_groups.returncode == 0 and no_groups.stdout == b"", no_groups.stderr
    twice = replog("up", "--dir", str(directory))
    assert twice.returncode == 2 and b"still running" in twice.stderr

    assert replog("topics", "create", "events", "--partitions", "3", cwd=cwd).returncode == 0
    lines = b"".join(f"k{i}:value {i}\n".encode() for i in range(30))
    produced = replog("produce", "events", "--key-separator", ":", cwd=cwd, stdin=lines)
    assert produced.returncode == 0, produced.stderr
    consume = ("consume", "events", "--from-beginning", "--max-records", "30", "--print-key")
    consume += ("--key-separator", ":", "--dir", str(directory))
    consumed = replog(*consume)
    assert sorted(consumed.stdout.splitlines()) == sorted(lines.splitlines()), consumed.stderr

    killed = replog("broker", "kill", "2", cwd=cwd)
    assert killed.returncode == 0, killed.stderr
    assert alive(directory) == {1: True, 2: False, 3: True}
    again = replog("broker", "stop", "2", cwd=cwd)
    assert again.returncode == 2 and b"broker 2 of the cluster in" in again.stderr
    assert b"is not running" in again.stderr
    started = replog("broker", "start", "2", cwd=cwd)
    assert started.returncode == 0, started.stderr
    local_cluster.remember()
    assert alive(directory) == {1: True, 2: True, 3: True}
    running = replog("broker", "start", "2", cwd=cwd)
    assert running.returncode == 2 and b"already running" in running.stderr
    unknown = replog("broker", "stop", "9", cwd=cwd)
    assert unknown.returncode == 2 and b"no broker 9" in unknown.stderr
    assert b"(brokers: 1, 2, 3)" in unknown.stderr

    pids = [b.pid for b in cluster_dir.load(directory).brokers]
    zookeeper_port = cluster_dir.load(directory).embedded_zookeeper.port
    down = replog("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert not any(_pid_exists(pid) for pid in pids if pid is not None)
    assert not is_answering("127.0.0.1", zookeeper_port)
    assert replog("down", cwd=cwd).stdout.startswith(b"Nothing was running")
    stopped = status(directory)
    assert stopped["controller"] == -1 and not any(b["alive"] for b in stopped["brokers"])
    not_running = replog("topics", "list", cwd=cwd)
    assert not_running.returncode == 2 and b"is not running" in not_running.stderr

    local_cluster.up(3)
    assert alive(directory) == {1: True, 2: True, 3: True}
    consumed = replog(*consume)
    assert sorted(consumed.stdout.splitlines()) == sorted(lines.splitlines()), consumed.stderr


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rpartition(")")[2].split()[0] != "Z"


def test_commands_without_a_cluster_say_what_to_do(tmp_path: Path) -> None:
    """Each refusal through the command line's main() in this process (they start nothing,
    and an interpreter for each would cost a second); `broker run`, which would start a
    broker if its config were good, as a process."""
    empty = str(tmp_path / "nothing-here")
    for command in (
        ("status", "--dir", empty),
        ("down", "--dir", empty),
        ("broker", "start", "1", "--dir", empty),
        ("topics", "list", "--dir", empty),
        ("consume", "t", "--dir", empty),
    ):
        result = replog_in_process(*command)
        assert result.returncode == 2, command
        assert f"no cluster in {empty}: run `replog up --dir {empty}`".encode() in result.stderr
        assert b"--bootstrap/--zookeeper" in result.stderr
    both = replog_in_process("topics", "list", "--dir", empty, "--bootstrap", "127.0.0.1:1")
    assert both.returncode == 2 and b"not allowed with" in both.stderr
    no_brokers = replog_in_process("up", "--brokers", "0", "--dir", empty)
    assert no_brokers.returncode == 2 and b"--brokers must be at least 1" in no_brokers.stderr
    no_time = replog_in_process("up", "--timeout", "0", "--dir", empty)
    assert no_time.returncode == 2 and b"--timeout: must be a positive number" in no_time.stderr

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / cluster_dir.CLUSTER_FILE).write_text("{not json")
    unreadable = replog_in_process("status", "--dir", str(broken))
    assert unreadable.returncode == 2 and b"not a readable replog cluster file" in unreadable.stderr

    bad_config = replog(
        "broker", "run", "--broker-id", "1", "--log-dir", str(tmp_path / "b"), "--zookeeper",
        "127.0.0.1:1", "--override", "log.segment.bytes=lots",
    )  # fmt: skip
    assert bad_config.returncode == 2 and b"log.segment.bytes" in bad_config.stderr
