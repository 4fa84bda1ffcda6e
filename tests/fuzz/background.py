"""What runs beside the chunks of a hostile run: the slow lane and the well-behaved client.

Both start before the first chunk and stop after the last, whatever happened between
(`stop` is called from a `finally`): the lane is an asyncio task, cancelled; the client
a process of its own, stopped by its PID. The client produces alone for a while
(BASELINE_S by default) first, so that the run's figures hold its latencies on an
unfuzzed broker on the same machine at the same time, beside those under fuzz. Their
figures go into the run's JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

from tests.fuzz.cluster import ADMIN_USER, PASSWORDS, STEADY_TOPIC, FuzzCluster
from tests.fuzz.hostile import HostileFrames
from tests.fuzz.lane import LANE_CONNECTIONS, LaneStats, run_lane
from tests.fuzz.login import KAFKA
from tests.fuzz.requests import Target
from tests.fuzz.steady import SteadyProcess

BASELINE_S = 10.0


class Background:
    def __init__(self, cluster: FuzzCluster, listener: str, target: Target, seed: int) -> None:
        broker = cluster.brokers[0]
        kafka = listener == KAFKA
        self.address = (broker.host, broker.kafka_port if kafka else broker.port)
        # The lane draws from its own generator: the chunks' frames stay a function of
        # the seed alone, whatever the lane's timing.
        self.lane_frames = HostileFrames(
            listener, target, random.Random(seed + 1), cluster.max_frame_bytes, cluster.sasl
        )
        self.lane_stats = LaneStats()
        self.lane: asyncio.Future[None] | None = None
        bootstrap = cluster.kafka_bootstrap if kafka else broker.address
        login = (ADMIN_USER, PASSWORDS[ADMIN_USER]) if cluster.sasl else None
        self.steady = SteadyProcess(
            listener, bootstrap, STEADY_TOPIC, cluster.root / "steady.log", login
        )
        self.baseline: dict[str, Any] = {}

    async def start(self, baseline_s: float) -> None:
        """The client's baseline, then the lane."""
        await asyncio.sleep(baseline_s)
        self.baseline = await asyncio.to_thread(self.steady.end_phase)
        self.lane = asyncio.ensure_future(
            run_lane(self.address, self.lane_frames, self.lane_stats, LANE_CONNECTIONS)
        )

    def retarget(self, target: Target) -> None:
        self.lane_frames.target = target

    async def stop(self) -> dict[str, Any]:
        """Cancel the lane, stop the client; both their figures."""
        if self.lane is not None:
            self.lane.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.lane
        well_behaved = await asyncio.to_thread(self.steady.stop)
        return {
            "well_behaved": well_behaved,
            "well_behaved_baseline": self.baseline,
            "slow_lane": self.lane_stats.summary(),
        }
