"""One broker process: start-up, periodic housekeeping, and a clean shutdown.

Start-up order matters: logs are recovered before the listeners open (replog's, and
Kafka's when kafka_port is not -1, and the metrics' HTTP one when metrics_port is not
-1), and all are bound before the broker registers in ZooKeeper, so that nobody is
routed to a broker that cannot answer. It registers each listener's advertised address
(brokerd.listeners), with the ports really bound.
Then the controller elector starts; whichever broker wins tells this one, through
LeaderAndIsr, what to lead and what to follow. Shutdown runs the other way: stop the
controller and the fetchers, deregister, stop the group and transaction coordinators
(clients move to the next ones), stop serving, then flush every log and write the HW
checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable

from brokerd.broker_gauges import (
    BrokerStateCollector,
    ConsumerGroupCollector,
    LogCleanerCollector,
)
from brokerd.config.broker import BrokerConfig
from brokerd.config.listeners import KAFKA, METRICS, REPLOG, Endpoint, advertise
from brokerd.controller.controller import Controller, RebalanceSettings
from brokerd.controller.zk_store import current_controller
from brokerd.core.authorization import load_acls_into
from brokerd.core.context import BrokerContext
from brokerd.core.producer_ids import allocate_producer_id
from brokerd.core.txn_marker_sender import TxnMarkerSender
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.groups.remote_watermarks import REFRESH_MS as GROUP_LAG_REFRESH_MS
from brokerd.groups.remote_watermarks import RemoteHighWatermarks
from brokerd.kafka.dialect import KafkaDialect
from brokerd.metrics import (
    KAFKA_LISTENER,
    REPLOG_LISTENER,
    BrokerMetrics,
    MetricsServer,
)
from brokerd.native.dialect import NativeDialect
from brokerd.replication.isr_writer import IsrWriter
from brokerd.replication.log_cleaner import LogCleaner
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from brokerd.replication.topic_configs import TopicConfigFollower
from brokerd.serving.dispatch import Dispatch
from brokerd.serving.host_addresses import reachable_host
from brokerd.serving.server import Logins, RequestServer
from brokerd.transactions.coordinator import TransactionCoordinator
from brokerd.transactions.marker_writer import MarkerWriter
from brokerd.transactions.state_manager import TransactionStateManager
from brokerd.zk_sync import ZooKeeperSync
from spark_replica.client.connection import BrokerConnection
from spark_replica.errors import NotControllerError, ReplogError
from spark_replica.records import now_ms
from spark_replica.security.acl import Authorizer
from spark_replica.wire.native.controlled_shutdown import ControlledShutdownRequest
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.security_store import AclChangeWatcher

logger = logging.getLogger("brokerd")

CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0
SHUTDOWN_STEP_TIMEOUT_S = 5.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.metrics = BrokerMetrics()
        self.replicas = ReplicaManager(config, self.metrics)
        self._cleaner: LogCleaner | None = None
        security = config.security
        self.ctx = BrokerContext(
            config,
            self.replicas,
            ReplicaFetcherManager(config.broker_id, security.inter_broker()),
        )
        if security.authorizer:
            # Set before the listener opens: until the ACLs are read every request is
            # refused, except the super users'.
            self.ctx.authorizer = Authorizer(
                security.super_users, security.allow_everyone_if_no_acl_found
            )
        self._acl_watcher: AclChangeWatcher | None = None
        self.logins = Logins(self.ctx, self.metrics.request_errors)
        binds = config.bind_endpoints()
        self.kafka_server: RequestServer | None = None
        # The consumer groups and the transactional ids this broker coordinates, for
        # both listeners; None while the Kafka listener is off.
        self.groups: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None
        # Sends the coordinator's markers to the leaders on other brokers.
        self._marker_sender = TxnMarkerSender.of_broker(self.ctx)
        if KAFKA in binds:
            self.groups = GroupCoordinator(self.ctx)
            self.transactions = self._transaction_coordinator()
        self.server = RequestServer(
            self.ctx,
            config.host,
            config.port,
            config.max_frame_bytes,
            Dispatch(
                NativeDialect(self.ctx, self.logins, self.groups, self.transactions),
                self.logins,
                self.metrics.request_errors,
            ),
            self.metrics.listener(REPLOG_LISTENER),
        )
        if KAFKA in binds:
            self.kafka_server = RequestServer(
                self.ctx,
                binds[KAFKA].host,
                binds[KAFKA].port,
                config.max_frame_bytes,
                Dispatch(
                    KafkaDialect(self.ctx, self.logins, self.groups, self.transactions),
                    self.logins,
                    self.metrics.request_errors,
                ),
                self.metrics.listener(KAFKA_LISTENER),
            )
        self.metrics_server: MetricsServer | None = None
        # High watermarks for the lag of the groups coordinated here (metrics only).
        self._group_watermarks: RemoteHighWatermarks | None = None
        if METRICS in binds:
            self.metrics.registry.register(
                BrokerStateCollector(
                    self.replicas,
                    self.ctx.fetchers,
                    lambda: self._controller,
                    lambda: self.metrics.zookeeper_state,
                )
            )
            self.metrics.registry.register(LogCleanerCollector(lambda: self._cleaner))
            if self.groups is not None:
                self._group_watermarks = RemoteHighWatermarks(
                    self.ctx, self.groups.committed_partitions
                )
                self.metrics.registry.register(
                    ConsumerGroupCollector(self.groups, self.replicas, self._group_watermarks)
                )
            self.metrics_server = MetricsServer(
                self.metrics.registry,
                binds[METRICS].host,
                binds[METRICS].port,
                config.metrics_access,
            )
        self.stopping = asyncio.Event()
        self._zk: ZooKeeperSync | None = None
        self._controller: Controller | None = None
        self._topic_configs: TopicConfigFollower | None = None
        self._housekeeping: list[asyncio.Task[None]] = []

    def _transaction_coordinator(self) -> TransactionCoordinator:
        ctx = self.ctx
        writer = MarkerWriter(ctx, self._marker_sender.send_markers)
        state = TransactionStateManager(ctx, writer, now_ms)
        return TransactionCoordinator(ctx, state, lambda: allocate_producer_id(ctx), now_ms)

    def _on_registered(self, broker_epoch: int) -> None:
        self.ctx.broker_epoch = broker_epoch

    async def start(self) -> None:
        self.replicas.load_local_logs(now_ms())
        binds = self.config.bind_endpoints()
        bound = {REPLOG: Endpoint(binds[REPLOG].host, await self.server.start())}
        if self.kafka_server is not None:
            bound[KAFKA] = Endpoint(binds[KAFKA].host, await self.kafka_server.start())
        if self.metrics_server is not None:
            bound[METRICS] = Endpoint(binds[METRICS].host, await self.metrics_server.start())
        advertised = advertise(
            bound, self.config.advertised_listeners, self.config.advertised_host, reachable_host
        )
        self.ctx.registration = self._registration(advertised)
        self._zk = ZooKeeperSync(
            self.config.zookeeper,
            self.ctx.registration,
            self.replicas.delete_unassigned,
            self.replicas.creation_marker,
            self._on_registered,
            self.config.zookeeper_session_timeout_ms / 1000,
            self.config.security.zookeeper_login,
            self.metrics.zookeeper_state_changed,
        )
        zk = await self._zk.connect()
        self.ctx.zk = zk
        if self.groups is not None:
            await self.groups.start()
        if self.transactions is not None:
            self.transactions.start()
        if self.ctx.authorizer is not None:
            self._acl_watcher = AclChangeWatcher(zk, self._reload_acls)
            await asyncio.to_thread(self._acl_watcher.start)
        self.ctx.isr_writer = IsrWriter(zk, self.config.broker_id, self.metrics)
        self.ctx.isr_writer.start()
        # Before registering: recovered partitions get their topic's config before they
        # can be asked to lead.
        self._topic_configs = TopicConfigFollower(zk, self.replicas)
        await self._topic_configs.start()
        await self._zk.start()
        rebalance = RebalanceSettings(
            self.config.auto_leader_rebalance_enable,
            self.config.leader_imbalance_check_interval_seconds,
            self.config.leader_imbalance_per_broker_percentage,
        )
        self._controller = Controller(
            self.config.broker_id,
            zk,
            rebalance,
            self.config.security.inter_broker(),
            self.metrics,
        )
        self.ctx.controller = self._controller
        self._controller.start()
        self._housekeeping = [
            self._every(self.config.hw_checkpoint_interval_ms, self.replicas.checkpoint_off_loop),
            self._every(
                self.config.flush_check_interval_ms, lambda: self.replicas.maybe_flush(now_ms())
            ),
            self._every(
                self.config.retention_check_interval_ms,
                lambda: self.replicas.delete_expired_segments(now_ms()),
            ),
            self._every(self.config.replica_lag_time_max_ms // 2, self._shrink_isrs),
            self._every(
                self.config.producer_id_expiration_check_interval_ms,
                lambda: self.replicas.expire_producers(now_ms()),
            ),
        ]
        self._cleaner = LogCleaner(self.replicas, self.config.cleaner)
        self._cleaner.start()
        if self._group_watermarks is not None:
            self._housekeeping.append(
                self._every(GROUP_LAG_REFRESH_MS, self._group_watermarks.refresh)
            )
        logger.info(
            "broker %d serving: %s",
            self.config.broker_id,
            ", ".join(
                f"{name} on {bound[name]} advertised as {advertised[name]}" for name in bound
            ),
        )

    def _registration(self, advertised: dict[str, Endpoint]) -> znodes.BrokerRegistration:
        replog = advertised[REPLOG]
        kafka = advertised.get(KAFKA, Endpoint("", -1))
        metrics = advertised.get(METRICS, Endpoint("", -1))
        return znodes.BrokerRegistration(
            self.config.broker_id,
            replog.host,
            replog.port,
            kafka_port=kafka.port,
            security_protocol=self.config.security.protocol,
            metrics_port=metrics.port,
            kafka_host=kafka.host,
            metrics_host=metrics.host,
        )

    def _reload_acls(self) -> None:
        """Read every ACL again (from kazoo's thread, after a change notification)."""
        zk, authorizer = self.ctx.zk, self.ctx.authorizer
        if zk is None or authorizer is None:
            return
        try:
            load_acls_into(authorizer, zk, self.metrics)
        except ReplogError:
            logger.exception("cannot read the ACLs; keeping the ones known")

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move our leadership away first (seed section H), so that
        producers see at most a metadata refresh, not a failover. Bounded: after the
        retries the broker stops anyway."""
        for attempt in range(1, self.config.controlled_shutdown_max_retries + 1):
            try:
                remaining = await asyncio.wait_for(
                    self._ask_controller_to_move_leaders(), CONTROLLED_SHUTDOWN_TIMEOUT_S
                )
            except (ReplogError, TimeoutError) as exc:
                logger.warning("controlled shutdown attempt %d failed: %r", attempt, exc)
            else:
                if not remaining:
                    logger.info("controlled shutdown done: this broker leads nothing")
                    return
                logger.info("controlled shutdown: still leading %d partitions", remaining)
            await asyncio.sleep(self.config.controlled_shutdown_retry_backoff_ms / 1000)
        logger.warning("controlled shutdown incomplete; stopping anyway")

    async def _ask_controller_to_move_leaders(self) -> int:
        zk = self.ctx.zk
        assert zk is not None
        controller_id = await asyncio.to_thread(current_controller, zk)
        brokers = await asyncio.to_thread(topic_store.read_brokers, zk)
        address = next(((b.host, b.port) for b in brokers if b.broker_id == controller_id), None)
        if address is None:
            raise NotControllerError("no controller is known right now")
        conn = BrokerConnection(
            *address,
            client_id=f"broker-{self.config.broker_id}",
            security=self.config.security.inter_broker(),
        )
        await conn.connect()
        try:
            request = ControlledShutdownRequest(self.config.broker_id, self.ctx.broker_epoch)
            response = await conn.send(request, timeout_s=CONTROLLED_SHUTDOWN_TIMEOUT_S)
        finally:
            await conn.close()
        return sum(len(t.partitions) for t in response.remaining)

    def _shrink_isrs(self) -> None:
        writer = self.ctx.isr_writer
        lag = self.config.replica_lag_time_max_ms
        for partition in self.replicas.propose_isr_shrinks(now_ms(), lag):
            if writer is not None:
                writer.schedule(partition)

    def _every(
        self, interval_ms: int, work: Callable[[], Awaitable[None] | None]
    ) -> asyncio.Task[None]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    pending = work()
                    if pending is not None:
                        await pending
                except Exception:
                    logger.exception("housekeeping failed")

        return asyncio.create_task(loop())

    async def stop(self) -> None:
        """Shut down in order; each step is bounded so one stuck part cannot keep the
        broker from flushing its logs and writing its HW checkpoint."""
        logger.info("broker %d shutting down", self.config.broker_id)
        if self.config.controlled_shutdown_enable and self.ctx.zk is not None:
            await self._controlled_shutdown()
        for task in self._housekeeping:
            task.cancel()
        steps: list[tuple[str, Awaitable[None] | None]] = [
            ("log cleaner", self._cleaner.stop() if self._cleaner else None),
            ("controller", self._controller.stop() if self._controller else None),
            ("replica fetchers", self.ctx.fetchers.stop()),
            ("ACL watcher", self._stop_acl_watcher()),
            ("ISR writer", self.ctx.isr_writer.stop() if self.ctx.isr_writer else None),
            ("topic configs", self._topic_configs.stop() if self._topic_configs else None),
            ("ZooKeeper session", self._zk.stop() if self._zk else None),
            ("group coordinator", self.groups.stop() if self.groups else None),
            ("transaction coordinator", self.transactions.stop() if self.transactions else None),
            ("transaction marker connections", self._marker_sender.close()),
            ("listener", self.server.close()),
            ("Kafka listener", self.kafka_server.close() if self.kafka_server else None),
            ("metrics listener", self.metrics_server.close() if self.metrics_server else None),
        ]
        for name, step in steps:
            if step is None:
                continue
            try:
                await asyncio.wait_for(step, SHUTDOWN_STEP_TIMEOUT_S)
            except TimeoutError:
                logger.error(
                    "stopping the %s took over %.0f s; going on", name, SHUTDOWN_STEP_TIMEOUT_S
                )
        self.replicas.close()
        logger.info("broker %d stopped", self.config.broker_id)

    async def _stop_acl_watcher(self) -> None:
        if self._acl_watcher is not None:
            await asyncio.to_thread(self._acl_watcher.stop)

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
