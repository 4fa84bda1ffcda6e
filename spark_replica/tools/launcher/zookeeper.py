"""A real ZooKeeper server started from the jars inside the installed pyspark wheel.

Spark already needs Java 17 and ships ZooKeeper 3.9 in ``pyspark/jars``, so a user
gets a real server with nothing else to install. The server runs as a child process
with a generated ``zoo.cfg`` that binds it to loopback and switches off the admin HTTP
server (it would otherwise take port 8080 and collide between clusters); its output
goes to ``zookeeper.log`` in the data directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from spark_replica.errors import ZooKeeperError

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
PID_FILE = "zookeeper.pid"
LOG_FILE = "zookeeper.log"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


def pyspark_jars_dir() -> Path:
    """The folder of jars inside the installed pyspark wheel."""
    try:
        import pyspark
    except ImportError as exc:
        raise ZooKeeperError("pyspark is not installed: it carries the ZooKeeper jars") from exc
    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("zookeeper-*.jar")):
        raise ZooKeeperError(f"no zookeeper-*.jar in pyspark's jars folder {jars}")
    return jars


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ZooKeeperError("java is not on PATH and JAVA_HOME is not set; install Java 17")
    return found


def is_answering(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when the server answers the `ruok` four-letter word with `imok`."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


class EmbeddedZooKeeper:
    """One ZooKeeper server process; start() waits until it answers, stop() until it exits."""

    def __init__(
        self,
        port: int,
        data_dir: Path,
        host: str = "127.0.0.1",
        command_prefix: list[str] | None = None,
    ) -> None:
        if not 0 < port < 65536:
            raise ZooKeeperError(f"port {port} is not between 1 and 65535")
        self.host = host
        # What runs the server on another host (`ip netns exec NS`): it execs, so the PID
        # we hold is the server's own.
        self.command_prefix = list(command_prefix or [])
        self.port = port
        self.data_dir = Path(data_dir)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    "tickTime=500",
                    "initLimit=10",
                    "syncLimit=5",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat",
                    "maxClientCnxns=0",
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    "",
                ]
            )
        )
        return config

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        if is_answering(self.host, self.port):
            raise ZooKeeperError(f"something already answers on {self.connect_string}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "data").mkdir(exist_ok=True)
        config = self._write_config()
        self.process = spawn_server(
            MAIN_CLASS, config, self.data_dir, command_prefix=self.command_prefix
        )
        deadline = time.monotonic() + timeout_s
        while not is_answering(self.host, self.port):
            if self.process.poll() is not None:
                raise ZooKeeperError(
                    f"ZooKeeper exited with code {self.process.returncode} while starting; "
                    f"see {self.data_dir / LOG_FILE}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperError(f"ZooKeeper did not answer within {timeout_s:.0f} s")
            time.sleep(0.1)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        if self.process is None:
            return
        stop_pid(self.process.pid, timeout_s, self.process)
        self.process = None
        (self.data_dir / PID_FILE).unlink(missing_ok=True)

    def __enter__(self) -> EmbeddedZooKeeper:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def spawn_server(
    main_class: str,
    config: Path,
    run_dir: Path,
    *,
    jvm_flags: Sequence[str] = (),
    command_prefix: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start a ZooKeeper JVM from pyspark's jars, in a session of its own (so a signal to
    the caller's group does not reach it), output to `run_dir/zookeeper.log` and its PID
    in `run_dir/zookeeper.pid`, for `replog zookeeper stop` to find."""
    command = [
        *command_prefix,
        java_executable(),
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-Dzookeeper.admin.enableServer=false",
        *jvm_flags,
        "-cp",
        f"{pyspark_jars_dir()}/*",
        main_class,
        str(config),
    ]
    log = open(run_dir / LOG_FILE, "ab")  # noqa: SIM115 - handed to the child
    try:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        log.close()
    (run_dir / PID_FILE).write_text(str(process.pid))
    return process


def stop_pid(pid: int, timeout_s: float, process: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM `pid`, wait up to `timeout_s`, then SIGKILL; reaps it if it is our child."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None:
            if process.poll() is not None:
                return
        elif not _pid_alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if process is not None:
        process.wait(timeout=timeout_s)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
