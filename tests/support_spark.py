"""A Spark standalone cluster (one master, N workers) started from the pyspark wheel.

The pyspark wheel ships Spark's jars and ``bin/spark-class``, so a real cluster needs
nothing beyond the package: the master and each worker are JVMs run as child processes,
and a ``spark-submit --master spark://...`` driver asks the workers for executors, which
start Python workers of their own. That is how a pipeline runs on a real cluster, where
``local[N]`` keeps everything in one process.

Each daemon starts in a session of its own (its PID is the session id), and executors and
their Python workers stay in their worker's session. So what a cluster leaves behind is
exactly the processes still in those sessions (`session_members`): stopping a worker
lets its shutdown hook stop its executors, and `stop` reports and kills any that remain.
Nothing here is specific to replog; the tests and the README's recipe use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_replica.errors import ReplogError, TimeoutExpiredError
from spark_replica.tools.launcher.brokers import free_port
from spark_replica.tools.launcher.zookeeper import stop_pid

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
# Heap of the master and worker daemons themselves; executors get spark.executor.memory.
DAEMON_MEMORY = "256m"
# The daemons only coordinate: the C1 compiler alone starts faster, one GC thread is enough.
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
POLL_INTERVAL_S = 0.2


def spark_home() -> Path:
    """The installed pyspark package, which is a complete SPARK_HOME (bin/, jars/)."""
    try:
        import pyspark
    except ImportError as exc:
        raise ReplogError("pyspark is not installed: it carries Spark's jars") from exc
    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists():
        raise ReplogError(f"no bin/spark-class in the pyspark package at {home}")
    return home


def spark_environment(host: str, local_dir: Path) -> dict[str, str]:
    """The environment for Spark's launch scripts: where Spark is, what to bind, scratch.

    SPARK_HOME spares the scripts their search for pyspark with whatever `python3` is on
    PATH; SPARK_LOCAL_DIRS keeps shuffle and block files (the executors' too, which a
    worker places under its own local dirs) in the directory given.
    """
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": host,
        "SPARK_LOCAL_DIRS": str(local_dir),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_DAEMON_JAVA_OPTS": DAEMON_JAVA_OPTS,
    }


def session_members(session_ids: Iterable[int]) -> list[int]:
    """PIDs of the live processes whose session is one of `session_ids`."""
    wanted = set(session_ids)
    listing = subprocess.run(
        ["ps", "-e", "-o", "pid=,sid=,stat="], capture_output=True, text=True, check=True
    ).stdout
    members = []
    for line in listing.splitlines():
        pid, sid, state = line.split(maxsplit=2)
        if int(sid) in wanted and not state.startswith("Z"):
            members.append(int(pid))
    return sorted(members)


def _spawn(command: list[str], env: dict[str, str], log_file: Path) -> subprocess.Popen[bytes]:
    log = open(log_file, "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    finally:
        log.close()


@dataclass
class StandaloneCluster:
    """A master and `workers` workers on `host`, every file under `root`."""

    root: Path
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    host: str = "127.0.0.1"
    master_port: int = field(default_factory=free_port)
    master_webui_port: int = field(default_factory=free_port)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://{self.host}:{self.master_webui_port}"

    @property
    def session_ids(self) -> list[int]:
        """One per daemon started: their executors and Python workers share them."""
        return [process.pid for process in self.processes.values()]

    def worker_dir(self, index: int) -> Path:
        """Worker `index`'s --work-dir: one app-*/<executor id>/ folder per executor."""
        return self.root / f"worker-{index}" / "work"

    def status(self) -> dict[str, Any]:
        """The master's own view of the cluster (its web UI's /json/)."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as answer:
            status: dict[str, Any] = json.load(answer)
            return status

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the master, then the workers; return once every worker is registered."""
        deadline = time.monotonic() + timeout_s
        try:
            self._start_daemon(
                "master",
                [MASTER_CLASS, "--host", self.host, "--port", str(self.master_port),
                 "--webui-port", str(self.master_webui_port)],
            )  # fmt: skip
            self._wait(deadline, lambda status: status.get("status") == "ALIVE", "master")
            for index in range(1, self.workers + 1):
                self._start_daemon(
                    f"worker-{index}",
                    [WORKER_CLASS, self.master_url, "--host", self.host,
                     "--port", str(free_port(self.host)),
                     "--webui-port", str(free_port(self.host)),
                     "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                     "--work-dir", str(self.worker_dir(index))],
                )  # fmt: skip
            self._wait(
                deadline,
                lambda status: status.get("aliveworkers") == self.workers,
                f"{self.workers} workers",
            )
        except BaseException:
            self.stop()
            raise

    def _start_daemon(self, name: str, arguments: list[str]) -> None:
        home = self.root / name
        (home / "local").mkdir(parents=True, exist_ok=True)
        command = [str(spark_home() / "bin" / "spark-class"), *arguments]
        env = spark_environment(self.host, home / "local")
        self.processes[name] = _spawn(command, env, home / "daemon.log")

    def _wait(self, deadline: float, ready: Callable[[dict[str, Any]], bool], what: str) -> None:
        while True:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise ReplogError(
                        f"Spark {name} exited with code {process.returncode}; "
                        f"see {self.root / name / 'daemon.log'}"
                    )
            with contextlib.suppress(OSError, ValueError):
                if ready(self.status()):
                    return
            if time.monotonic() > deadline:
                raise TimeoutExpiredError(f"Spark {what} not up at {self.webui_url} in time")
            time.sleep(POLL_INTERVAL_S)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
        """Stop the master, then the workers; return the PIDs left that had to be killed.

        The master goes first so that it cannot place a replacement executor on one worker
        while another stops. A worker stopped by SIGTERM stops its executors first, so the
        list is empty unless something (an executor, a Python worker) outlived its daemon.
        """
        sessions = self.session_ids
        for name in list(self.processes):
            process = self.processes.pop(name)
            stop_pid(process.pid, timeout_s, process)
        leftovers = session_members(sessions)
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return leftovers

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
