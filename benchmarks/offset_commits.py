"""Offset commits through replog's Kafka listener: commits per second and partition
offsets per second, N groups x M partitions; one JSON line.

Starts an embedded ZooKeeper and brokers 1..3, each with a Kafka-protocol listener on a
free port (``_cluster.local_cluster(kafka=True)``), creates one topic of ``--partitions``
(M) partitions with replication factor 3, and stops every process it started at the
end, each by its own PID.

Each of ``--groups`` (N) groups has one committer: its own Kafka connection to the
group's coordinator (found once with FindCoordinator, as a consumer caches it), sending
OffsetCommit requests of all M partitions one after the other, each as soon as the last
was answered (a consumer's synchronous commit, as an admin commits: generation -1, no
member). Every commit moves each partition's offset one further, so nothing is a
repeat. One untimed commit per group first (connection, coordinator, the group's first
write). Then all committers run together for ``--seconds``; a commit in flight at the
deadline is waited for and counted. An error answer fails the run.

``commits_per_s`` is OffsetCommit requests answered per second over the timed phase,
``partition_offsets_per_s`` the same times M. ``store`` says where the brokers kept the
offsets, read after the run: ``zookeeper`` when the groups have offsets znodes
(``/consumers/GROUP/offsets``, the store this version has), ``offsets_topic`` when they
have none and the cluster has the ``__consumer_offsets`` topic. ``--broker-config
KEY=VALUE`` (repeatable) is given to every broker, so a store chosen by a broker config
can be measured with the same script. ``broker_cpu_s`` is the brokers' CPU time (user +
system) in the timed phase, ``client_cpu_s`` this process's: a client near one core is the
limit, not the brokers. ``load_avg_before`` / ``load_avg_after`` are the machine's
1-minute load averages: on a shared machine, how busy it was.

Goal (issue 27): the offsets topic at >= 10x the ZooKeeper store's partition_offsets_per_s.

Run from the repository root::

    .venv/bin/python benchmarks/offset_commits.py --groups 10 --partitions 50
    .venv/bin/python benchmarks/offset_commits.py --groups 200 --partitions 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from _cluster import LocalCluster, local_cluster
from _common import emit, positive_float, positive_int, process_cpu_seconds

from spark_replica.client import Admin, Cluster
from spark_replica.client.kafka_admin import OFFSET_COMMIT, KafkaAdminClient
from spark_replica.client.kafka_connection import Address, KafkaConnection
from spark_replica.errors import ReplogError, error_for_code
from spark_replica.security.settings import SecurityConfig
from spark_replica.wire.schema import Data
from spark_replica.zk.group_store import offsets_path
from spark_replica.zk.session import connect

BROKERS = 3
REPLICATION_FACTOR = 3
TOPIC = "offset-commits"
OFFSETS_TOPIC = "__consumer_offsets"
CLIENT_ID = "replog-bench"
SETUP_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0
SETUP_RETRY_S = 0.1
ZOOKEEPER_STORE = "zookeeper"
OFFSETS_TOPIC_STORE = "offsets_topic"
GOAL_RATIO = 10


def broker_config(text: str) -> tuple[str, str]:
    """An argparse type: KEY=VALUE, a broker config for every broker."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"not KEY=VALUE: {text!r}")
    return key, value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=positive_int, default=10, help="N committers (10)")
    parser.add_argument("--partitions", type=positive_int, default=50, help="M per commit (50)")
    parser.add_argument("--seconds", type=positive_float, default=10.0, help="timed (10)")
    parser.add_argument(
        "--broker-config", type=broker_config, action="append", default=[], help="KEY=VALUE"
    )
    return parser.parse_args(argv)


def group_name(index: int) -> str:
    return f"bench-group-{index}"


def commit_body(group: str, partitions: int, offset: int) -> Data:
    """OffsetCommit of every partition at `offset`: generation -1, no member."""
    committed = [
        Data(partition_index=p, committed_offset=offset, committed_metadata="")
        for p in range(partitions)
    ]
    topics = [Data(name=TOPIC, partitions=committed)]
    return Data(group_id=group, generation_id=-1, member_id="", topics=topics)


class Committer:
    """One group's commits, one request at a time on its own connection to the coordinator."""

    def __init__(self, group: str, partitions: int, connection: KafkaConnection) -> None:
        self.group = group
        self.partitions = partitions
        self.connection = connection
        self.commits = 0

    async def commit(self) -> None:
        body = commit_body(self.group, self.partitions, self.commits)
        answer = await self.connection.call(OFFSET_COMMIT, body)
        for topic in answer.topics:
            for p in topic.partitions:
                if p.error_code:
                    where = f"{topic.name}-{p.partition_index} of group {self.group!r}"
                    raise error_for_code(p.error_code, f"committing {where}")
        self.commits += 1

    async def commit_until(self, deadline: float) -> None:
        while time.perf_counter() < deadline:
            await self.commit()


