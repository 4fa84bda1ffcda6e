"""One broker process: start-up, periodic housekeeping, and a clean shutdown.

Start-up order matters: logs are recovered before the listener opens, and the listener
is bound before the broker registers in ZooKeeper, so that nobody is routed to a broker
that cannot answer. Then the controller elector starts; whichever broker wins tells
this one, through LeaderAndIsr, what to lead and what to follow. Shutdown runs the other
way: stop the controller and the fetchers, deregister, stop serving, then flush every
log and write the HW checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable

from brokerd.api import BrokerContext
from brokerd.config import BrokerConfig
from brokerd.controller.controller import Controller
from brokerd.isr_writer import IsrWriter
from brokerd.replica_fetcher import ReplicaFetcherManager
from brokerd.replica_manager import ReplicaManager
from brokerd.server import RequestServer
from brokerd.zk_sync import ZooKeeperSync
from spark_replica.records import now_ms
from spark_replica.zk import znodes

logger = logging.getLogger("brokerd")


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.replicas = ReplicaManager(config)
        self.ctx = BrokerContext(config, self.replicas, ReplicaFetcherManager(config.broker_id))
        self.server = RequestServer(self.ctx, config.host, config.port, config.max_frame_bytes)
        self.stopping = asyncio.Event()
        self._zk: ZooKeeperSync | None = None
        self._controller: Controller | None = None
        self._housekeeping: list[asyncio.Task[None]] = []

    def _on_registered(self, broker_epoch: int) -> None:
        self.ctx.broker_epoch = broker_epoch

    async def start(self) -> None:
        self.replicas.load_local_logs(now_ms())
        port = await self.server.start()
        self.ctx.registration = znodes.BrokerRegistration(
            self.config.broker_id, self.config.host, port
        )
        self._zk = ZooKeeperSync(
            self.config.zookeeper,
            self.ctx.registration,
            self.replicas.delete_unassigned,
            self.replicas.creation_marker,
            self._on_registered,
            self.config.zookeeper_session_timeout_ms / 1000,
        )
        zk = await self._zk.connect()
        self.ctx.zk = zk
        self.ctx.isr_writer = IsrWriter(zk, self.config.broker_id)
        self.ctx.isr_writer.start()
        await self._zk.start()
        self._controller = Controller(self.config.broker_id, zk)
        self._controller.start()
        self._housekeeping = [
            self._every(
                self.config.hw_checkpoint_interval_ms, self.replicas.checkpoint_high_watermarks
            ),
            self._every(
                self.config.flush_check_interval_ms, lambda: self.replicas.maybe_flush(now_ms())
            ),
            self._every(
                self.config.retention_check_interval_ms,
                lambda: self.replicas.delete_expired_segments(now_ms()),
            ),
            self._every(self.config.replica_lag_time_max_ms // 2, self._shrink_isrs),
        ]
        logger.info("broker %d serving on %s:%d", self.config.broker_id, self.config.host, port)

    def _shrink_isrs(self) -> None:
        writer = self.ctx.isr_writer
        lag = self.config.replica_lag_time_max_ms
        for partition in self.replicas.propose_isr_shrinks(now_ms(), lag):
            if writer is not None:
                writer.schedule(partition)

    def _every(self, interval_ms: int, work: Callable[[], None]) -> asyncio.Task[None]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    work()
                except Exception:
                    logger.exception("housekeeping failed")

        return asyncio.create_task(loop())

    async def stop(self) -> None:
        logger.info("broker %d shutting down", self.config.broker_id)
        for task in self._housekeeping:
            task.cancel()
        if self._controller is not None:
            await self._controller.stop()
        await self.ctx.fetchers.stop()
        if self.ctx.isr_writer is not None:
            await self.ctx.isr_writer.stop()
        if self._zk is not None:
            await self._zk.stop()
        await self.server.close()
        self.replicas.close()
        logger.info("broker %d stopped", self.config.broker_id)

    async def run(self) -> None:
        """Serve until SIGTERM or SIGINT, then shut down cleanly."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stopping.set)
        await self.start()
        try:
            await self.stopping.wait()
        finally:
            with contextlib.suppress(Exception):
                await self.stop()
