"""Leader failover after a broker is SIGKILLed or SIGSTOPped in a 3-broker cluster; prints
one JSON line.

Every broker runs with the default ``zookeeper.session.timeout.ms`` (``zk_session_timeout_ms``
in the output; until issue 12 this benchmark set it to 3000, because a crash was only noticed
when the dead broker's session expired). A crashed broker is now noticed by its refused
connections (brokerd/controller/liveness.py), so the session timeout is no part of the kill
figures; a paused broker still accepts connections and is only failed over when its session
expires. Three parts, each on a fresh cluster (embedded ZooKeeper + 3 broker processes on
loopback, all stopped by PID at the end):

* ``kill_to_first_ack_ms`` (3 rounds, median and max): a topic with 1 partition, replication
  factor 3 and ``min.insync.replicas=2``; one producer sends acks=all batches of 100 records
  back to back to partition 0. The partition's leader is SIGKILLed, and the figure is the time
  (``time.monotonic``) from just before the kill until the first ``send_batch`` called after
  the kill is acknowledged. The producer retries through the leader change on its own
  (``ProducerConfig`` defaults). Requests in flight at the kill do not count: their answer may
  have been on its way already, so the figure errs by at most one acks=all round trip on the
  high side. Each round uses a fresh topic, restarts the killed broker afterwards and ends
  once the partition's ISR is full again. The leader may be the controller.
* ``pause_to_first_ack_ms`` (the same, 1 round): the leader is SIGSTOPped instead, and
  SIGCONTed once the first send called after the pause is acknowledged. Its partition moves
  when the session expires (``pause_to_new_leader_ms``: from the pause until the other
  brokers' metadata names another leader, polled every 50 ms); the producer learns of it when
  its request to the paused leader times out (``ProducerConfig.request_timeout_ms``, printed
  as ``producer_request_timeout_ms``), whichever is later.
* ``move_1000_partitions_ms``: a topic with 1,000 partitions, replication factor 3, so that
  each broker leads about a third. The victim is a broker that is not the controller and leads
  partitions (broker 2 whenever it qualifies). It is SIGKILLed, then ``Admin.describe`` is
  polled every 50 ms until every partition has a live leader; the figure is the time from
  just before the kill to the end of that describe (so at most one poll interval plus one
  describe late). ``zk_round_trips``, ``states_written`` and ``controller_failover_ms`` come
  from the controller's ``failover of brokers [...]`` line in its ``broker.log`` (ZooKeeper
  multi-ops it used, leaderAndISR states it wrote, its own handling time); they are ``null``
  if that line does not appear. ``controller_noticed_ms`` is the time from the kill to the
  controller's ``brokers changed: gone [...]`` line (its log timestamp, millisecond precision).

Run from the repository root::

    .venv/bin/python benchmarks/failover.py
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from _broker_log import CONTROLLER_PREFIX, GONE_LINE, log_time
from _cluster import LocalCluster, local_cluster
from _common import emit

from brokerd.config.broker import BrokerConfig
from spark_replica.client import Admin, Cluster, PartitionDescription, Producer, ProducerConfig
from spark_replica.errors import ReplogError
from spark_replica.records import build_batch
from spark_replica.wire.native.metadata import NO_LEADER
from spark_replica.wire.native.produce import ACKS_ALL

T = TypeVar("T")

BROKERS = 3
SESSION_TIMEOUT_MS = BrokerConfig.zookeeper_session_timeout_ms
KILL_ROUNDS = 3
PAUSE_ROUNDS = 1
BATCH_RECORDS = 100
WARMUP_ACKS = 20
MOVE_TOPIC = "failover-move"
MOVE_PARTITIONS = 1000
PREFERRED_VICTIM = 2
POLL_INTERVAL_S = 0.05
CREATE_TIMEOUT_S = 60.0
WAIT_TIMEOUT_S = 60.0
LOG_LINE_TIMEOUT_S = 10.0
PART_TIMEOUT_S = 180.0
FAILOVER_LINE = re.compile(
    CONTROLLER_PREFIX + r"failover of brokers \[(?P<gone>[\d, ]*)\]: "
    r"(?P<written>\d+) partitions moved in (?P<trips>\d+) ZooKeeper round trips, "
    r"(?P<ms>[\d.]+) ms$",
    re.MULTILINE,
)


async def wait_for(
    check: Callable[[], Awaitable[T | None]], what: str, timeout_s: float = WAIT_TIMEOUT_S
) -> T:
    """Await ``check`` every POLL_INTERVAL_S until it returns something other than None."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached within {timeout_s:.0f} s")
        await asyncio.sleep(POLL_INTERVAL_S)


