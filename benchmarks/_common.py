"""Shared helpers for the replog benchmark scripts (standard library only).

Every benchmark prints exactly one JSON line (``emit``). Throughput figures are also reported as
a ratio of this machine's loopback TCP throughput, measured in the same run
(``measure_limits``), so results from different machines can be compared.

Units: 1 MB = 1e6 bytes; chunk sizes are given in bytes (default 1 MiB).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

MB = 1_000_000
MIB = 1 << 20
GIB = 1 << 30

_STARTUP_TIMEOUT_S = 30.0
_IO_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 5.0


def emit(record: dict[str, object]) -> None:
    """Print ``record`` as exactly one compact JSON line on stdout (NaN/inf are rejected)."""
    sys.stdout.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
    sys.stdout.flush()


def machine_cpu_seconds() -> float:
    """CPU seconds this machine has been busy since boot, all cores, from /proc/stat.

    Busy is everything but idle and iowait; a difference over a run is the CPU time the
    run took on a machine with nothing else running.
    """
    with open("/proc/stat") as stat:
        fields = [int(field) for field in stat.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of one process so far, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Return the ``q``-th percentile (0..100) of ascending ``sorted_values``.

    Uses linear interpolation between the closest ranks (numpy's default method).
    """
    if not sorted_values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must be within [0, 100], got {q}")
    position = (len(sorted_values) - 1) * q / 100.0
    lower = math.floor(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    fraction = position - lower
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * fraction


def mb_per_s(nbytes: int, seconds: float) -> float:
    """Throughput in MB/s (1 MB = 1e6 bytes), rounded to 0.1."""
    if seconds <= 0.0:
        raise ValueError(f"elapsed time must be positive, got {seconds}")
    return round(nbytes / MB / seconds, 1)


def _receive(results: Connection, chunk_bytes: int) -> None:
    """Child process: listen on a free loopback port, count bytes until EOF, report them."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(_STARTUP_TIMEOUT_S)
        results.send(server.getsockname()[1])
        peer, _ = server.accept()
    start = time.perf_counter()
    view = memoryview(bytearray(chunk_bytes))
    total = 0
    with peer:
        peer.settimeout(_IO_TIMEOUT_S)
        while received := peer.recv_into(view):
            total += received
    results.send((total, time.perf_counter() - start))
    results.close()


def _recv_with_timeout(reader: Connection, timeout: float, what: str) -> Any:
    if not reader.poll(timeout):
        raise TimeoutError(f"loopback receiver did not send its {what} within {timeout} s")
    try:
        return reader.recv()
    except EOFError as exc:
        raise RuntimeError(f"loopback receiver exited before sending its {what}") from exc


def _stop(process: BaseProcess) -> None:
    """Join ``process``; terminate, then kill it (by its own PID) if it does not exit."""
    process.join(timeout=1.0)
    if process.is_alive():
        process.terminate()
        process.join(timeout=_STOP_TIMEOUT_S)
    if process.is_alive():
        process.kill()
        process.join(timeout=_STOP_TIMEOUT_S)


def _send_for(port: int, seconds: float, chunk_bytes: int) -> None:
    view = memoryview(bytearray(chunk_bytes))
    with socket.create_connection(("127.0.0.1", port), timeout=_IO_TIMEOUT_S) as sock:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            sock.sendall(view)
        sock.shutdown(socket.SHUT_WR)


def measure_loopback(seconds: float, chunk_bytes: int = MIB) -> float:
    """Loopback TCP throughput in MB/s between this process and a spawned receiver process.

    The sender pushes ``chunk_bytes`` chunks for ``seconds``; the figure is the receiver's
    bytes received divided by its elapsed time from accept to EOF.
    """
    context = multiprocessing.get_context("spawn")
    reader, writer = context.Pipe(duplex=False)
    receiver = context.Process(
        target=_receive, args=(writer, chunk_bytes), name="replog-loopback-receiver", daemon=True
    )
    receiver.start()
    writer.close()
    try:
        port = _recv_with_timeout(reader, _STARTUP_TIMEOUT_S, "port")
        _send_for(port, seconds, chunk_bytes)
        total, elapsed = _recv_with_timeout(reader, _IO_TIMEOUT_S, "byte count")
    finally:
        reader.close()
        _stop(receiver)
    return mb_per_s(total, elapsed)


def _write_all(fd: int, view: memoryview) -> int:
    written = 0
    while written < len(view):
        written += os.write(fd, view[written:])
    return written


def measure_disk_append(
    seconds: float, chunk_bytes: int = MIB, max_bytes: int = GIB, directory: str | None = None
) -> tuple[float, float]:
    """Sequential append throughput in MB/s: ``(without fsync, with one final fsync)``.

    Appends ``chunk_bytes`` chunks of random data with ``os.write`` to a fresh file in a
    temporary directory (under ``directory``, default the system temp dir) for ``seconds`` or
    until ``max_bytes`` are written, whichever comes first. The second figure includes one
    ``fsync`` at the end in the elapsed time. The file is deleted afterwards.
    """
    view = memoryview(os.urandom(chunk_bytes))
    with tempfile.TemporaryDirectory(prefix="replog-bench-", dir=directory) as tmp:
        path = os.path.join(tmp, "append.log")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            written = 0
            start = time.perf_counter()
            deadline = start + seconds
            while written < max_bytes and time.perf_counter() < deadline:
                written += _write_all(fd, view)
            write_elapsed = time.perf_counter() - start
            os.fsync(fd)
            fsync_elapsed = time.perf_counter() - start
        finally:
            os.close(fd)
            os.unlink(path)
    return mb_per_s(written, write_elapsed), mb_per_s(written, fsync_elapsed)


def measure_limits(
    seconds: float, chunk_bytes: int = MIB, directory: str | None = None
) -> dict[str, float | int]:
    """Measure loopback TCP and sequential disk append throughput, ``seconds`` each."""
    loopback = measure_loopback(seconds, chunk_bytes)
    append, append_fsync = measure_disk_append(seconds, chunk_bytes, directory=directory)
    return {
        "loopback_mb_per_s": loopback,
        "loopback_chunk_bytes": chunk_bytes,
        "disk_append_mb_per_s": append,
        "disk_append_fsync_mb_per_s": append_fsync,
        "disk_chunk_bytes": chunk_bytes,
    }


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def check_rows(what: str, got: int, expected: int) -> None:
    """Stop a benchmark whose run did not move every row: its figures would be wrong."""
    if got != expected:
        raise RuntimeError(f"{what} read {got} rows, {expected} were expected")
