"""The state gauges, computed from the broker's own state when Prometheus scrapes.

Nothing here is kept up to date as things change: each scrape walks the partitions
this broker hosts (and, on the controller, the controller's model of the cluster) once,
on the event loop that owns them, so every value in one scrape comes from the same
moment and the request paths pay nothing for it. The rules for what counts as under-
replicated, offline and so on are brokerd/metrics/health.py's.

The group coordinator's consumer-group metrics take kafka-exporter's names
(`kafka_consumergroup_*`), which Kafka dashboards and alerts already use; the rules
for lag are brokerd/metrics/group_lag.py's.

The log cleaner's gauges take Kafka's LogCleaner and LogCleanerManager names; the
cleaner notes its figures as it works (brokerd/metrics/cleaner_figures.py says what
they mean) and the scrape only reads them. A broker whose cleaner is off serves none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from brokerd.metrics.cleaner_figures import CleanerFigures
from brokerd.metrics.group_lag import group_partition_offsets
from brokerd.metrics.health import ClusterHealth, cluster_health, leader_health
from brokerd.metrics.registry import SESSION_STATES
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition

if TYPE_CHECKING:
    from brokerd.controller.controller import Controller
    from brokerd.groups.coordinator import GroupCoordinator
    from brokerd.groups.remote_watermarks import RemoteHighWatermarks
    from brokerd.replication.log_cleaner import LogCleaner
    from brokerd.replication.replica_fetcher import ReplicaFetcherManager
    from brokerd.replication.replica_manager import ReplicaManager

PARTITION_LABELS = ["topic", "partition"]
NO_CLUSTER = ClusterHealth(topics=0, partitions=0, offline=0, preferred_imbalance=0)


class BrokerStateCollector(Collector):
    def __init__(
        self,
        replicas: ReplicaManager,
        fetchers: ReplicaFetcherManager,
        controller: Callable[[], Controller | None],
        zookeeper_state: Callable[[], str],
    ) -> None:
        self._replicas = replicas
        self._fetchers = fetchers
        self._controller = controller
        self._zookeeper_state = zookeeper_state

    def collect(self) -> Iterator[Metric]:
        yield from self._replica_metrics()
        yield from self._fetcher_lag()
        yield from self._controller_metrics()
        yield self._session_state()

    def _replica_metrics(self) -> Iterator[Metric]:
        def per_partition(name: str, documentation: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, documentation, labels=PARTITION_LABELS)

        size = per_partition("kafka_log_log_size", "Bytes of the partition's log on disk.")
        segments = per_partition("kafka_log_log_numlogsegments", "Segments of the log.")
        end = per_partition("kafka_log_log_logendoffset", "The offset the next record gets.")
        start = per_partition("kafka_log_log_logstartoffset", "The first offset in the log.")
        high_watermark = per_partition(
            "kafka_cluster_partition_highwatermark", "Offsets below this are committed."
        )
        under_replicated = per_partition(
            "kafka_cluster_partition_underreplicated",
            "1 if the ISR of this led partition is smaller than its replica list.",
        )
        under_min_isr = per_partition(
            "kafka_cluster_partition_underminisr",
            "1 if the ISR of this led partition is smaller than min.insync.replicas.",
        )
        partitions = leaders = under_replicated_count = under_min_isr_count = 0
        for tp, partition in self._replicas.partitions.items():
            labels = [tp.topic, str(tp.partition)]
            log = partition.log
            partitions += 1
            size.add_metric(labels, log.size_bytes)
            segments.add_metric(labels, log.segment_count)
            end.add_metric(labels, log.log_end_offset)
            start.add_metric(labels, log.log_start_offset)
            high_watermark.add_metric(labels, partition.high_watermark)
            if not partition.is_leader:
                continue
            leaders += 1
            health = leader_health(
                len(partition.isr), len(partition.replicas), partition.min_insync_replicas
            )
            under_replicated.add_metric(labels, int(health.under_replicated))
            under_min_isr.add_metric(labels, int(health.under_min_isr))
            under_replicated_count += health.under_replicated
            under_min_isr_count += health.under_min_isr
        yield from (size, segments, end, start, high_watermark, under_replicated, under_min_isr)
        for name, documentation, value in (
            ("partitioncount", "Partitions hosted by this broker.", partitions),
            ("leadercount", "Partitions led by this broker.", leaders),
            (
                "underreplicatedpartitions",
                "Partitions led here whose ISR is smaller than their replica list.",
                under_replicated_count,
            ),
            (
                "underminisrpartitioncount",
                "Partitions led here whose ISR is smaller than min.insync.replicas.",
                under_min_isr_count,
            ),
        ):
            yield GaugeMetricFamily(
                f"kafka_server_replicamanager_{name}", documentation, value=value
            )

    def _fetcher_lag(self) -> Iterator[Metric]:
        """The follower's side of replication: how far each followed partition is
        behind its leader (the leader's own view is the ISR)."""
        lag = GaugeMetricFamily(
            "kafka_server_fetcherlagmetrics_consumerlag",
            "Offsets this follower's log end is behind its leader's, per followed partition.",
            labels=PARTITION_LABELS,
        )
        lags = self._fetchers.lags()
        for tp, behind in sorted(lags.items()):
            lag.add_metric([tp.topic, str(tp.partition)], behind)
        yield lag
        yield GaugeMetricFamily(
            "kafka_server_replicafetchermanager_maxlag",
            "The largest lag of any partition this broker follows (0 when none).",
            value=max(lags.values(), default=0),
        )

    def _controller_metrics(self) -> Iterator[Metric]:
        controller = self._controller()
        ops = None if controller is None else controller.ops
        health = NO_CLUSTER
        if ops is not None:
            ctx = ops.ctx
            leaders = {tp: state.leader for tp, state in ctx.leadership.items()}
            health = cluster_health(ctx.assignments, leaders, ctx.live_brokers)
        for name, documentation, value in (
            ("activecontrollercount", "1 on the active controller, else 0.", int(ops is not None)),
            (
                "offlinepartitionscount",
                "Partitions without a live leader (counted by the controller only).",
                health.offline,
            ),
            (
                "preferredreplicaimbalancecount",
                "Partitions not led by their preferred replica (controller only).",
                health.preferred_imbalance,
            ),
            (
                "globalpartitioncount",
                "Partitions in the cluster (controller only).",
                health.partitions,
            ),
            ("globaltopiccount", "Topics in the cluster (controller only).", health.topics),
        ):
            yield GaugeMetricFamily(
                f"kafka_controller_kafkacontroller_{name}", documentation, value=value
            )

    def _session_state(self) -> Metric:
        current = self._zookeeper_state()
        family = GaugeMetricFamily(
            "kafka_server_sessionexpirelistener_sessionstate",
            "1 for the current state of this broker's ZooKeeper session.",
            labels=["state"],
        )
        for state in SESSION_STATES:
            family.add_metric([state], int(state == current))
        return family


class ConsumerGroupCollector(Collector):
    """The groups this broker coordinates: members, committed offsets and lag."""

    def __init__(
        self,
        groups: GroupCoordinator,
        replicas: ReplicaManager,
        remote: RemoteHighWatermarks,
    ) -> None:
        self._groups = groups
        self._replicas = replicas
        self._remote = remote

    def _high_watermark(self, tp: TopicPartition) -> int | None:
        """The local replica's, else what its leader last answered (None: unknown)."""
        partition = self._replicas.partitions.get(tp)
        return self._remote.get(tp) if partition is None else partition.high_watermark

    def collect(self) -> Iterator[Metric]:
        labels = ["consumergroup", *PARTITION_LABELS]
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "The group's committed offset on the partition (coordinator only).",
            labels=labels,
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset (coordinator only; a "
            "partition whose high watermark it could not learn has none).",
            labels=labels,
        )
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "The group's lag summed over the partitions of a topic it has lag for.",
            labels=["consumergroup", "topic"],
        )
        sums: dict[tuple[str, str], int] = {}
        rows = group_partition_offsets(self._groups.committed_offsets(), self._high_watermark)
        for row in rows:
            partition_labels = [row.group, row.tp.topic, str(row.tp.partition)]
            current.add_metric(partition_labels, row.current_offset)
            if row.lag is not None:
                lag.add_metric(partition_labels, row.lag)
                key = (row.group, row.tp.topic)
                sums[key] = sums.get(key, 0) + row.lag
        for (group, topic), total in sorted(sums.items()):
            lag_sum.add_metric([group, topic], total)
        members = GaugeMetricFamily(
            "kafka_consumergroup_members",
            "Members of the group (coordinator only; groups without members are left out).",
            labels=["consumergroup"],
        )
        for group, count in sorted(self._groups.member_counts().items()):
            members.add_metric([group], count)
        yield from (current, lag, lag_sum, members)


