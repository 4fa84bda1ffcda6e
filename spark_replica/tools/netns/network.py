"""Making, cutting, healing and removing a network of hosts: runs the commands that
topology.py plans. Needs root and iproute2 (`ip`, `tc`); `unavailable_reason` says why
not before anything is created.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import random
import secrets
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from spark_replica.errors import NetnsUnavailableError, NetworkSetupError
from spark_replica.tools.netns.topology import (
    NAMESPACE_PREFIX,
    Cut,
    Topology,
    free_subnet,
    plan_topology,
    subnets_in_use,
)

COMMAND_TIMEOUT_S = 15.0
log = logging.getLogger("replog.netns")


@functools.cache
def unavailable_reason() -> str | None:
    """Why this machine cannot make network namespaces for us, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root: run as root (or with sudo)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (it comes with iproute2)"
    probe = f"{NAMESPACE_PREFIX}probe-{os.getpid()}"
    made = _run_unchecked(["ip", "netns", "add", probe])
    if made.returncode != 0:
        return f"the kernel refused a network namespace: {made.stderr.strip()}"
    _run_unchecked(["ip", "netns", "del", probe])
    return None


def require() -> None:
    reason = unavailable_reason()
    if reason is not None:
        raise NetnsUnavailableError(reason)


def create_network(
    broker_ids: Iterable[int], *, zookeeper: bool = True, preferred_subnet: int | None = None
) -> Topology:
    """A new network with its own subnet (`preferred_subnet` if free: a cluster made again
    keeps its addresses); on any failure, whatever was made is removed."""
    require()
    with _subnet_lock():
        used = subnets_in_use(run(["ip", "-o", "-4", "addr", "show"]))
        preferred = random.randrange(256) if preferred_subnet is None else preferred_subnet
        subnet = free_subnet(used, preferred=preferred)
        topology = plan_topology(secrets.token_hex(3), subnet, broker_ids, zookeeper=zookeeper)
        try:
            for command in topology.setup_commands():
                run(command)
        except BaseException:
            destroy_network(topology)
            raise
    log.info("network %s made on %s.0/24", topology.tag, topology.gateway.rsplit(".", 1)[0])
    return topology


def destroy_network(topology: Topology) -> None:
    """Remove every namespace and the bridge; what is already gone is no error."""
    for command in topology.teardown_commands():
        _run_unchecked(command)


def apply_cuts(topology: Topology, cuts: Iterable[Cut]) -> None:
    for cut in cuts:
        for command in topology.cut_commands(cut):
            run(command)


def heal(topology: Topology) -> None:
    """Every cut of the network undone (a link with no cut on it is no error)."""
    for command in topology.heal_commands():
        _run_unchecked(command)


def leftover_namespaces() -> list[str]:
    """Namespaces of replog networks on this machine (a crashed run's, say)."""
    listed = _run_unchecked(["ip", "netns", "list"])
    names = [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    return [name for name in names if name.startswith(NAMESPACE_PREFIX)]


def run(command: list[str]) -> str:
    completed = _run_unchecked(command)
    if completed.returncode != 0:
        raise NetworkSetupError(
            f"`{shlex.join(command)}` failed (exit {completed.returncode}): "
            f"{completed.stderr.strip() or completed.stdout.strip()}"
        )
    return completed.stdout


def _run_unchecked(command: list[str]) -> subprocess.CompletedProcess[str]:
    log.debug("running %s", shlex.join(command))
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkSetupError(f"`{shlex.join(command)}` could not run: {exc}") from exc


@contextlib.contextmanager
def _subnet_lock() -> Iterator[None]:
    """Two networks made at once must not pick the same subnet."""
    path = Path(tempfile.gettempdir()) / "replog-netns.lock"
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
