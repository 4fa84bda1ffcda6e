"""Consumer-group rebalances during a rolling restart of a 3-broker cluster; one JSON line.

Why: a group's coordinator is the broker its members heartbeat and commit to. When a
restart moves a group's coordinator and the new one does not know the group's members,
the members join again: a rebalance, during which the group consumes nothing. This
counts how many rebalances a rolling restart costs, as the operator of N groups sees it.

Starts an embedded ZooKeeper and brokers 1..3 with Kafka-protocol listeners
(``_cluster.local_cluster(kafka=True)``) and creates one topic of ``--partitions``
partitions, replication factor 3. Each of ``--groups`` groups has one member: an
aiokafka consumer subscribed to the topic, all of them in this one event loop (the
cheapest way to run many). A member polls (``getmany``) for ``--commit-interval-ms`` and
then commits its positions, as consumers with periodic commits do; ``--session-timeout-ms``
and ``--heartbeat-interval-ms`` are its group settings.

Once every group has its first assignment and every partition of every topic
(``__consumer_offsets`` too, where it exists) has its full ISR, counting starts. Then the
rolling restart: for broker 1, 2, 3 in turn, a graceful stop (SIGTERM: controlled
shutdown; ``stop_exit_codes`` says each stop's exit code, 0 when clean), a start, and a
wait until every partition's ISR is full again (no under-replicated partition in the
metadata) before the next broker. Then ``--settle-s`` (default two session timeouts), so
that rebalances the last restart set off are counted too.

A rebalance is a call of the member's ``on_partitions_assigned`` after its first one
(ConsumerRebalanceListener). ``rebalances_total`` counts them over all groups from the
start of counting to the end of the settle time, ``groups_rebalanced`` the groups with
at least one, ``rebalances_per_broker_restart`` those from each broker's stop to the next
broker's stop (the last one's to the end). ``commits`` are the commits that succeeded
after counting started, ``failed_commits`` those that raised (CommitFailedError after a
rebalance, or any other Kafka error) or took over COMMIT_TIMEOUT_S, ``poll_errors`` the
errors a poll raised (aiokafka hands its background tasks' errors, such as a heartbeat
answer it does not expect, to the next poll; the member polls on). ``restart_s`` is each
broker's stop-to-full-ISR time, ``seconds`` the whole counted time (describing the groups
after it is not counted). ``groups_stable_at_end`` are the groups their coordinator
describes as Stable with one member after the settle time: all of them, unless a member
dropped out of its group without rejoining. ``store`` says where
the cluster keeps groups: ``offsets_topic`` when ``__consumer_offsets`` exists,
``zookeeper`` otherwise (before issue 27). ``load_avg_before`` / ``load_avg_after`` are
the machine's 1-minute load averages: on a shared machine, how busy it was.

Every process the script starts is stopped at the end by its own PID, on errors and on
SIGTERM too.

Run from the repository root::

    .venv/bin/python benchmarks/rolling_restart_groups.py
    .venv/bin/python benchmarks/rolling_restart_groups.py --groups 50 --settle-s 10
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from _cluster import LocalCluster, local_cluster
from _common import emit, positive_float, positive_int
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from spark_replica.client import Admin, Cluster
from spark_replica.client.kafka_admin import KafkaAdminClient
from spark_replica.client.kafka_connection import Address
from spark_replica.errors import ReplogError
from spark_replica.wire.native.metadata import NO_LEADER, MetadataResponse

BROKERS = 3
REPLICATION_FACTOR = 3
TOPIC = "rolling-restart"
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_STORE = "offsets_topic"
ZOOKEEPER_STORE = "zookeeper"
SETUP_TIMEOUT_S = 60.0
ASSIGNED_TIMEOUT_S = 300.0
FULL_ISR_TIMEOUT_S = 120.0
COMMIT_TIMEOUT_S = 30.0
CONSUMER_STOP_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.2
STABLE = "Stable"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=positive_int, default=200, help="one member each (200)")
    parser.add_argument("--partitions", type=positive_int, default=6, help="of the topic (6)")
    parser.add_argument("--session-timeout-ms", type=positive_int, default=10_000)
    parser.add_argument("--heartbeat-interval-ms", type=positive_int, default=1_000)
    parser.add_argument("--commit-interval-ms", type=positive_int, default=1_000)
    parser.add_argument(
        "--settle-s", type=positive_float, help="after the last restart (2 session timeouts)"
    )
    args = parser.parse_args(argv)
    if args.heartbeat_interval_ms >= args.session_timeout_ms:
        parser.error("--heartbeat-interval-ms must be below --session-timeout-ms")
    if args.settle_s is None:
        args.settle_s = 2 * args.session_timeout_ms / 1000
    return args


def group_name(index: int) -> str:
    return f"rolling-group-{index}"


def count_in_windows(times: Sequence[float], starts: Sequence[float], end: float) -> list[int]:
    """How many of `times` fall in each window [starts[i], starts[i+1]), the last to `end`.

    `times` and `starts` ascend; times before the first start or at/after `end` count nowhere.
    """
    bounds = [*starts, end]
    ordered = sorted(times)
    return [
        bisect.bisect_left(ordered, bounds[i + 1]) - bisect.bisect_left(ordered, bounds[i])
        for i in range(len(starts))
    ]


def count_since(time_lists: Sequence[Sequence[float]], since: float) -> int:
    return sum(1 for times in time_lists for t in times if t >= since)


class AssignmentLog(ConsumerRebalanceListener):  # type: ignore[misc]
    """When each assignment of one member arrived (loop time); the first is not a rebalance."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.first = asyncio.Event()

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.times.append(time.monotonic())
        self.first.set()

    def rebalances_since(self, since: float) -> list[float]:
        return [t for t in self.times[1:] if t >= since]


