"""Scale of the control plane: 10,000 partitions (replication factor 3) on 3 brokers;
prints one JSON line.

One cluster (embedded ZooKeeper + 3 broker processes on loopback, all stopped by PID at
the end, data in a temporary directory that is removed) goes through five steps:

* ``create_s``: ``Admin.create_topic`` of ``--topics`` topics together (the partitions
  spread evenly), from the first request until every partition has a leader;
  ``create_full_isr_s`` until every replica is in sync as well.
* ``rss_kb_per_partition``: each broker's VmRSS (/proc/PID/status) once every replica is
  in sync, divided by the replicas it hosts (``rss_mb`` per broker).
* ``broker_failover``: the non-controller broker leading the most partitions is
  SIGKILLed; done when every live broker has applied an UpdateMetadata naming a live
  leader for every partition (each broker logs the UpdateMetadata it applies).
  ``from_kill_ms`` and ``from_detection_ms``, detection being the controller's
  ``brokers changed: gone [N]`` log line: the controller notices a crash by the
  refused connections (brokerd/controller/liveness.py), long before ZooKeeper removes the
  registration at the session timeout. ``observed_*`` are the same as a client saw them,
  polling every live broker's metadata (each poll is an answer of every partition, so
  these include up to a poll's time and interval).
* ``restart_killed`` / ``restart_stopped``: the killed broker started again (its logs
  recovered after a crash), then the same broker stopped cleanly (SIGTERM) and started:
  ``registered_s`` until its new registration appears (a killed broker's old one must
  expire first: that wait is included), ``in_sync_s`` until it is in the ISR of every
  partition it hosts.
* ``controller_failover``: the controller broker is SIGKILLed; done when both other
  brokers have applied the new controller's UpdateMetadata naming a live leader for every
  partition (it sends it to each broker only after that broker acknowledged its
  LeaderAndIsr). ``from_kill_ms``, and ``from_election_ms`` from the creation time (ctime)
  of the new `/controller` znode; ``observed_*`` as a client polling saw them.

ZooKeeper cost of each step: ``zk_round_trips`` and ``zk_requests`` are the controller's
own counts (brokerd/controller/zk_requests.py: a batch of pipelined requests waited for
together is one round trip), summed over the ``event NAME: R ZooKeeper requests in T
round trips`` lines its ``broker.log`` wrote during the step; ``zk_server_requests`` is
the cross-check from ZooKeeper's side, the growth of the ``Received`` packet count of the
``srvr`` four-letter word over the step (every client, pings included).

Run from the repository root (``--partitions 1000`` for a quick look)::

    .venv/bin/python benchmarks/controller_scale.py
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from _broker_log import CONTROLLER_PREFIX, GONE_LINE, broker_log, log_time
from _cluster import LocalCluster, local_cluster
from _common import emit

from spark_replica.client import Admin, BrokerConnection, Cluster
from spark_replica.errors import ReplogError
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.native.metadata import NO_LEADER, MetadataRequest, MetadataResponse
from spark_replica.zk import znodes
from spark_replica.zk.session import connect

BROKERS = 3
REPLICATION_FACTOR = 3
POLL_INTERVAL_S = 0.2
STEP_TIMEOUT_S = 900.0
EVENT_LINE = re.compile(
    CONTROLLER_PREFIX + r"event (?P<event>\w+): "
    r"(?P<requests>\d+) ZooKeeper requests in (?P<trips>\d+) round trips, (?P<ms>[\d.]+) ms$",
    re.MULTILINE,
)
METADATA_LINE = re.compile(  # brokerd/native/controller_requests.py
    r"^(?P<time>\S+Z) \w+ broker=\d+ brokerd\.update_metadata: UpdateMetadata from "
    r"controller (?P<controller>\d+) \(epoch \d+\): (?P<partitions>\d+) partitions, "
    r"(?P<leaderless>\d+) without a live leader, brokers \[(?P<brokers>[\d, ]*)\]$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Partition:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def zk_received(connect_string: str) -> int:
    """ZooKeeper's count of packets received from all clients (`srvr`)."""
    host, port = connect_string.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"srvr")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    found = re.search(rb"^Received: (\d+)$", answer, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no Received count in ZooKeeper's srvr answer: {answer!r}")
    return int(found[1])


def controller_costs(brokers: list[BrokerProcess], since: float) -> dict[str, int]:
    """The controller's ZooKeeper requests and round trips logged after `since` (wall
    clock), over every broker's log (the controller may have moved)."""
    requests = trips = 0
    for broker in brokers:
        for match in EVENT_LINE.finditer(broker_log(broker)):
            if log_time(match) >= since - 0.001:
                requests += int(match["requests"])
                trips += int(match["trips"])
    return {"zk_requests": requests, "zk_round_trips": trips}


class Step:
    """Wall-clock start of a measured step and ZooKeeper's packet count then."""

    def __init__(self, local: LocalCluster) -> None:
        self.local = local
        self.wall = time.time()
        self.started = time.monotonic()
        self.received = zk_received(local.zookeeper)

    def costs(self) -> dict[str, int]:
        return {
            **controller_costs(self.local.brokers, self.wall),
            "zk_server_requests": zk_received(self.local.zookeeper) - self.received,
        }


async def metadata_of(broker: BrokerProcess) -> MetadataResponse | None:
    """One broker's own metadata (not a client's merged view), None if it cannot answer."""
    conn = BrokerConnection(broker.host, broker.port, client_id="replog-bench-scale")
    try:
        await conn.connect()
        response: MetadataResponse = await conn.send(MetadataRequest(None), timeout_s=60.0)
        return response
    except ReplogError:
        return None
    finally:
        await conn.close()


def partitions_of(response: MetadataResponse) -> list[Partition]:
    return [
        Partition(t.topic, p.partition, p.leader, tuple(p.replicas), tuple(p.isr))
        for t in response.topics
        for p in t.partitions
    ]


async def until(check: Callable[[], Awaitable[bool]], what: str) -> float:
    """Poll `check` until true; return the monotonic time it first was."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached within {STEP_TIMEOUT_S:.0f} s")
        await asyncio.sleep(POLL_INTERVAL_S)
    return time.monotonic()


async def everything_led(
    local: LocalCluster, total: int, live: set[int], controller: int | None = None
) -> float:
    """Until every live broker's metadata has `total` partitions led by live brokers (and
    names `controller`, if given)."""

    def done(response: MetadataResponse | None) -> bool:
        if response is None:
            return False
        if controller is not None and response.controller_id != controller:
            return False
        partitions = partitions_of(response)
        return len(partitions) == total and all(p.leader in live for p in partitions)

    async def check() -> bool:
        # Every broker asked at once: asked one after another, the time to ask (a
        # metadata answer of 10,000 partitions) added up and was measured as failover.
        asked = [b for b in local.brokers if b.broker_id in live]
        return all(map(done, await asyncio.gather(*(metadata_of(b) for b in asked))))

    return await until(check, "a live leader for every partition")


async def in_sync(local: LocalCluster, total: int, broker_ids: set[int]) -> float:
    """Until every partition's ISR holds all its replicas among `broker_ids`."""

    async def check() -> bool:
        response = await metadata_of(local.brokers[min(broker_ids) - 1])
        if response is None:
            return False
        partitions = partitions_of(response)
        return len(partitions) == total and all(
            p.leader != NO_LEADER and set(p.replicas) & broker_ids <= set(p.isr) for p in partitions
        )

    return await until(check, f"brokers {sorted(broker_ids)} in sync everywhere")


