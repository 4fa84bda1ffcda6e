"""Starting and stopping local replog processes: brokers as child processes.

Used by the demo, the tests and the benchmarks alike, so that every one of them starts
real broker processes the same way and stops each by its own PID.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from spark_replica.errors import ReplogError, TimeoutExpiredError
from spark_replica.tools.launcher.zookeeper import stop_pid
from spark_replica.zk import znodes
from spark_replica.zk.session import connect

BROKER_START_TIMEOUT_S = 60.0
BROKER_STOP_TIMEOUT_S = 30.0

log = logging.getLogger("replog.launcher")


# How a process says it could not listen (Python's asyncio, Java's BindException).
_PORT_IN_USE = re.compile(r"address already in use", re.IGNORECASE)
# How much of the end of a failed process's output is searched for that.
_OUTPUT_TAIL_BYTES = 64 * 1024


class PortInUseError(ReplogError):
    """A process could not listen: a port picked for it was taken before it bound it.
    Picking a port and binding it are two steps, so another process can come between."""


def output_since(path: Path, offset: int) -> str:
    """What a process wrote to `path` from `offset` on (its last 64 KiB), as text."""
    try:
        with path.open("rb") as output:
            end = output.seek(0, os.SEEK_END)
            start = offset if offset <= end else 0  # the file was started afresh
            output.seek(max(start, end - _OUTPUT_TAIL_BYTES))
            return output.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def says_port_in_use(output: str) -> bool:
    return _PORT_IN_USE.search(output) is not None


# Listening ports are picked below the kernel's range for outgoing connections' local
# ports: a port picked inside it can be given to some connection before the process it
# was picked for binds it (seen with two test workers starting clusters at once).
LOWEST_PICKED_PORT = 10_000
PICK_TRIES = 50
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now, chosen at random below the kernel's
    ephemeral range where there is room (else the kernel picks one)."""
    highest = _first_ephemeral_port() - 1
    for _ in range(PICK_TRIES if highest > LOWEST_PICKED_PORT else 0):
        port = random.randint(LOWEST_PICKED_PORT, highest)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _first_ephemeral_port() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    log_dir: Path
    zookeeper: str
    host: str = "127.0.0.1"
    overrides: dict[str, str] = field(default_factory=dict)
    config_file: Path | None = None  # broker configs with secrets, kept off the command line
    kafka_port: int = -1  # the Kafka-protocol listener: -1 off
    metrics_port: int = -1  # Prometheus metrics over HTTP: -1 off
    # What the broker registers and clients connect to, when not `host` (e.g. bound to
    # 0.0.0.0): every listener advertised at this host with its bound port.
    advertised_host: str | None = None
    # What runs the broker on another host, e.g. `ip netns exec NS`; it must exec, so that
    # the PID we hold is the broker's own.
    command_prefix: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    # Where this start's output begins in broker.stderr (earlier runs' output precedes it).
    stderr_offset: int = field(default=0, repr=False)

    @property
    def reachable_host(self) -> str:
        return self.host if self.advertised_host is None else self.advertised_host

    @property
    def address(self) -> str:
        return f"{self.reachable_host}:{self.port}"

    @property
    def kafka_address(self) -> str | None:
        """`host:port` of the Kafka-protocol listener, None when it is off."""
        return None if self.kafka_port < 0 else f"{self.reachable_host}:{self.kafka_port}"

    @property
    def metrics_url(self) -> str | None:
        """Where the broker serves Prometheus text, None when metrics are off."""
        return (
            None
            if self.metrics_port < 0
            else f"http://{self.reachable_host}:{self.metrics_port}/metrics"
        )

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "brokerd",
            "--broker-id",
            str(self.broker_id),
            "--port",
            str(self.port),
            "--kafka-port",
            str(self.kafka_port),
            "--metrics-port",
            str(self.metrics_port),
            "--host",
            self.host,
            "--log-dir",
            str(self.log_dir),
            "--zookeeper",
            self.zookeeper,
        ]
        if self.advertised_host is not None:
            command += ["--advertised-host", self.advertised_host]
        if self.config_file is not None:
            command += ["--config", str(self.config_file)]
        for key, value in self.overrides.items():
            command += ["--override", f"{key}={value}"]
        return command

    def start(self, timeout_s: float = BROKER_START_TIMEOUT_S) -> None:
        """Start the process and wait until it is registered in ZooKeeper.

        A broker killed a moment ago may still have its registration (until its session
        expires), so "registered" means a znode newer than the one present before start.
        """
        self.log_dir.mkdir(parents=True, exist_ok=True)
        zk = connect(self.zookeeper, create_chroot=False)
        try:
            stale = zk.exists(znodes.broker_path(self.broker_id))
        finally:
            zk.stop()
            zk.close()
        command = self.command()
        log.info("starting broker %d: %s", self.broker_id, shlex.join(command))
        stderr = open(self.log_dir / "broker.stderr", "ab")  # noqa: SIM115 - the child's
        self.stderr_offset = stderr.seek(0, os.SEEK_END)
        try:
            self.process = subprocess.Popen(
                [*self.command_prefix, *command],
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                start_new_session=True,
            )
        finally:
            stderr.close()
        self.wait_registered(timeout_s, stale_czxid=None if stale is None else stale.czxid)

    def wait_registered(self, timeout_s: float, stale_czxid: int | None = None) -> None:
        zk = connect(self.zookeeper, create_chroot=False)
        try:
            deadline = time.monotonic() + timeout_s
            path = znodes.broker_path(self.broker_id)
            while True:
                if self.process is not None and self.process.poll() is not None:
                    output = self.log_dir / "broker.stderr"
                    failure = (
                        f"broker {self.broker_id} exited with code {self.process.returncode}; "
                        f"see {output} and broker.log"
                    )
                    if says_port_in_use(output_since(output, self.stderr_offset)):
                        raise PortInUseError(f"{failure} (a port it was given is in use)")
                    raise ReplogError(failure)
                stat = zk.exists(path)
                if stat is not None and stat.czxid != stale_czxid:
                    log.info("broker %d registered in ZooKeeper", self.broker_id)
                    return
                if time.monotonic() > deadline:
                    raise TimeoutExpiredError(
                        f"broker {self.broker_id} did not register within {timeout_s:.0f} s"
                    )
                time.sleep(0.05)
        finally:
            zk.stop()
            zk.close()

    def stop(self, timeout_s: float = BROKER_STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (clean shutdown), SIGKILL after the timeout; return the exit code."""
        if self.process is None:
            return None
        stop_pid(self.process.pid, timeout_s, self.process)
        code = self.process.wait(timeout=timeout_s)
        self.process = None
        return code

    def pause(self) -> None:
        """SIGSTOP: the process stays, but does nothing (a long GC pause, a frozen VM)."""
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown work at all."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=BROKER_STOP_TIMEOUT_S)
        self.process = None