async def describe(admin: Admin, topic: str) -> list[PartitionDescription] | None:
    """The topic's partitions, or None while a retriable error (a dead leader) gets in the way."""
    try:
        return (await admin.describe([topic]))[topic]
    except ReplogError as exc:
        if not exc.retriable:
            raise
        return None


async def wait_for_full_isr(admin: Admin, topic: str) -> list[PartitionDescription]:
    """Wait until every partition of ``topic`` has a leader and all BROKERS replicas in sync."""

    async def full() -> list[PartitionDescription] | None:
        partitions = await describe(admin, topic)
        if partitions and all(p.leader != NO_LEADER and len(p.isr) == BROKERS for p in partitions):
            return partitions
        return None

    return await wait_for(full, f"full ISR for {topic}")


async def produce_until_acked_after(
    producer: Producer, topic: str, batch: bytes, warm: asyncio.Event, struck: asyncio.Future[float]
) -> float:
    """Send ``batch`` back to back; set ``warm`` after WARMUP_ACKS acknowledgements.

    Return the time the first send called after ``struck`` was resolved is acknowledged.
    """
    acked = 0
    while True:
        sent = time.monotonic()
        await producer.send_batch(topic, 0, batch)
        acked += 1
        if acked >= WARMUP_ACKS:
            warm.set()
        if struck.done() and sent >= struck.result():
            return time.monotonic()


async def wait_for_new_leader(local: LocalCluster, topic: str, old_leader: int) -> float:
    """The time the brokers other than ``old_leader`` first name another leader."""
    others = [address for i, address in enumerate(local.bootstrap, 1) if i != old_leader]
    client = Cluster(others, client_id="replog-bench-failover-watch")
    try:

        async def moved() -> float | None:
            try:
                partitions = (await client.refresh([topic])).topics[0].partitions
            except ReplogError as exc:
                if not exc.retriable:
                    raise
                return None
            leader = partitions[0].leader
            return time.monotonic() if leader not in (NO_LEADER, old_leader) else None

        return await wait_for(moved, f"a new leader for {topic}", WAIT_TIMEOUT_S)
    finally:
        await client.close()


async def strike_leader_once(
    local: LocalCluster, topic: str, batch: bytes, pause: bool
) -> tuple[float, float]:
    """One round: kill (or pause) the leader while producing; return the milliseconds from
    then to the first new ack, and to the other brokers naming a new leader."""
    client = Cluster(local.bootstrap, client_id="replog-bench-failover")
    try:
        admin = Admin(client)
        await admin.create_topic(topic, 1, BROKERS, {"min.insync.replicas": "2"})
        leader = (await wait_for_full_isr(admin, topic))[0].leader
        victim = local.brokers[leader - 1]
        producer = Producer(client, ProducerConfig(acks=ACKS_ALL))
        warm = asyncio.Event()
        struck: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        sending = asyncio.create_task(
            produce_until_acked_after(producer, topic, batch, warm, struck)
        )
        try:
            warming = asyncio.create_task(warm.wait())
            await asyncio.wait(
                {sending, warming}, timeout=WAIT_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
            )
            warming.cancel()
            if sending.done():
                sending.result()  # raises what stopped the producer
            if not warm.is_set():
                raise TimeoutError(f"{WARMUP_ACKS} acks=all batches took over {WAIT_TIMEOUT_S} s")
            struck_at = time.monotonic()
            struck.set_result(struck_at)
            await asyncio.to_thread(victim.pause if pause else victim.kill)
            try:
                moved_at = await wait_for_new_leader(local, topic, leader)
                acked_at = await asyncio.wait_for(sending, WAIT_TIMEOUT_S)
            finally:
                if pause:
                    victim.resume()
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
        if not pause:
            await asyncio.to_thread(victim.start)
        await wait_for_full_isr(admin, topic)
        return (acked_at - struck_at) * 1000, (moved_at - struck_at) * 1000
    finally:
        await client.close()


async def strike_leader_rounds(local: LocalCluster) -> dict[str, list[tuple[float, float]]]:
    batch = build_batch([b"x" * 100] * BATCH_RECORDS)
    rounds: dict[str, list[tuple[float, float]]] = {"kill": [], "pause": []}
    for what, count in (("kill", KILL_ROUNDS), ("pause", PAUSE_ROUNDS)):
        for round_ in range(count):
            topic = f"failover-{what}-{round_}"
            rounds[what].append(await strike_leader_once(local, topic, batch, what == "pause"))
    return rounds