def seconds(since: float, at: float) -> float:
    return round(at - since, 2)


async def create_topics(local: LocalCluster, topics: int, partitions: int) -> dict[str, object]:
    client = Cluster(local.bootstrap, client_id="replog-bench-scale")
    try:
        admin = Admin(client)
        counts = [partitions // topics + (i < partitions % topics) for i in range(topics)]
        step = Step(local)
        # One topic after another, as an operator's script would: the controller handles
        # each topic's creation as one event either way.
        for i, n in enumerate(counts):
            await admin.create_topic(f"scale-{i}", n, REPLICATION_FACTOR, timeout_s=STEP_TIMEOUT_S)
        led = await everything_led(local, partitions, {b.broker_id for b in local.brokers})
        costs = step.costs()
        synced = await in_sync(local, partitions, {b.broker_id for b in local.brokers})
        return {
            "create_s": seconds(step.started, led),
            "create_full_isr_s": seconds(step.started, synced),
            **costs,
        }
    finally:
        await client.close()


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


async def controller_id(local: LocalCluster) -> int:
    response = await metadata_of(local.brokers[0])
    if response is None or response.controller_id < 0:
        raise RuntimeError("no controller known to broker 1")
    return response.controller_id


async def memory(local: LocalCluster) -> dict[str, object]:
    response = await metadata_of(local.brokers[0])
    assert response is not None
    hosted = Counter(r for p in partitions_of(response) for r in p.replicas)
    rss = {b.broker_id: rss_kb(b.pid) for b in local.brokers if b.pid is not None}
    return {
        "rss_mb": {str(b): round(kb / 1024, 1) for b, kb in rss.items()},
        "rss_kb_per_partition": round(sum(rss.values()) / sum(hosted[b] for b in rss), 1),
    }


def metadata_applied(
    local: LocalCluster, total: int, live: set[int], since: float, controller: int | None = None
) -> float | None:
    """When the last live broker applied an UpdateMetadata (its log line) naming only the
    live brokers and a live leader for every one of `total` partitions (from
    `controller`, if given), after `since`; None if one has not."""
    applied = []
    for broker in local.brokers:
        if broker.broker_id not in live:
            continue
        times = [
            log_time(m)
            for m in METADATA_LINE.finditer(broker_log(broker))
            if int(m["partitions"]) == total
            and m["leaderless"] == "0"
            and {int(b) for b in m["brokers"].split(",") if b.strip()} == live
            and (controller is None or int(m["controller"]) == controller)
            and log_time(m) >= since - 0.001
        ]
        if not times:
            return None
        applied.append(min(times))
    return max(applied)


def ms_between(start: float | None, end: float | None) -> int | None:
    return None if start is None or end is None else round((end - start) * 1000)


async def find_gone_line(broker: BrokerProcess, victim: int, since: float) -> float | None:
    text = broker_log(broker)
    times = [log_time(m) for m in GONE_LINE.finditer(text) if m["gone"] == str(victim)]
    times = [t for t in times if t >= since - 0.001]
    return times[0] if times else None


async def broker_failover(local: LocalCluster, total: int) -> tuple[int, dict[str, object]]:
    controller = await controller_id(local)
    response = await metadata_of(local.brokers[controller - 1])
    assert response is not None
    leads = Counter(p.leader for p in partitions_of(response) if p.leader != controller)
    victim = leads.most_common(1)[0][0]
    live = {b.broker_id for b in local.brokers} - {victim}
    step = Step(local)
    local.brokers[victim - 1].kill()
    killed_wall = time.time()
    done = await everything_led(local, total, live)
    done_wall = time.time()
    noticed = await find_gone_line(local.brokers[controller - 1], victim, step.wall)
    applied = metadata_applied(local, total, live, step.wall)
    return victim, {
        "victim_broker": victim,
        "leaders_moved": leads[victim],
        "from_kill_ms": ms_between(step.wall, applied),
        "from_detection_ms": ms_between(noticed, applied),
        "detection_ms": ms_between(killed_wall, noticed),
        "observed_from_kill_ms": round((done - step.started) * 1000),
        "observed_from_detection_ms": ms_between(noticed, done_wall),
        **step.costs(),
    }


async def restart(local: LocalCluster, broker_id: int, total: int) -> dict[str, object]:
    broker = local.brokers[broker_id - 1]
    step = Step(local)
    await asyncio.to_thread(broker.start, STEP_TIMEOUT_S)
    registered = time.monotonic()
    synced = await in_sync(local, total, {broker_id})
    return {
        "registered_s": seconds(step.started, registered),
        "in_sync_s": seconds(step.started, synced),
        **step.costs(),
    }


async def controller_failover(local: LocalCluster, total: int) -> dict[str, object]:
    old = await controller_id(local)
    live = {b.broker_id for b in local.brokers} - {old}
    zk = await asyncio.to_thread(connect, local.zookeeper)
    try:
        step = Step(local)
        local.brokers[old - 1].kill()

        async def new_controller() -> bool:
            found = await asyncio.to_thread(zk.exists, znodes.CONTROLLER_PATH)
            return found is not None and found.czxid > 0 and found.ctime / 1000 > step.wall

        await until(new_controller, "a new /controller")
        data, stat = await asyncio.to_thread(zk.get, znodes.CONTROLLER_PATH)
        elected = znodes.ControllerRegistration.decode(data).broker_id
        done = await everything_led(local, total, live, elected)
        done_wall = time.time()
    finally:
        await asyncio.to_thread(zk.stop)
        await asyncio.to_thread(zk.close)
    elected_at = stat.ctime / 1000
    applied = metadata_applied(local, total, live, elected_at, elected)
    return {
        "old_controller": old,
        "new_controller": elected,
        "from_kill_ms": ms_between(step.wall, applied),
        "from_election_ms": ms_between(elected_at, applied),
        "election_ms": ms_between(step.wall, elected_at),
        "observed_from_kill_ms": round((done - step.started) * 1000),
        "observed_from_election_ms": ms_between(elected_at, done_wall),
        **step.costs(),
    }


async def run(local: LocalCluster, topics: int, partitions: int) -> dict[str, object]:
    figures: dict[str, object] = {}
    figures["create"] = await create_topics(local, topics, partitions)
    figures.update(await memory(local))
    victim, figures["broker_failover"] = await broker_failover(local, partitions)
    figures["restart_killed"] = await restart(local, victim, partitions)
    await asyncio.to_thread(local.brokers[victim - 1].stop, STEP_TIMEOUT_S)
    figures["restart_stopped"] = await restart(local, victim, partitions)
    figures["controller_failover"] = await controller_failover(local, partitions)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000, help="in all (default 10000)")
    parser.add_argument("--topics", type=int, default=10, help="spread over (default 10)")
    args = parser.parse_args(argv)
    if not 1 <= args.topics <= args.partitions:
        parser.error("need 1 <= --topics <= --partitions")
    started = time.monotonic()
    with local_cluster(BROKERS) as local:
        figures = asyncio.run(run(local, args.topics, args.partitions))
    emit(
        {
            "bench": "controller_scale",
            "brokers": BROKERS,
            "replication_factor": REPLICATION_FACTOR,
            "topics": args.topics,
            "partitions": args.partitions,
            **figures,
            "seconds": round(time.monotonic() - started, 1),
        }
    )


if __name__ == "__main__":
    main()
