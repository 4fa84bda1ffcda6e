"""The asyncio event loop a broker runs on: uvloop (libuv under asyncio's API) or
asyncio's own.

Measured on this project's benchmarks (docs/performance.md), a broker on uvloop:
- over SASL_SSL, produces 1.62 M records/s acks=all RF 3 where asyncio's loop does 1.17 M:
  uvloop's TLS moves about twice the bytes per CPU second (asyncio's copies every byte
  through ssl.MemoryBIO objects);
- serves Spark's reads for half the CPU;
- but over plaintext, produces acks=all RF 3 at 2.3 M records/s where asyncio's loop
  does 2.6 to 3.3 M (the same CPU per MB: the replication round trips take longer).
So a broker with a TLS listener runs on uvloop, one without on asyncio's loop, unless
told otherwise: by the broker's --event-loop flag, else REPLOG_EVENT_LOOP in the
environment (which the brokers a launcher starts inherit).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

from spark_replica.errors import ConfigError

T = TypeVar("T")

ENVIRONMENT_VARIABLE = "REPLOG_EVENT_LOOP"
UVLOOP = "uvloop"
ASYNCIO = "asyncio"
EVENT_LOOPS = (UVLOOP, ASYNCIO)


def broker_default(uses_tls: bool) -> str:
    """The loop a broker runs on when not told: the faster one for its listener."""
    return UVLOOP if uses_tls else ASYNCIO


def chosen(name: str | None = None, default: str = ASYNCIO) -> str:
    """The loop to make: `name` if given, else the environment's choice, else `default`."""
    choice = name or os.environ.get(ENVIRONMENT_VARIABLE) or default
    if choice not in EVENT_LOOPS:
        raise ConfigError(
            f"event loop {choice!r} (from {ENVIRONMENT_VARIABLE} or --event-loop): "
            f"use one of {', '.join(EVENT_LOOPS)}"
        )
    return choice


def new_event_loop(name: str | None = None) -> asyncio.AbstractEventLoop:
    """A new event loop of the chosen kind."""
    if chosen(name) == UVLOOP:
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T], name: str | None = None) -> T:
    """asyncio.run(main) on a new loop of the chosen kind."""
    with asyncio.Runner(loop_factory=lambda: new_event_loop(name)) as runner:
        return runner.run(main)