@dataclass
class Member:
    """One group's only member: polls, then commits, until stopped."""

    consumer: AIOKafkaConsumer
    assignments: AssignmentLog
    commit_times: list[float] = field(default_factory=list)
    failed_commit_times: list[float] = field(default_factory=list)
    poll_error_times: list[float] = field(default_factory=list)

    async def poll_and_commit(self, interval_ms: int) -> None:
        while True:
            try:
                await self.consumer.getmany(timeout_ms=interval_ms)
            except KafkaError:
                # aiokafka hands errors of its background tasks (e.g. a heartbeat answer
                # it does not expect) to the next poll; this member goes on, as a service
                # that logs them would.
                self.poll_error_times.append(time.monotonic())
                await asyncio.sleep(interval_ms / 1000)
            if not self.consumer.assignment():
                continue  # between a revocation and the next assignment: nothing to commit
            try:
                await asyncio.wait_for(self.consumer.commit(), COMMIT_TIMEOUT_S)
            except (KafkaError, TimeoutError):
                self.failed_commit_times.append(time.monotonic())
            else:
                self.commit_times.append(time.monotonic())


async def start_member(bootstrap: str, group: str, args: argparse.Namespace) -> Member:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
    )
    assignments = AssignmentLog()
    consumer.subscribe([TOPIC], listener=assignments)
    await consumer.start()
    return Member(consumer, assignments)


def under_replicated(metadata: MetadataResponse) -> int:
    """Partitions without a leader or with a replica out of their ISR, over every topic."""
    return sum(
        1
        for topic in metadata.topics
        for p in topic.partitions
        if p.leader == NO_LEADER or set(p.isr) != set(p.replicas)
    )


async def wait_for_full_isr(client: Cluster, broker_id: int | None = None) -> list[str]:
    """Wait until every partition has its full ISR (and `broker_id` is in the metadata's
    brokers); return the topics."""
    deadline = time.monotonic() + FULL_ISR_TIMEOUT_S
    while True:
        try:
            metadata = await client.refresh(None)
        except ReplogError as exc:
            if not exc.retriable:
                raise
        else:
            brokers = {b.broker_id for b in metadata.brokers}
            if under_replicated(metadata) == 0 and (broker_id is None or broker_id in brokers):
                return [t.topic for t in metadata.topics]
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions still under-replicated after {FULL_ISR_TIMEOUT_S} s")
        await asyncio.sleep(POLL_INTERVAL_S)


async def wait_for_first_assignments(members: list[Member]) -> None:
    waits = (m.assignments.first.wait() for m in members)
    try:
        await asyncio.wait_for(asyncio.gather(*waits), ASSIGNED_TIMEOUT_S)
    except TimeoutError:
        missing = sum(1 for m in members if not m.assignments.first.is_set())
        raise TimeoutError(
            f"{missing} of {len(members)} groups had no assignment after {ASSIGNED_TIMEOUT_S} s"
        ) from None


@dataclass
class RollingRestart:
    stop_times: list[float] = field(default_factory=list)
    stop_exit_codes: list[int | None] = field(default_factory=list)
    restart_s: list[float] = field(default_factory=list)


