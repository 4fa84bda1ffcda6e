"""Cleanings run in worker processes of the broker's own, not on its threads.

A cleaning is CPU-bound Python (every record's key is looked at and planned). On a
thread it shares the broker's interpreter lock with the event loop: measured with
benchmarks/compaction.py, producers to the same broker kept 0.31-0.65 of their rate
while it cleaned, and throttling the cleaner did not help. In a process of its own a
cleaning shares only the cores.

A worker must never outlive its broker: a broker killed mid-cleaning restarts, removes
the `.cleaned` files no manifest names and may start the same cleaning again, so a
worker still writing the old cleaning's files would write into the new one's. Each
worker asks the kernel to kill it when its parent dies (Linux's PR_SET_PDEATHSIG), then
checks that its parent is still the broker that started it (it may have died between the
fork and that request).

The workers run at a lower priority (nice CLEANER_NICENESS): where cores are few, a
cleaning, which may wait, must not take CPU from the broker's event loop, which serves
producers and followers now. The kernel still gives an idle core to the cleaner whole.

The broker stops cleanings with one event shared with every worker (a cleaning checks it
between segments); the workers are started with "spawn", as forking a process with
ZooKeeper's and the executors' threads running is not safe.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.synchronize import Event

from brokerd.log.cleaner import CleaningJob, CleaningResult, IoThrottle, clean

_PR_SET_PDEATHSIG = 1
# Added to the broker's niceness: the scheduler then weighs a worker about a tenth of it.
CLEANER_NICENESS = 10
# The broker's stop event, as this worker inherited it.
_stop: Event | None = None


def _start_worker(parent: int, stop: Event) -> None:
    global _stop
    _stop = stop
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)
    os.nice(CLEANER_NICENESS)


def clean_in_worker(job: CleaningJob, max_keys: int, io_bytes_per_second: float) -> CleaningResult:
    """`cleaner.clean` in a worker, throttled there and stopped by the broker's event."""
    return clean(job, max_keys, IoThrottle(io_bytes_per_second), _stop)


def cleaner_pool(workers: int) -> tuple[ProcessPoolExecutor, Event]:
    """A pool of `workers` cleaner processes, and the event that stops their cleanings."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=(os.getpid(), stop)
    )
    return pool, stop