class LogCleanerCollector(Collector):
    """The log cleaner's gauges; none before the cleaner starts or when it is off."""

    def __init__(self, cleaner: Callable[[], LogCleaner | None]) -> None:
        self._cleaner = cleaner

    def collect(self) -> Iterator[Metric]:
        cleaner = self._cleaner()
        figures = None if cleaner is None else cleaner.figures(now_ms())
        if figures is not None:
            yield from cleaner_gauges(figures)


def cleaner_gauges(figures: CleanerFigures) -> Iterator[Metric]:
    for name, documentation, value in (
        (
            "kafka_log_logcleanermanager_max_dirty_percent",
            "The dirtiest compacted log's percentage of cleanable bytes not yet cleaned, "
            "as of the cleaner's last look.",
            figures.max_dirty_percent,
        ),
        (
            "kafka_log_logcleaner_cleaner_recopy_percent",
            "Bytes written back per 100 bytes read by the cleaner threads' last cleanings.",
            figures.recopy_percent,
        ),
        (
            "kafka_log_logcleaner_max_clean_time_secs",
            "The longest of the cleaner threads' last cleanings, in seconds.",
            figures.max_clean_time_s,
        ),
        (
            "kafka_log_logcleaner_time_since_last_run_ms",
            "Milliseconds since a cleaner thread last finished a pass (grows when stuck).",
            figures.time_since_last_run_ms,
        ),
        (
            "kafka_log_logcleaner_max_buffer_utilization_percent",
            "The fullest key map of the cleaner threads' last cleanings, in percent of "
            "log.cleaner.dedupe.buffer.size.",
            figures.max_buffer_utilization_percent,
        ),
    ):
        yield GaugeMetricFamily(name, documentation, value=value)
