"""The controller's reads and writes in ZooKeeper. Every function blocks: call from a thread.

Fencing: winning the election creates `/controller` and bumps `/controller_epoch` in one
multi-op, and every later write is a multi-op that also checks the `/controller_epoch`
zkVersion this controller set. A deposed controller's writes therefore fail as a whole
(ControllerMovedError), and it resigns instead of overwriting its successor's decisions.
Each leaderAndISR write is also conditional on the zkVersion the controller last saw, so
it never overwrites an ISR change a leader made meanwhile; such partitions come back as
conflicts to be re-read and decided again.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass

from kazoo.client import KazooClient, TransactionRequest
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import ZnodeStat

from brokerd.controller.context import LeaderAndIsr, LiveBroker
from brokerd.controller.decisions import StateWrite
from brokerd.replication import topic_configs
from spark_replica import reassignment
from spark_replica.errors import (
    ReplogError,
    ZnodeExistsError,
    ZnodeMissingError,
    ZnodeVersionError,
)
from spark_replica.reassignment import PartitionMove
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.kazoo_errors import (
    children_if_present,
    failures,
    read_if_present,
    translated,
)
from spark_replica.zk.multi_read import Found, get_many
from spark_replica.zk.multi_write import MultiWrite

# Operations per multi-op: far below ZooKeeper's 1 MB request limit for state znodes.
MAX_OPS_PER_MULTI = 500
# Read-modify-write attempts on a topic assignment that keeps changing under us.
MAX_ASSIGNMENT_ATTEMPTS = 5


class ControllerMovedError(ReplogError):
    """Another broker became controller: this one must stop making decisions."""


@dataclass
class WriteOutcome:
    written: dict[TopicPartition, LeaderAndIsr]
    conflicts: list[TopicPartition]
    round_trips: int


def try_become_controller(zk: KazooClient, broker_id: int) -> tuple[int, int] | None:
    """(epoch, epoch zkVersion) if this broker won the election, None if another holds it."""
    found = read_if_present(zk, znodes.CONTROLLER_EPOCH_PATH)
    if found is None:  # the first election in this cluster
        with contextlib.suppress(ZnodeExistsError), translated():
            zk.create(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(0))
        found = read_if_present(zk, znodes.CONTROLLER_EPOCH_PATH)
        if found is None:
            raise ReplogError(f"{znodes.CONTROLLER_EPOCH_PATH} vanished right after it was made")
    data, stat = found
    epoch = znodes.decode_controller_epoch(data) + 1
    with translated():
        transaction = zk.transaction()
        transaction.create(
            znodes.CONTROLLER_PATH,
            znodes.ControllerRegistration(broker_id).encode(),
            ephemeral=True,
        )
        transaction.set_data(
            znodes.CONTROLLER_EPOCH_PATH,
            znodes.encode_controller_epoch(epoch),
            version=stat.version,
        )
        results = transaction.commit()
    if any(isinstance(result, Exception) for result in results):
        return None
    return epoch, stat.version + 1


@dataclass(frozen=True)
class ControllerSeat:
    """Who holds `/controller`, with the `/controller_epoch` zkVersion its election set."""

    broker_id: int
    epoch_zk_version: int
    registration: znodes.BrokerRegistration
    broker_epoch: int  # the czxid of its registration


def read_controller_seat(zk: KazooClient) -> ControllerSeat | None:
    """The current controller, or None if there is none or it is changing hands.

    The election creates `/controller` and bumps `/controller_epoch` in one multi-op, so
    the two belong together exactly when the first's czxid is the second's mzxid.
    """
    held, epoch = get_many(zk, [znodes.CONTROLLER_PATH, znodes.CONTROLLER_EPOCH_PATH])
    if held is None or epoch is None or held[1].czxid != epoch[1].mzxid:
        return None
    broker_id = znodes.ControllerRegistration.decode(held[0]).broker_id
    registered = read_if_present(zk, znodes.broker_path(broker_id))
    if registered is None:
        return None
    registration = znodes.BrokerRegistration.decode(broker_id, registered[0])
    return ControllerSeat(broker_id, epoch[1].version, registration, registered[1].czxid)


def vacate_dead_controller_seat(zk: KazooClient, epoch_zk_version: int) -> bool:
    """Delete `/controller` for a controller whose process died, so that the others
    elect a successor now rather than when its session expires; True if deleted.

    Fenced by the epoch's zkVersion that controller's election set: if anyone has been
    elected since, nothing is deleted.
    """
    with translated():
        transaction = zk.transaction()
        transaction.check(znodes.CONTROLLER_EPOCH_PATH, epoch_zk_version)
        transaction.delete(znodes.CONTROLLER_PATH)
        results = transaction.commit()
    return not any(isinstance(result, Exception) for result in results)


def current_controller(zk: KazooClient) -> int:
    found = read_if_present(zk, znodes.CONTROLLER_PATH)
    return -1 if found is None else znodes.ControllerRegistration.decode(found[0]).broker_id


def read_live_brokers(zk: KazooClient) -> dict[int, LiveBroker]:
    broker_ids = topic_store.live_broker_ids(zk)
    paths = [znodes.broker_path(broker_id) for broker_id in broker_ids]
    return _live_brokers(broker_ids, get_many(zk, paths))


def _live_brokers(broker_ids: list[int], found: list[Found]) -> dict[int, LiveBroker]:
    brokers: dict[int, LiveBroker] = {}
    for broker_id, registered in zip(broker_ids, found, strict=True):
        if registered is not None:
            registration = znodes.BrokerRegistration.decode(broker_id, registered[0])
            brokers[broker_id] = LiveBroker(registration, registered[1].czxid)
    return brokers


def read_assignments(
    zk: KazooClient, topics: Iterable[str]
) -> tuple[dict[TopicPartition, list[int]], dict[str, dict[str, str]]]:
    """The assignments and configs of `topics` (those that exist), in one round trip."""
    names = list(topics)
    paths = [znodes.topic_path(t) for t in names] + [znodes.topic_config_path(t) for t in names]
    found = get_many(zk, paths)
    assignments: dict[TopicPartition, list[int]] = {}
    configs: dict[str, dict[str, str]] = {}
    for i, topic in enumerate(names):
        assignment, config = found[i], found[len(names) + i]
        if assignment is None:
            continue
        configs[topic] = (
            {} if config is None else znodes.TopicConfig.decode(topic, config[0]).config
        )
        replicas_of = znodes.TopicAssignment.decode(topic, assignment[0]).partitions
        for partition, replicas in replicas_of.items():
            assignments[TopicPartition(topic, partition)] = replicas
    return assignments, configs


def read_states(
    zk: KazooClient, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, LeaderAndIsr]:
    """The leaderAndISR states of `partitions` (those written), in one round trip."""
    wanted = list(partitions)
    paths = [znodes.partition_state_path(tp.topic, tp.partition) for tp in wanted]
    states: dict[TopicPartition, LeaderAndIsr] = {}
    for tp, path, found in zip(wanted, paths, get_many(zk, paths), strict=True):
        if found is not None:
            data, stat = found
            state = znodes.PartitionState.decode(path, data)
            states[tp] = LeaderAndIsr(state, stat.version, stat.mzxid)
    return states


def write_states(zk: KazooClient, epoch_zk_version: int, writes: list[StateWrite]) -> WriteOutcome:
    """Write leaderAndISR states in multi-ops fenced by the controller epoch.

    Every multi-op of a round is sent before the first answer is waited for, so writing
    thousands of states costs a round trip, not one per MAX_OPS_PER_MULTI. A multi-op
    failed by a conflicting write is sent again without it in the next round; the
    conflicts are returned to be re-read and decided again. New partitions get their
    parent znodes in the same multi-op as their first state.
    """
    outcome = WriteOutcome({}, [], 0)
    missing = _missing_parents(zk, [w for w in writes if w.expected_version is None], outcome)
    chunks = [writes[i : i + MAX_OPS_PER_MULTI] for i in range(0, len(writes), MAX_OPS_PER_MULTI)]
    while chunks:
        outcome.round_trips += 1
        with translated():
            built = [_transaction(zk, epoch_zk_version, chunk, missing) for chunk in chunks]
            sent = [transaction.send(zk) for transaction, _ in built]
        again: list[list[StateWrite]] = []
        landed: list[tuple[list[StateWrite], list[object]]] = []
        for chunk, (_, owners), answer in zip(chunks, built, sent, strict=True):
            with translated():
                results = answer.get()
            failed = _failed_write(owners, results)
            if failed is None:
                landed.append((chunk, results))
                continue
            outcome.conflicts.append(failed.tp)
            rest = [w for w in chunk if w is not failed]
            if rest:
                again.append(rest)
        for (chunk, _), zxid in zip(landed, _zxids_of(zk, landed, outcome), strict=True):
            for write in chunk:
                version = 0 if write.expected_version is None else write.expected_version + 1
                outcome.written[write.tp] = LeaderAndIsr(write.state, version, zxid)
        chunks = again
    return outcome


def _missing_parents(zk: KazooClient, creates: list[StateWrite], outcome: WriteOutcome) -> set[str]:
    """The partition znodes that states about to be created still lack, in one round trip;
    the topics' `partitions` znodes are created here (in one more) where missing."""
    if not creates:
        return set()
    outcome.round_trips += 1
    paths = sorted({znodes.partition_path(w.tp.topic, w.tp.partition) for w in creates})
    with translated():
        pending = [zk.exists_async(path) for path in paths]
        missing = {
            path for path, answer in zip(paths, pending, strict=True) if answer.get() is None
        }
    topics = sorted(
        {
            w.tp.topic
            for w in creates
            if znodes.partition_path(w.tp.topic, w.tp.partition) in missing
        }
    )
    if topics:
        outcome.round_trips += 1
        with translated():
            pending = [zk.create_async(znodes.partitions_path(t), makepath=True) for t in topics]
        for answer in pending:
            with contextlib.suppress(ZnodeExistsError), translated():
                answer.get()
    return missing


