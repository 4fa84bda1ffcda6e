"""One broker process: start-up, periodic housekeeping, and a clean shutdown.

Start-up order matters: logs are recovered before the listener opens, and the listener
is bound before the broker registers in ZooKeeper, so that nobody is routed to a broker
that cannot answer. Shutdown runs the other way: deregister, stop serving, then flush
every log and write the HW checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal

from brokerd.api import BrokerContext
from brokerd.cluster_view import ClusterView
from brokerd.config import BrokerConfig
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
        self.ctx = BrokerContext(config, self.replicas)
        self.server = RequestServer(self.ctx, config.host, config.port, config.max_frame_bytes)
        self.stopping = asyncio.Event()
        self._zk: ZooKeeperSync | None = None
        self._housekeeping: list[asyncio.Task[None]] = []
        self._registration: znodes.BrokerRegistration | None = None

    def _apply_view(self, view: ClusterView) -> None:
        # A serving broker is alive whatever the snapshot says (its own registration
        # may not be written yet, or the snapshot may predate it).
        if self._registration is not None:
            brokers = {**view.brokers, self.config.broker_id: self._registration}
            view = dataclasses.replace(view, brokers=brokers)
        self.ctx.view = view
        self.replicas.apply_cluster_view(view, now_ms())

    async def start(self) -> None:
        self.replicas.load_local_logs(now_ms())
        port = await self.server.start()
        self._registration = znodes.BrokerRegistration(
            self.config.broker_id, self.config.host, port
        )
        self._zk = ZooKeeperSync(
            self.config.zookeeper,
            self._registration,
            self._apply_view,
            self.config.zookeeper_session_timeout_ms / 1000,
        )
        await self._zk.start()
        self.ctx.zk = self._zk.zk
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
        ]
        logger.info("broker %d serving on %s:%d", self.config.broker_id, self.config.host, port)

    def _every(self, interval_ms: int, work) -> asyncio.Task[None]:
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
