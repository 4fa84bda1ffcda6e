"""Running chaos schedules: a fresh cluster per schedule, the load, the faults, the verdict.

One schedule: start three brokers in a chroot of the shared ZooKeeper, create a topic
(RF 3, min.insync.replicas 2), start the producers and the consumer, let the load warm
up, fire the schedule's faults at their times, undo whatever is still in place, stop the
producers (each drains its unanswered sends up to a deadline), wait until every replica
is back in the ISR at the high watermark, read every partition in full, SIGKILL the
brokers and read each replica's files. The checker judges the history; each replica's
records below the HW must equal the leader's ("replicas diverged" otherwise).

Every wait has a deadline and the whole schedule has one too. Whatever happens, every
broker is killed by PID, the worker threads are joined first (a restart in progress
finishes or times out before the kill), and ZooKeeper is left running for the next one.

With `netns` settings the run makes one network (spark_replica.tools.netns) for all its
schedules: ZooKeeper and each broker on a host of their own, the runner and its load as
the clients; the network faults cut its links, and it is removed when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

from kazoo.exceptions import KazooException

from spark_replica.client import Cluster
from spark_replica.errors import ReplogError
from spark_replica.tools.launcher.brokers import free_port
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.tools.netns import network
from spark_replica.tools.netns.topology import ZOOKEEPER, Topology
from tests.chaos.checker import Counts, Send, Stored, check
from tests.chaos.cluster import ChaosCluster
from tests.chaos.partitions import plan_cuts
from tests.chaos.schedule import Fault, FaultKind, Schedule, ScheduleSettings, Target, generate
from tests.chaos.transaction_checker import TransactionCounts, check_transactions
from tests.chaos.transaction_workload import (
    ReadCommittedLoad,
    TransactionalProducerLoad,
    read_committed_all,
)
from tests.chaos.workload import (
    PRODUCER_CONFIG,
    ConsumerLoad,
    FinalRead,
    ProducerLoad,
    create_topic,
    read_all,
    wait_healthy,
)

T = TypeVar("T")

TOPIC = "chaos"
TRANSACTIONS_TOPIC = "chaos-transactions"
PRODUCERS = 3
TRANSACTIONAL_PRODUCERS = 2
READ_COMMITTED_READERS = 2
WARMUP_S = 1.0
DRAIN_S = PRODUCER_CONFIG.delivery_timeout_ms / 1000 + 2.0
HEAL_TIMEOUT_S = 30.0
FINAL_READ_TIMEOUT_S = 30.0
METADATA_TIMEOUT_S = 3.0
SCHEDULE_DEADLINE_S = 150.0
THREAD_JOIN_S = 30.0
HISTORY_FILE = "history.jsonl"


@dataclass
class ScheduleResult:
    seed: int
    counts: Counts = field(default_factory=Counts)
    transaction_counts: TransactionCounts = field(default_factory=TransactionCounts)
    transactions: int = 0
    acknowledged: int = 0
    unacknowledged: int = 0
    replicas_diverged: int = 0
    healed: bool = True
    hung_brokers: list[int] = field(default_factory=list)  # running, never registered again
    error: str | None = None
    seconds: float = 0.0
    events: list[str] = field(default_factory=list)
    send_errors: Counter[str] = field(default_factory=Counter)
    read_errors: Counter[str] = field(default_factory=Counter)

    @property
    def problem(self) -> bool:
        return (
            not self.counts.clean
            or not self.transaction_counts.clean
            or self.replicas_diverged > 0
            or not self.healed
            or bool(self.hung_brokers)
            or self.error is not None
        )


class _ScheduleRun:
    """The I/O of one schedule; `execute` fills in `result`, `cleanup` always runs."""

    def __init__(self, cluster: ChaosCluster, schedule: Schedule, settings: ScheduleSettings):
        self.cluster = cluster
        self.schedule = schedule
        self.settings = settings
        self.result = ScheduleResult(schedule.seed)
        self.busy: set[int] = set()
        self.zookeeper_busy = False
        self.tasks: list[asyncio.Task[None]] = []
        self.executor = ThreadPoolExecutor(settings.brokers + 2, thread_name_prefix="chaos")
        self.started = time.monotonic()
        self.producers = [ProducerLoad(n, schedule.seed * 1000 + n) for n in range(PRODUCERS)]
        self.consumer = ConsumerLoad()
        self.final: FinalRead | None = None
        on = settings.transactions
        producers, readers = (TRANSACTIONAL_PRODUCERS, READ_COMMITTED_READERS) if on else (0, 0)
        self.transactional = [TransactionalProducerLoad(n) for n in range(producers)]
        self.committed_readers = [ReadCommittedLoad() for _ in range(readers)]
        self.threads: list[threading.Thread] = []

    def note(self, text: str) -> None:
        self.result.events.append(f"{time.monotonic() - self.started:6.2f}s {text}")

    async def blocking(self, function: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    async def execute(self) -> None:
        cluster, settings = self.cluster, self.settings
        await self.blocking(cluster.start)
        await create_topic(cluster.bootstrap, TOPIC, settings.partitions, settings.brokers)
        stop_sending, stop_reading = asyncio.Event(), asyncio.Event()
        sending = [
            asyncio.create_task(p.run(cluster.bootstrap, TOPIC, stop_sending, DRAIN_S))
            for p in self.producers
        ]
        reading = asyncio.create_task(self.consumer.run(cluster.bootstrap, TOPIC, stop_reading))
        stop_transactions, stop_committed_reads = threading.Event(), threading.Event()
        if settings.transactions:
            await create_topic(
                cluster.bootstrap, TRANSACTIONS_TOPIC, settings.partitions, settings.brokers
            )
            self.start_threads(stop_transactions, stop_committed_reads)
        self.tasks = [*sending, reading]
        await asyncio.sleep(WARMUP_S)
        window_start = asyncio.get_running_loop().time()
        faults = [asyncio.create_task(self.apply(f, window_start)) for f in self.schedule.faults]
        self.tasks += faults
        await asyncio.gather(*faults)
        self.note("faults over; healing")
        self.result.hung_brokers = await self.blocking(cluster.heal)
        if self.result.hung_brokers:
            self.note(f"brokers {self.result.hung_brokers} were running unregistered; restarted")
        stop_sending.set()
        stop_transactions.set()
        await asyncio.gather(*sending)
        await self.blocking(self.join_threads, self.threads[: len(self.transactional)])
        self.note("producers stopped")
        self.result.healed = await wait_healthy(
            cluster.bootstrap, TOPIC, settings.brokers, HEAL_TIMEOUT_S
        )
        self.note(f"healed: {self.result.healed}")
        stop_reading.set()
        stop_committed_reads.set()
        await reading
        await self.blocking(self.join_threads, self.threads)
        if settings.transactions:
            await self.check_transactions()
        final = await read_all(cluster.bootstrap, TOPIC, FINAL_READ_TIMEOUT_S)
        if not final.complete:
            self.result.error = f"the final read did not reach the HWs {final.high_watermarks}"
        await self.blocking(cluster.stop_all)
        if self.result.healed:
            self.result.replicas_diverged = self.diverged(final)
        self.final = final
        self.result.counts = check(
            [p.sends() for p in self.producers], self.consumer.observed, final.records
        )

    def start_threads(self, stop_producing: threading.Event, stop_reading: threading.Event) -> None:
        """The transactional producers first, then the readers: the order join_threads
        relies on."""
        bootstrap, partitions = self.cluster.kafka_bootstrap, self.settings.partitions
        for producer in self.transactional:
            args = (bootstrap, TRANSACTIONS_TOPIC, partitions, stop_producing)
            self.threads.append(threading.Thread(target=producer.run, args=args, daemon=True))
        for reader in self.committed_readers:
            args = (bootstrap, TRANSACTIONS_TOPIC, partitions, stop_reading)
            self.threads.append(threading.Thread(target=reader.run, args=args, daemon=True))
        for thread in self.threads:
            thread.start()

    def join_threads(self, threads: list[threading.Thread]) -> None:
        for thread in threads:
            thread.join(THREAD_JOIN_S)
            if thread.is_alive():
                raise RuntimeError(f"{thread.name} did not stop within {THREAD_JOIN_S} s")

    async def check_transactions(self) -> None:
        final = await self.blocking(
            read_committed_all,
            self.cluster.kafka_bootstrap,
            TRANSACTIONS_TOPIC,
            self.settings.partitions,
            FINAL_READ_TIMEOUT_S,
        )
        if final is None:
            self.result.error = "the final read_committed read did not reach the LSOs"
            return
        transactions = [t for p in self.transactional for t in p.transactions]
        reads = [read for reader in self.committed_readers for read in reader.reads]
        self.result.transactions = len(transactions)
        self.result.transaction_counts = check_transactions(transactions, reads, final)

    async def apply(self, fault: Fault, window_start: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, window_start + fault.at_s - loop.time()))
        if fault.kind is FaultKind.ZOOKEEPER_RESTART:
            await self.restart_zookeeper(fault)
            return
        leader_id: int | None = None
        if fault.kind is FaultKind.ONE_WAY_CUT:
            broker_id, leader_id = await self.one_way_ends(fault)
        else:
            resolved = await self.resolve(fault)
            # The role's holder is already under a fault: take the schedule's spare.
            broker_id = fault.broker_id if resolved is None or resolved in self.busy else resolved
        if broker_id in self.busy:
            self.note(f"skipped, broker {broker_id} is busy: {fault.describe()}")
            return
        self.busy.add(broker_id)
        try:
            if fault.on_network:
                await self.fault_network(fault, broker_id, leader_id)
            else:
                await self.fault_broker(fault, broker_id)
        except (ReplogError, KazooException) as exc:
            # The broker may be left down: healing restarts it, or reports it.
            self.note(f"broker {broker_id}: {type(exc).__name__} {exc}")
        finally:
            self.busy.discard(broker_id)

    async def restart_zookeeper(self, fault: Fault) -> None:
        # A slow JVM start can outlast the schedule's allowance: never stop a starting one.
        if self.zookeeper_busy:
            self.note(f"skipped, zookeeper is still restarting: {fault.describe()}")
            return
        self.zookeeper_busy = True
        try:
            self.note("zookeeper stopping")
            await self.blocking(self.cluster.stop_zookeeper)
            await asyncio.sleep(fault.duration_s)
            await self.blocking(self.cluster.start_zookeeper)
            self.note("zookeeper started")
        finally:
            self.zookeeper_busy = False

    async def fault_broker(self, fault: Fault, broker_id: int) -> None:
        self.note(f"broker {broker_id}: {fault.describe()}")
        if fault.kind is FaultKind.PAUSE:
            await self.blocking(self.cluster.pause, broker_id)
            await asyncio.sleep(fault.duration_s)
            await self.blocking(self.cluster.resume, broker_id)
            self.note(f"broker {broker_id} resumed")
            return
        await self.blocking(self.cluster.kill, broker_id)
        if fault.tear is not None:
            torn = await self.blocking(
                self.cluster.tear_tail, broker_id, fault.partition, fault.tear
            )
            self.note(f"broker {broker_id}: {torn}")
        await asyncio.sleep(fault.duration_s)
        await self.blocking(self.cluster.restart, broker_id)
        self.note(f"broker {broker_id} restarted")

    async def fault_network(self, fault: Fault, broker_id: int, leader_id: int | None) -> None:
        cuts = plan_cuts(fault.kind, self.cluster.network, broker_id, leader_id)
        towards = "" if leader_id is None else f" -> leader {leader_id}"
        self.note(f"broker {broker_id}{towards}: {fault.describe()}")
        await self.blocking(self.cluster.cut, fault, cuts)
        await asyncio.sleep(fault.duration_s)
        await self.blocking(self.cluster.uncut, fault)
        self.note(f"broker {broker_id}{towards} healed")

    async def one_way_ends(self, fault: Fault) -> tuple[int, int]:
        """(follower, leader) of a one-way cut: the schedule's broker, or the next one when
        it leads; with no leader known, the schedule's broker and the next (broker to broker)."""
        leader_id = await self.resolve(fault)
        follower_id = fault.broker_id
        if leader_id is None:
            leader_id = follower_id % self.settings.brokers + 1
        elif follower_id == leader_id:
            follower_id = follower_id % self.settings.brokers + 1
        return follower_id, leader_id

    async def resolve(self, fault: Fault) -> int | None:
        if fault.target is Target.BROKER:
            return fault.broker_id
        if fault.target is Target.CONTROLLER:
            return await self.blocking(self.cluster.controller_id)
        # Asking a paused broker, or one the clients are cut from, would only time out.
        unreachable = self.cluster.paused | self.cluster.unreachable()
        live = [
            (b.host, b.port)
            for i, b in self.cluster.brokers.items()
            if b.process is not None and i not in unreachable
        ]
        cluster = Cluster(live, client_id="chaos-runner")
        try:
            await asyncio.wait_for(cluster.refresh([TOPIC]), METADATA_TIMEOUT_S)
            leader = cluster.topic(TOPIC).partitions[fault.partition].leader
        except (ReplogError, TimeoutError, IndexError):
            return None
        finally:
            await cluster.close()
        return leader if leader >= 0 else None

    def diverged(self, final: FinalRead) -> int:
        """Replicas whose records below the HW differ from what the leader served."""
        served: dict[int, dict[int, Stored]] = {p: {} for p in final.high_watermarks}
        for record in final.records:
            served[record.partition][record.offset] = record
        count = 0
        for broker_id in self.cluster.brokers:
            for partition, high_watermark in final.high_watermarks.items():
                held = {
                    r.offset: r
                    for r in self.cluster.read_replica(broker_id, partition)
                    if r.offset < high_watermark
                }
                if held != served[partition]:
                    self.note(f"broker {broker_id} partition {partition} diverges below the HW")
                    count += 1
        return count

    async def cleanup(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            await asyncio.wait(self.tasks)
        await asyncio.to_thread(self.executor.shutdown, True)
        await asyncio.to_thread(self.cluster.stop_all)
        await asyncio.to_thread(self.cluster.start_zookeeper)

    def save_history(self, path: Path) -> None:
        """What the checker judged, as JSON lines, for a look at a problem afterwards."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as file:
            for n, producer in enumerate(self.producers):
                for entry in producer.entries:
                    send = entry.as_send()
                    row = {"producer": n, **_texts(send), "error": entry.error}
                    file.write(json.dumps(row) + "\n")
            for kind, records in (
                ("observed", self.consumer.observed),
                ("final", [] if self.final is None else self.final.records),
            ):
                for record in records:
                    file.write(json.dumps({"kind": kind, **_texts(record)}) + "\n")

    def finish(self) -> ScheduleResult:
        result = self.result
        sends = [send for p in self.producers for send in p.sends()]
        result.acknowledged = sum(1 for send in sends if send.acknowledged)
        result.unacknowledged = len(sends) - result.acknowledged
        for producer in self.producers:
            result.send_errors.update(producer.errors())
        result.read_errors = self.consumer.errors
        result.seconds = time.monotonic() - self.started
        return result


def _texts(record: Send | Stored) -> dict[str, object]:
    return {
        name: value.decode() if isinstance(value, bytes) else value
        for name, value in asdict(record).items()
    }


async def run_schedule(
    zookeeper: EmbeddedZooKeeper,
    schedule: Schedule,
    settings: ScheduleSettings,
    root: Path,
    topology: Topology | None = None,
) -> ScheduleResult:
    cluster = ChaosCluster(zookeeper, root, settings.brokers, TOPIC, topology)
    run = _ScheduleRun(cluster, schedule, settings)
    try:
        async with asyncio.timeout(SCHEDULE_DEADLINE_S):
            await run.execute()
    except TimeoutError:
        run.result.error = f"the schedule did not finish within {SCHEDULE_DEADLINE_S:.0f} s"
    except Exception as exc:  # a harness failure too is reported with the seed to replay
        run.result.error = f"{type(exc).__name__}: {exc}"
    finally:
        await run.cleanup()
    result = run.finish()
    if result.problem:
        run.save_history(root / HISTORY_FILE)
    return result


@dataclass
class Summary:
    first_seed: int
    results: list[ScheduleResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def counts(self) -> Counts:
        total = Counts()
        for result in self.results:
            total += result.counts
        return total

    def as_json(self) -> dict[str, object]:
        counts = self.counts
        transaction_counts = TransactionCounts()
        for result in self.results:
            transaction_counts += result.transaction_counts
        return {
            "schedules": len(self.results),
            "seed": self.first_seed,
            "lost": counts.lost + transaction_counts.lost,
            "duplicated": counts.duplicated + transaction_counts.duplicated,
            "aborted_seen": transaction_counts.aborted_seen,
            "uncommitted_seen": transaction_counts.uncommitted_seen,
            "transactions": sum(r.transactions for r in self.results),
            "reordered": counts.reordered,
            "phantom_reads": counts.phantom_reads,
            "misplaced": counts.misplaced,
            "replicas_diverged": sum(r.replicas_diverged for r in self.results),
            "unhealed": sum(1 for r in self.results if not r.healed),
            "hung_brokers": sum(len(r.hung_brokers) for r in self.results),
            "errors": sum(1 for r in self.results if r.error is not None),
            "acknowledged": sum(r.acknowledged for r in self.results),
            "unacknowledged": sum(r.unacknowledged for r in self.results),
            "seconds": round(self.seconds, 1),
            "problem_seeds": [r.seed for r in self.results if r.problem],
        }


def report(result: ScheduleResult, schedule: Schedule, root: Path, verbose: bool) -> None:
    """One line per schedule on stderr; the story of one that found a problem (or of
    every one, verbose)."""
    counts = {
        name: n
        for name, n in {**asdict(result.counts), **asdict(result.transaction_counts)}.items()
        if n
    }
    print(
        f"seed {result.seed}: {'PROBLEM' if result.problem else 'ok'} {counts or ''} "
        f"acked {result.acknowledged} unacked {result.unacknowledged} "
        f"in {result.seconds:.1f}s; faults: {'; '.join(schedule.describe())}",
        file=sys.stderr,
        flush=True,
    )
    if result.problem or verbose:
        for line in [
            *result.events,
            f"send errors {dict(result.send_errors)}",
            f"read errors {dict(result.read_errors)}",
            f"error {result.error}" if result.error else "",
            f"healed {result.healed}, replicas diverged {result.replicas_diverged}",
            f"broker logs and {HISTORY_FILE} kept in {root}" if result.problem else "",
        ]:
            if line:
                print(f"    {line}", file=sys.stderr, flush=True)


def run_schedules(
    first_seed: int,
    count: int,
    root: Path,
    settings: ScheduleSettings | None = None,
    verbose: bool = False,
) -> Summary:
    """Run `count` schedules, seeds first_seed, first_seed + 1, ...; one ZooKeeper (and,
    with `netns` settings, one network) for all.

    The directory of a schedule that found nothing is removed; a problem's is kept.
    """
    settings = settings or ScheduleSettings()
    summary = Summary(first_seed)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        topology = None
        if settings.netns:
            topology = network.create_network(range(1, settings.brokers + 1))
            stack.callback(network.destroy_network, topology)
        zookeeper = _zookeeper(root / "zookeeper", topology)
        zookeeper.start()
        stack.callback(zookeeper.stop)
        for seed in range(first_seed, first_seed + count):
            schedule = generate(seed, settings)
            directory = root / f"schedule-{seed}"
            result = asyncio.run(run_schedule(zookeeper, schedule, settings, directory, topology))
            summary.results.append(result)
            report(result, schedule, directory, verbose)
            if not result.problem:
                with contextlib.suppress(OSError):
                    shutil.rmtree(directory)
    summary.seconds = time.monotonic() - started
    return summary


def _zookeeper(data_dir: Path, topology: Topology | None) -> EmbeddedZooKeeper:
    if topology is None:
        return EmbeddedZooKeeper(free_port(), data_dir)
    return EmbeddedZooKeeper(
        free_port(),
        data_dir,
        host=topology.address(ZOOKEEPER),
        command_prefix=topology.exec_prefix(ZOOKEEPER),
    )