def figures(runs: list[float]) -> dict[str, object]:
    return {
        "median": round(statistics.median(runs), 1),
        "max": round(max(runs), 1),
        "runs": [round(ms, 1) for ms in runs],
    }


def pick_victim(partitions: list[PartitionDescription], controller: int) -> int:
    """Broker 2 if it leads partitions and is not the controller, else the busiest such one."""
    leads = Counter(p.leader for p in partitions if p.leader not in (NO_LEADER, controller))
    if not leads:
        raise RuntimeError(f"no broker other than the controller {controller} leads a partition")
    return PREFERRED_VICTIM if PREFERRED_VICTIM in leads else leads.most_common(1)[0][0]


async def find_log_line(path: Path, pattern: re.Pattern[str], victim: int) -> re.Match[str] | None:
    """The last line of ``path`` matching ``pattern`` for exactly [victim], waited for briefly."""

    async def found() -> re.Match[str] | None:
        text = await asyncio.to_thread(path.read_text, errors="replace")
        matches = [m for m in pattern.finditer(text) if m["gone"] == str(victim)]
        return matches[-1] if matches else None

    try:
        return await wait_for(found, f"{pattern.pattern!r} in {path}", LOG_LINE_TIMEOUT_S)
    except TimeoutError:
        return None


async def move_partitions(local: LocalCluster) -> dict[str, object]:
    """Part (b): kill a non-controller leader of ~1/3 of 1,000 partitions; time the move."""
    client = Cluster(local.bootstrap, client_id="replog-bench-failover")
    try:
        admin = Admin(client)
        await admin.create_topic(MOVE_TOPIC, MOVE_PARTITIONS, BROKERS, timeout_s=CREATE_TIMEOUT_S)
        before = await wait_for_full_isr(admin, MOVE_TOPIC)

        async def controller_id() -> int | None:
            controller = (await client.refresh([MOVE_TOPIC])).controller_id
            return None if controller < 0 else controller

        controller = await wait_for(controller_id, "a known controller")
        victim = pick_victim(before, controller)
        live = {b.broker_id for b in local.brokers} - {victim}

        async def moved() -> bool | None:
            partitions = await describe(admin, MOVE_TOPIC)
            return True if partitions and all(p.leader in live for p in partitions) else None

        killed_wall = time.time()
        killed_at = time.monotonic()
        local.brokers[victim - 1].kill()
        await wait_for(moved, f"a live leader for all {MOVE_PARTITIONS} partitions")
        move_ms = (time.monotonic() - killed_at) * 1000
        controller_log = local.brokers[controller - 1].log_dir / "broker.log"
        noticed = await find_log_line(controller_log, GONE_LINE, victim)
        failover = await find_log_line(controller_log, FAILOVER_LINE, victim)
        return {
            "controller_broker": controller,
            "victim_broker": victim,
            "leaders_moved": sum(p.leader == victim for p in before),
            "move_1000_partitions_ms": round(move_ms, 1),
            "controller_noticed_ms": (
                None if noticed is None else round((log_time(noticed) - killed_wall) * 1000)
            ),
            "controller_failover_ms": None if failover is None else float(failover["ms"]),
            "states_written": None if failover is None else int(failover["written"]),
            "zk_round_trips": None if failover is None else int(failover["trips"]),
        }
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    started = time.monotonic()
    with local_cluster(BROKERS) as local:
        struck = asyncio.run(asyncio.wait_for(strike_leader_rounds(local), PART_TIMEOUT_S))
    with local_cluster(BROKERS) as local:
        move = asyncio.run(asyncio.wait_for(move_partitions(local), PART_TIMEOUT_S))
    emit(
        {
            "bench": "failover",
            "brokers": BROKERS,
            "zk_session_timeout_ms": SESSION_TIMEOUT_MS,
            "batch_records": BATCH_RECORDS,
            "producer_request_timeout_ms": ProducerConfig().request_timeout_ms,
            "kill_to_first_ack_ms": figures([ack for ack, _ in struck["kill"]]),
            "kill_to_new_leader_ms": figures([moved for _, moved in struck["kill"]]),
            "pause_to_first_ack_ms": figures([ack for ack, _ in struck["pause"]]),
            "pause_to_new_leader_ms": figures([moved for _, moved in struck["pause"]]),
            "partitions": MOVE_PARTITIONS,
            **move,
            "seconds": round(time.monotonic() - started, 1),
        }
    )


if __name__ == "__main__":
    main()
