"""The slow lane: a few connections at a time, each holding one hostile case open.

The cases here need time, not throughput: a frame trickled a byte at a time, a declared
size of nearly the limit and then silence, and with SASL the requests sent before login.
Each case gets a fresh connection, sends its prelude, trickles the rest (one byte per
TRICKLE_S), and is held until the broker closes it or HOLD_S has passed; whatever the
broker answers is read and dropped. Both ends are fine; what the run reports is how
many the broker closed and how fast, and (driver.py) what holding them did to the
broker's memory and to a well-behaved client's latency. The lane runs beside the
chunks for the whole run and is cancelled at its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.fuzz.hostile import HostileFrames, LaneCase

LANE_CONNECTIONS = 6
TRICKLE_S = 0.25
HOLD_S = 20.0
CONNECT_TIMEOUT_S = 5.0
RETRY_S = 1.0


@dataclass
class LaneStats:
    cases: Counter[str] = field(default_factory=Counter)
    # Cases that ran their course (closed or held to HOLD_S), not cut by the run's end.
    finished: Counter[str] = field(default_factory=Counter)
    closed_by_broker: Counter[str] = field(default_factory=Counter)
    answered: Counter[str] = field(default_factory=Counter)
    close_seconds: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Per case name: cases, closed by the broker, answered; and close times."""
        ordered = sorted(self.close_seconds)
        return {
            "cases": sum(self.cases.values()),
            "closed_by_broker": sum(self.closed_by_broker.values()),
            "close_p50_s": _quantile(ordered, 0.5),
            "close_max_s": round(ordered[-1], 2) if ordered else None,
            "by_case": {
                name: {
                    "cases": count,
                    "finished": self.finished[name],
                    "closed_by_broker": self.closed_by_broker[name],
                    "answered": self.answered[name],
                }
                for name, count in sorted(self.cases.items())
            },
        }


def _quantile(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


async def run_lane(
    address: tuple[str, int], hostile: HostileFrames, stats: LaneStats, connections: int
) -> None:
    """Hold `connections` hostile cases open at a time until cancelled."""
    await asyncio.gather(*(_lane_loop(address, hostile, stats) for _ in range(connections)))


async def _lane_loop(address: tuple[str, int], hostile: HostileFrames, stats: LaneStats) -> None:
    while True:
        case = hostile.lane_case()
        if not await _hold(address, case, stats):
            await asyncio.sleep(RETRY_S)  # the broker is down or restarting


async def _hold(address: tuple[str, int], case: LaneCase, stats: LaneStats) -> bool:
    """One case on its own connection; False when the broker could not be reached."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(*address), CONNECT_TIMEOUT_S
        )
    except (OSError, TimeoutError):
        return False
    stats.cases[case.name] += 1
    started = time.monotonic()
    received: list[int] = [0]
    answers = asyncio.ensure_future(_read_until_closed(reader, received))
    try:
        async with asyncio.timeout(HOLD_S):
            writer.write(case.prelude)
            await writer.drain()
            for byte in case.trickle:
                if answers.done():
                    break
                writer.write(bytes((byte,)))
                await writer.drain()
                await asyncio.wait({answers}, timeout=TRICKLE_S)
            await asyncio.wait({answers})
    except (TimeoutError, OSError):
        pass  # held to the end, or the broker closed while we wrote
    finally:
        writer.close()
        if not answers.done():
            answers.cancel()
    stats.finished[case.name] += 1
    with contextlib.suppress(asyncio.CancelledError):
        await answers
        stats.closed_by_broker[case.name] += 1
        stats.close_seconds.append(time.monotonic() - started)
    if received[0]:
        stats.answered[case.name] += 1
    return True


async def _read_until_closed(reader: asyncio.StreamReader, received: list[int]) -> None:
    """Until the broker closes the connection, adding what it sends to `received[0]`
    (read when the case ends, whether the broker closed or the lane gave up)."""
    try:
        while chunk := await reader.read(1 << 16):
            received[0] += len(chunk)
    except OSError:
        pass