async def create_topic(cluster: LocalCluster, partitions: int) -> None:
    client = Cluster(cluster.bootstrap)
    try:
        await Admin(client).create_topic(TOPIC, partitions, REPLICATION_FACTOR)
    finally:
        await client.close()


async def coordinator_address(bootstrap: list[Address], group: str) -> Address:
    async with KafkaAdminClient(bootstrap, client_id=CLIENT_ID) as admin:
        return admin.brokers[await admin.find_coordinator(group)]


async def open_committer(bootstrap: list[Address], group: str, partitions: int) -> Committer:
    """A committer whose first commit went through: until then the coordinator may not
    know the new topic yet or still be loading, so retriable answers are tried again."""
    while True:
        try:
            address = await coordinator_address(bootstrap, group)
        except ReplogError as exc:
            # The first FindCoordinator creates the offsets topic: not there yet.
            if not exc.retriable:
                raise
            await asyncio.sleep(SETUP_RETRY_S)
            continue
        connection = KafkaConnection(address, SecurityConfig(), CLIENT_ID, REQUEST_TIMEOUT_S)
        await connection.connect()
        committer = Committer(group, partitions, connection)
        try:
            await committer.commit()
            return committer
        except ReplogError as exc:
            await connection.close()
            if not exc.retriable:
                raise
        await asyncio.sleep(SETUP_RETRY_S)


def cpu_seconds(pids: list[int]) -> float:
    return sum(sum(process_cpu_seconds(pid)) for pid in pids)


def client_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


async def measure(cluster: LocalCluster, args: argparse.Namespace) -> dict[str, float]:
    """Open every committer (untimed), then run them all for `args.seconds`."""
    bootstrap = [(b.host, b.kafka_port) for b in cluster.brokers]
    groups = [group_name(i) for i in range(args.groups)]
    opening = [open_committer(bootstrap, group, args.partitions) for group in groups]
    committers = await asyncio.wait_for(asyncio.gather(*opening), SETUP_TIMEOUT_S)
    warmup_commits = sum(c.commits for c in committers)
    pids = [b.pid for b in cluster.brokers if b.pid is not None]
    try:
        broker_cpu = cpu_seconds(pids)
        client_cpu = client_cpu_seconds()
        started = time.perf_counter()
        await asyncio.gather(*(c.commit_until(started + args.seconds) for c in committers))
        elapsed = time.perf_counter() - started
        broker_cpu = cpu_seconds(pids) - broker_cpu
        client_cpu = client_cpu_seconds() - client_cpu
    finally:
        for committer in committers:
            await committer.connection.close()
    commits = sum(c.commits for c in committers) - warmup_commits
    return {
        "commits": commits,
        "seconds": elapsed,
        "broker_cpu_s": broker_cpu,
        "client_cpu_s": client_cpu,
    }


async def has_offsets_topic(cluster: LocalCluster) -> bool:
    client = Cluster(cluster.bootstrap)
    try:
        return OFFSETS_TOPIC in await Admin(client).list_topics()
    finally:
        await client.close()


def offsets_store(cluster: LocalCluster, groups: int) -> str:
    """Where the brokers kept the groups' offsets: ZooKeeper znodes, or the offsets topic."""
    zk = connect(cluster.zookeeper, create_chroot=False)
    try:
        in_zookeeper = all(zk.exists(offsets_path(group_name(i))) for i in range(groups))
    finally:
        zk.stop()
        zk.close()
    if in_zookeeper:
        return ZOOKEEPER_STORE
    if asyncio.run(has_offsets_topic(cluster)):
        return OFFSETS_TOPIC_STORE
    raise RuntimeError("the groups' offsets are neither in ZooKeeper nor in an offsets topic")


def run(args: argparse.Namespace) -> dict[str, object]:
    load_before = round(os.getloadavg()[0], 2)
    overrides = dict(args.broker_config)
    with local_cluster(BROKERS, overrides=overrides, kafka=True) as cluster:
        asyncio.run(asyncio.wait_for(create_topic(cluster, args.partitions), SETUP_TIMEOUT_S))
        figures = asyncio.run(measure(cluster, args))
        store = offsets_store(cluster, args.groups)
    commits_per_s = figures["commits"] / figures["seconds"]
    return {
        "bench": "offset_commits",
        "store": store,
        "groups": args.groups,
        "partitions": args.partitions,
        "brokers": BROKERS,
        "replication_factor": REPLICATION_FACTOR,
        "broker_config": overrides,
        "commits": int(figures["commits"]),
        "seconds": round(figures["seconds"], 3),
        "commits_per_s": round(commits_per_s, 1),
        "partition_offsets_per_s": round(commits_per_s * args.partitions, 1),
        "broker_cpu_s": round(figures["broker_cpu_s"], 2),
        "client_cpu_s": round(figures["client_cpu_s"], 2),
        "load_avg_before": load_before,
        "load_avg_after": round(os.getloadavg()[0], 2),
        "goal_ratio_to_zookeeper_store": GOAL_RATIO,
    }


def main(argv: list[str] | None = None) -> None:
    emit(run(parse_args(argv)))


if __name__ == "__main__":
    main()