def _transaction(
    zk: KazooClient, epoch_zk_version: int, chunk: list[StateWrite], missing: set[str]
) -> tuple[MultiWrite, list[StateWrite]]:
    """The multi-op writing `chunk`, and the write each operation after the epoch check
    belongs to."""
    transaction = MultiWrite.for_session(zk)
    transaction.check(znodes.CONTROLLER_EPOCH_PATH, epoch_zk_version)
    owners: list[StateWrite] = []
    for write in chunk:
        path = znodes.partition_state_path(write.tp.topic, write.tp.partition)
        if write.expected_version is None:
            parent = znodes.partition_path(write.tp.topic, write.tp.partition)
            if parent in missing:
                transaction.create(parent, b"")
                owners.append(write)
            transaction.create(path, write.state.encode())
        else:
            transaction.set_data(path, write.state.encode(), write.expected_version)
        owners.append(write)
    return transaction, owners


def _failed_write(owners: list[StateWrite], results: list[object]) -> StateWrite | None:
    """The write whose condition failed a multi-op, None if it landed; raises
    ControllerMovedError if the epoch check failed it."""
    errors = failures(results)
    if errors[0] is not None:
        raise ControllerMovedError("the controller epoch moved on: another controller is active")
    for write, error in zip(owners, errors[1:], strict=True):
        if isinstance(error, (ZnodeVersionError, ZnodeExistsError, ZnodeMissingError)):
            return write
        if error is not None:
            raise ReplogError(f"writing the state of {write.tp} failed: {error}")
    return None