async def restart_each_broker(cluster: LocalCluster, client: Cluster) -> RollingRestart:
    """Stop and start each broker in turn, each back in every ISR before the next; the
    launcher's blocking calls run on a thread so the members keep heartbeating."""
    restart = RollingRestart()
    for broker in cluster.brokers:
        started = time.monotonic()
        restart.stop_times.append(started)
        restart.stop_exit_codes.append(await asyncio.to_thread(broker.stop))
        await asyncio.to_thread(broker.start)
        await wait_for_full_isr(client, broker.broker_id)
        restart.restart_s.append(round(time.monotonic() - started, 1))
    return restart


async def stable_groups(bootstrap: list[Address], groups: list[str]) -> int:
    """How many of `groups` their coordinator has Stable with one member: a member that
    stopped heartbeating without noticing is not counted as a rebalance, but shows here."""
    async with KafkaAdminClient(bootstrap, client_id="rolling-restart-bench") as admin:
        described = [await admin.describe_group(group) for group in groups]
    return sum(1 for d in described if d.state == STABLE and len(d.members) == 1)


async def stop_members(members: list[Member], loops: list[asyncio.Task[None]]) -> None:
    for task in loops:
        task.cancel()
    await asyncio.gather(*loops, return_exceptions=True)
    stops = asyncio.gather(*(m.consumer.stop() for m in members), return_exceptions=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stops, CONSUMER_STOP_TIMEOUT_S)


async def measure(cluster: LocalCluster, args: argparse.Namespace) -> dict[str, object]:
    client = Cluster(cluster.bootstrap)
    members: list[Member] = []
    loops: list[asyncio.Task[None]] = []
    try:
        await asyncio.wait_for(
            Admin(client).create_topic(TOPIC, args.partitions, REPLICATION_FACTOR),
            SETUP_TIMEOUT_S,
        )
        kafka_bootstrap = [(b.host, b.kafka_port) for b in cluster.brokers]
        bootstrap = ",".join(f"{host}:{port}" for host, port in kafka_bootstrap)
        groups = [group_name(index) for index in range(args.groups)]
        for group in groups:
            members.append(await start_member(bootstrap, group, args))
            loops.append(asyncio.create_task(members[-1].poll_and_commit(args.commit_interval_ms)))
        await wait_for_first_assignments(members)
        topics = await wait_for_full_isr(client)
        counting_from = time.monotonic()
        restart = await restart_each_broker(cluster, client)
        await asyncio.sleep(args.settle_s)
        ended = time.monotonic()
        stable = await stable_groups(kafka_bootstrap, groups)
    finally:
        await stop_members(members, loops)
        await client.close()
    rebalances = [m.assignments.rebalances_since(counting_from) for m in members]
    every_rebalance = [t for times in rebalances for t in times]
    return {
        "store": OFFSETS_TOPIC_STORE if OFFSETS_TOPIC in topics else ZOOKEEPER_STORE,
        "rebalances_total": len(every_rebalance),
        "groups_rebalanced": sum(1 for times in rebalances if times),
        "rebalances_per_broker_restart": count_in_windows(
            every_rebalance, restart.stop_times, ended
        ),
        "commits": count_since([m.commit_times for m in members], counting_from),
        "failed_commits": count_since([m.failed_commit_times for m in members], counting_from),
        "poll_errors": count_since([m.poll_error_times for m in members], counting_from),
        "groups_stable_at_end": stable,
        "stop_exit_codes": restart.stop_exit_codes,
        "restart_s": restart.restart_s,
        "seconds": round(ended - counting_from, 1),
    }


def run(args: argparse.Namespace) -> dict[str, object]:
    # A restart refuses connections, which aiokafka logs as errors for every member.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    load_before = round(os.getloadavg()[0], 2)
    with local_cluster(BROKERS, kafka=True) as cluster:
        figures = asyncio.run(measure(cluster, args))
    return {
        "bench": "rolling_restart_groups",
        "groups": args.groups,
        "partitions": args.partitions,
        "brokers": BROKERS,
        "replication_factor": REPLICATION_FACTOR,
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
        "commit_interval_ms": args.commit_interval_ms,
        "settle_s": args.settle_s,
        **figures,
        "load_avg_before": load_before,
        "load_avg_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> None:
    emit(run(parse_args(argv)))


if __name__ == "__main__":
    main()