def _zxids_of(
    zk: KazooClient, landed: list[tuple[list[StateWrite], list[object]]], outcome: WriteOutcome
) -> list[int]:
    """The zxid of each committed multi-op (all its operations share it): from a set's
    stat, or, for one that only created znodes, read back from one of them (all such
    reads in one round trip)."""
    zxids: list[int | None] = []
    for _, results in landed:
        stats = [r.mzxid for r in results if isinstance(r, ZnodeStat)]
        zxids.append(stats[0] if stats else None)
    unknown = [i for i, zxid in enumerate(zxids) if zxid is None]
    if unknown:
        outcome.round_trips += 1
        tps = [landed[i][0][0].tp for i in unknown]
        with translated():
            pending = [
                zk.exists_async(znodes.partition_state_path(tp.topic, tp.partition)) for tp in tps
            ]
            stats = [answer.get() for answer in pending]
        for i, tp, stat in zip(unknown, tps, stats, strict=True):
            if stat is None:
                raise ReplogError(f"the state of {tp} vanished right after it was created")
            zxids[i] = stat.czxid
    return [zxid for zxid in zxids if zxid is not None]


def take_isr_change_notifications(
    zk: KazooClient,
) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """Read and delete every ISR change notification; return the partitions they name,
    and among them those whose leader stepped down."""
    children = children_if_present(zk, znodes.ISR_CHANGE_NOTIFICATION_PATH)
    paths = _notification_paths(children)
    return _take_notifications(zk, paths, get_many(zk, paths))


def _notification_paths(children: list[str]) -> list[str]:
    return [f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{child}" for child in sorted(children)]


def _take_notifications(
    zk: KazooClient, paths: list[str], found: list[Found]
) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """Decode the notifications read and delete them."""
    changed: set[TopicPartition] = set()
    stepped_down: set[TopicPartition] = set()
    taken = []
    for path, notified in zip(paths, found, strict=True):
        if notified is None:
            continue
        notification = znodes.IsrChangeNotification.decode(path, notified[0])
        named = {TopicPartition(t, p) for t, p in notification.partitions}
        changed |= named
        if notification.leader_stepped_down:
            stepped_down |= named
        taken.append(path)
    delete_all(zk, taken)
    return changed, stepped_down


def delete_all(zk: KazooClient, paths: list[str]) -> None:
    """Delete znodes (those still there) in one round trip, pipelined like get_many's reads."""
    with translated():
        pending = [zk.delete_async(path) for path in paths]
    for answer in pending:
        with contextlib.suppress(ZnodeMissingError), translated():
            answer.get()


def read_preferred_election(zk: KazooClient) -> list[TopicPartition] | None:
    """The partitions of a pending preferred replica election, or None if none is pending."""
    found = read_if_present(zk, znodes.PREFERRED_REPLICA_ELECTION_PATH)
    if found is None:
        return None
    election = znodes.PreferredReplicaElection.decode(found[0])
    return [TopicPartition(t, p) for t, p in election.partitions]


def finish_preferred_election(zk: KazooClient) -> None:
    with contextlib.suppress(ZnodeMissingError), translated():
        zk.delete(znodes.PREFERRED_REPLICA_ELECTION_PATH)


def _commit_fenced(transaction: TransactionRequest) -> list[object]:
    """Commit a multi-op whose first operation checks the controller epoch."""
    with translated():
        results = transaction.commit()
    if failures(results)[0] is not None:
        raise ControllerMovedError("the controller epoch moved on: another controller is active")
    return results


def write_replicas(
    zk: KazooClient, epoch_zk_version: int, replicas: dict[TopicPartition, list[int]]
) -> None:
    """Set the replica lists of some partitions in their topics' assignment znodes.

    Read-modify-write, conditional on each znode's version (partitions may be added to a
    topic meanwhile), and fenced by the controller epoch.
    """
    for topic in sorted({tp.topic for tp in replicas}):
        for _ in range(MAX_ASSIGNMENT_ATTEMPTS):
            found = read_if_present(zk, znodes.topic_path(topic))
            if found is None:
                break  # deleted meanwhile: nothing left to reassign
            data, stat = found
            assignment = znodes.TopicAssignment.decode(topic, data)
            partitions = dict(assignment.partitions)
            partitions.update({tp.partition: r for tp, r in replicas.items() if tp.topic == topic})
            transaction = zk.transaction()
            transaction.check(znodes.CONTROLLER_EPOCH_PATH, epoch_zk_version)
            transaction.set_data(
                znodes.topic_path(topic),
                znodes.TopicAssignment(topic, partitions).encode(),
                version=stat.version,
            )
            error = failures(_commit_fenced(transaction))[1]
            if error is None:
                break
            if not isinstance(error, (ZnodeVersionError, ZnodeMissingError)):
                raise ReplogError(f"writing the assignment of {topic} failed: {error}")
        else:
            raise ReplogError(f"the assignment of {topic} kept changing; will retry later")


def write_reassignment(
    zk: KazooClient, epoch_zk_version: int, remaining: list[PartitionMove]
) -> None:
    """Keep only `remaining` in the reassignment znode, deleting it when nothing remains."""
    transaction = zk.transaction()
    transaction.check(znodes.CONTROLLER_EPOCH_PATH, epoch_zk_version)
    if remaining:
        transaction.set_data(
            znodes.REASSIGN_PARTITIONS_PATH, reassignment.plan_to_json(remaining).encode()
        )
    else:
        transaction.delete(znodes.REASSIGN_PARTITIONS_PATH)
    error = failures(_commit_fenced(transaction))[1]
    if error is not None and not isinstance(error, ZnodeMissingError):
        raise ReplogError(f"updating {znodes.REASSIGN_PARTITIONS_PATH} failed: {error}")


def read_config_changes(zk: KazooClient, after: int) -> tuple[set[str] | None, int]:
    """Topics named by notifications newer than `after` (None: unknown, re-read all)."""
    children = children_if_present(zk, znodes.CONFIG_CHANGES_PATH)
    return topic_configs.read_changed_topics(zk, children, after)


def purge_config_changes(zk: KazooClient, older_than_ms: int) -> int:
    """Delete notifications created more than `older_than_ms` ago; return how many."""
    cutoff = time.time() * 1000 - older_than_ms
    purged = 0
    for child in children_if_present(zk, znodes.CONFIG_CHANGES_PATH):
        path = znodes.config_change_path(child)
        try:
            with translated():
                _, stat = zk.get(path)
                if stat.ctime <= cutoff:
                    zk.delete(path)
                    purged += 1
        except ZnodeMissingError:
            continue
    return purged


@dataclass(frozen=True)
class PendingAdminWork:
    """Admin requests a new controller finds waiting: its predecessor's unfinished work,
    or requests made while there was no controller."""

    topic_deletions: bool
    reassignment: bool
    preferred_election: bool


@dataclass(frozen=True)
class ClusterAtTakeover:
    """What a new controller reads before it reads the topics."""

    live_brokers: dict[int, LiveBroker]
    newest_config_change: int  # the configs it reads next cover the changes up to this
    topics: list[str]
    stepped_down: set[TopicPartition]  # leaders that stepped down, to elect again
    admin: PendingAdminWork


def read_cluster_at_takeover(zk: KazooClient) -> ClusterAtTakeover:
    """The brokers, config changes, topics and pending admin requests, taking the ISR
    change notifications (the states read next cover them; later ones notify the watch),
    in three round trips: the children, then the registrations and notifications, then
    the notifications' deletion (blocking)."""
    listed = [
        znodes.BROKER_IDS_PATH,
        znodes.CONFIG_CHANGES_PATH,
        znodes.TOPICS_PATH,
        znodes.ISR_CHANGE_NOTIFICATION_PATH,
        znodes.DELETE_TOPICS_PATH,
    ]
    with translated():
        pending = [zk.get_children_async(path) for path in listed]
        reassignment = zk.exists_async(znodes.REASSIGN_PARTITIONS_PATH)
        preferred = zk.exists_async(znodes.PREFERRED_REPLICA_ELECTION_PATH)
    brokers, config_changes, topics, notifications, deletions = (
        _children(answer) for answer in pending
    )
    with translated():
        admin = PendingAdminWork(
            bool(deletions), reassignment.get() is not None, preferred.get() is not None
        )
    broker_ids = sorted(int(c) for c in brokers if c.isdigit())
    notification_paths = _notification_paths(notifications)
    found = get_many(zk, [znodes.broker_path(b) for b in broker_ids] + notification_paths)
    _, stepped_down = _take_notifications(zk, notification_paths, found[len(broker_ids) :])
    return ClusterAtTakeover(
        _live_brokers(broker_ids, found[: len(broker_ids)]),
        topic_configs.newest_change(config_changes),
        sorted(topics),
        stepped_down,
        admin,
    )


def _children(answer: IAsyncResult) -> list[str]:
    """A pipelined get_children's answer; nothing for a znode that does not exist."""
    try:
        with translated():
            children: list[str] = answer.get()
            return children
    except ZnodeMissingError:
        return []
