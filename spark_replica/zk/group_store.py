"""Committed offsets of consumer groups in ZooKeeper, as Kafka 0.8 kept them.

`/consumers/<group>/offsets/<topic>/<partition>` holds
`{"version":1,"offset":N,"leader_epoch":E,"metadata":"...","commit_timestamp":ms}`.

Why ZooKeeper and not an internal compacted topic like Kafka's `__consumer_offsets`:
the offsets are then replicated and durable through the same quorum the controller
already trusts, there is no internal topic to create, replicate and compact before the
first commit, and a broker that becomes a group's coordinator loads the group with a
few reads instead of replaying a log partition. The price is ZooKeeper write load: one
multi-op per commit request, which suits consumers committing every few seconds.

Group ids are percent-encoded into znode names (a group id may hold "/" or be "."),
so the common ids read as themselves. Blocking kazoo calls: the coordinator runs them
with asyncio.to_thread.

Bounds. ZooKeeper refuses a request over its `jute.maxbuffer` (1 MiB by default) by
dropping the connection, which costs the broker its session and, on the controller, the
controller. So each multi-op is kept to MAX_TRANSACTION_BYTES of encoded paths and data
(JSON may escape one byte of metadata to six), and a single offset whose znode would not
fit one is refused (OFFSET_METADATA_TOO_LARGE).

Fencing. The data of `/consumers/<group>/offsets` names the coordinator that loaded the
group last; loading writes it (`claim_group`) and every later write of that coordinator
checks its version in the same multi-op, so a coordinator that another one has since
loaded the group on writes nothing (NOT_COORDINATOR) rather than over the other's commits.
Each write also checks that its topics' znodes exist, so that no commit lands on a topic
after its deletion has removed it (the controller then removes the offsets of the topic:
`delete_topic_offsets`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

from kazoo.client import KazooClient

from spark_replica.errors import (
    BrokerResponseError,
    InvalidGroupIdError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    UnknownTopicOrPartitionError,
    ZnodeExistsError,
    ZnodeMissingError,
    ZooKeeperError,
)
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes
from spark_replica.zk.kazoo_errors import children_if_present, failures, translated

CONSUMERS_PATH = "/consumers"
VERSION = 1
# Operations per multi-op, whatever their size.
MAX_OPS_PER_TRANSACTION = 500
# Encoded bytes per multi-op: a quarter of ZooKeeper's default jute.maxbuffer (1 MiB).
MAX_TRANSACTION_BYTES = 256 * 1024
# What an operation costs besides its path and data: its header, version, flags and the
# ACL a create carries (a digest ACL is about a hundred bytes), rounded up.
OP_OVERHEAD_BYTES = 256
# The longest group id (UTF-8 bytes): its percent-encoding is part of every znode path.
MAX_GROUP_ID_BYTES = 1024
# Write attempts when another writer creates a committed offset's znode meanwhile.
WRITE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1

    def encode(self) -> bytes:
        value = {
            "version": VERSION,
            "offset": self.offset,
            "leader_epoch": self.leader_epoch,
            "metadata": self.metadata,
            "commit_timestamp": self.commit_timestamp_ms,
        }
        return json.dumps(value, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, path: str, data: bytes) -> CommittedOffset:
        try:
            value = json.loads(data.decode("utf-8"))
            return cls(
                offset=int(value["offset"]),
                leader_epoch=int(value.get("leader_epoch", -1)),
                metadata=str(value.get("metadata") or ""),
                commit_timestamp_ms=int(value.get("commit_timestamp", -1)),
            )
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ZooKeeperError(f"{path} does not hold a committed offset: {exc!r}") from exc


def _znode_name(name: str) -> str:
    encoded = quote(name, safe="", errors="surrogateescape")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def group_path(group_id: str) -> str:
    return f"{CONSUMERS_PATH}/{_znode_name(group_id)}"


def offsets_path(group_id: str) -> str:
    return f"{group_path(group_id)}/offsets"


def topic_offsets_path(group_id: str, topic: str) -> str:
    return f"{offsets_path(group_id)}/{_znode_name(topic)}"


def offset_path(group_id: str, tp: TopicPartition) -> str:
    return f"{topic_offsets_path(group_id, tp.topic)}/{tp.partition}"


def read_offsets(zk: KazooClient, group_id: str) -> dict[TopicPartition, CommittedOffset]:
    """Every committed offset of the group (none if it has none)."""
    paths: dict[TopicPartition, str] = {}
    for topic_name in children_if_present(zk, offsets_path(group_id)):
        topic = unquote(topic_name, errors="surrogateescape")
        for partition in children_if_present(zk, topic_offsets_path(group_id, topic)):
            if partition.isdigit():
                tp = TopicPartition(topic, int(partition))
                paths[tp] = offset_path(group_id, tp)
    with translated():
        pending = {tp: zk.get_async(path) for tp, path in paths.items()}
    offsets = {}
    for tp, result in pending.items():
        try:
            with translated():
                data, _ = result.get()
        except ZnodeMissingError:
            continue  # deleted between the listing and the read
        offsets[tp] = CommittedOffset.decode(paths[tp], data)
    return offsets


def check_group_id(group_id: str) -> None:
    """InvalidGroupIdError unless the group id can name the group's znodes."""
    if not group_id:
        raise InvalidGroupIdError("the group id is empty")
    size = len(group_id.encode("utf-8", "surrogateescape"))
    if size > MAX_GROUP_ID_BYTES:
        raise InvalidGroupIdError(
            f"the group id is {size} bytes long; at most {MAX_GROUP_ID_BYTES} are allowed"
        )


def op_bytes(path: str, data: bytes = b"") -> int:
    """What one operation on `path` writing `data` adds to a multi-op request."""
    return len(path.encode("utf-8", "surrogateescape")) + len(data) + OP_OVERHEAD_BYTES


def _fixed_bytes(group_id: str, topic: str) -> int:
    """A multi-op's bytes besides its offsets: the fence check and one topic check."""
    return op_bytes(offsets_path(group_id)) + op_bytes(znodes.topic_path(topic))


def fits_one_transaction(group_id: str, tp: TopicPartition, committed: CommittedOffset) -> bool:
    """Whether the offset's write fits a multi-op (with its checks) under the byte bound."""
    size = op_bytes(offset_path(group_id, tp), committed.encode())
    return size + _fixed_bytes(group_id, tp.topic) <= MAX_TRANSACTION_BYTES


def plan_chunks(
    ops: Sequence[tuple[str, int]],
    fixed_bytes: int,
    max_bytes: int = MAX_TRANSACTION_BYTES,
    max_ops: int = MAX_OPS_PER_TRANSACTION,
    check_topics: bool = True,
) -> list[range]:
    """Split operations, given as (topic, bytes) in order, into consecutive runs that each
    fit one multi-op: at most `max_ops` operations and `max_bytes`, counting `fixed_bytes`
    once per run and, with `check_topics`, one topic check per topic of the run.
    ValueError if one operation cannot fit alone."""

    def check_bytes(topic: str) -> int:
        return op_bytes(znodes.topic_path(topic)) if check_topics else 0

    runs: list[range] = []
    start, size, topics = 0, fixed_bytes, set[str]()
    for index, (topic, op_size) in enumerate(ops):
        extra = op_size + (0 if topic in topics else check_bytes(topic))
        if index > start and (size + extra > max_bytes or index - start >= max_ops):
            runs.append(range(start, index))
            start, size, topics = index, fixed_bytes, set()
            extra = op_size + check_bytes(topic)
        if fixed_bytes + extra > max_bytes:
            raise ValueError(f"an operation of {op_size} bytes cannot fit a multi-op")
        size += extra
        topics.add(topic)
    if start < len(ops):
        runs.append(range(start, len(ops)))
    return runs


def claim_group(zk: KazooClient, group_id: str, broker_id: int) -> int:
    """Record that `broker_id` now coordinates the group; the fence version its writes
    check. Any coordinator that loaded the group before is fenced from then on."""
    check_group_id(group_id)
    path = offsets_path(group_id)
    data = json.dumps({"version": VERSION, "coordinator": broker_id}).encode()
    for _ in range(WRITE_ATTEMPTS):
        try:
            with translated():
                return int(zk.set(path, data).version)
        except ZnodeMissingError:
            with contextlib.suppress(ZnodeExistsError), translated():
                zk.create(path, data, makepath=True)
                return 0
    raise ZooKeeperError(f"could not claim {path}: it keeps being deleted and created")


def write_offsets(
    zk: KazooClient,
    group_id: str,
    commits: Mapping[TopicPartition, CommittedOffset],
    fence: int | None = None,
) -> dict[TopicPartition, BrokerResponseError]:
    """Store the commits durably, in multi-ops within the byte bound, each all-or-nothing
    and, given a `fence` (claim_group's version), conditional on it.

    Returns the partitions not written because their topic no longer exists. Raises
    NotCoordinatorError once another coordinator has claimed the group (or it was
    deleted), OffsetMetadataTooLargeError for an offset that cannot fit a multi-op, and
    ZooKeeperError if the commits could not be stored."""
    check_group_id(group_id)
    items = [
        (tp, offset_path(group_id, tp), committed.encode())
        for tp, committed in sorted(commits.items())
    ]
    sizes = [(tp.topic, op_bytes(path, data)) for tp, path, data in items]
    try:
        runs = plan_chunks(sizes, op_bytes(offsets_path(group_id)))
    except ValueError as exc:
        raise OffsetMetadataTooLargeError(f"group {group_id!r}: {exc}") from None
    refused: dict[TopicPartition, BrokerResponseError] = {}
    for run in runs:
        chunk = {tp: (path, data) for tp, path, data in items[run.start : run.stop]}
        refused.update(_write_chunk(zk, group_id, chunk, fence))
    return refused


def _write_chunk(
    zk: KazooClient,
    group_id: str,
    chunk: dict[TopicPartition, tuple[str, bytes]],
    fence: int | None,
) -> dict[TopicPartition, BrokerResponseError]:
    refused: dict[TopicPartition, BrokerResponseError] = {}
    conflicts = 0
    while conflicts < WRITE_ATTEMPTS:
        topics = sorted({tp.topic for tp in chunk})
        with translated():
            present = {t: zk.exists_async(znodes.topic_path(t)) for t in topics}
            listed = {t: zk.get_children_async(topic_offsets_path(group_id, t)) for t in topics}
        existing: dict[str, set[str]] = {}
        for topic in topics:
            with translated():
                exists = present[topic].get() is not None
            if not exists:
                _refuse_topic(chunk, refused, topic)
                continue
            try:
                with translated():
                    existing[topic] = set(listed[topic].get())
            except ZnodeMissingError:
                with translated():
                    zk.ensure_path(topic_offsets_path(group_id, topic))
                existing[topic] = set()
        if not chunk:
            return refused
        transaction = zk.transaction()
        checks: list[str | None] = []  # per operation: the topic it checks, None otherwise
        if fence is not None:
            transaction.check(offsets_path(group_id), fence)
            checks.append(None)
        for topic in existing:
            transaction.check(znodes.topic_path(topic), -1)
            checks.append(topic)
        for tp, (path, data) in chunk.items():
            if str(tp.partition) in existing[tp.topic]:
                transaction.set_data(path, data)
            else:
                transaction.create(path, data)
            checks.append(None)
        with translated():
            results = transaction.commit()
        errors = failures(results)
        failed = next((i for i, e in enumerate(errors) if e is not None), None)
        if failed is None:
            return refused
        error = errors[failed]
        if fence is not None and failed == 0:
            raise NotCoordinatorError(
                f"another coordinator loaded group {group_id!r} since this one did"
            ) from error
        gone = checks[failed]
        if gone is not None:
            _refuse_topic(chunk, refused, gone)
            continue
        conflicts += 1
        if not isinstance(error, ZnodeExistsError | ZnodeMissingError):
            assert error is not None
            raise error
    raise ZooKeeperError(f"committing offsets of group {group_id!r} kept conflicting")


def _refuse_topic(
    chunk: dict[TopicPartition, tuple[str, bytes]],
    refused: dict[TopicPartition, BrokerResponseError],
    topic: str,
) -> None:
    for tp in [tp for tp in chunk if tp.topic == topic]:
        del chunk[tp]
        refused[tp] = UnknownTopicOrPartitionError(f"topic {topic!r} was deleted")


def expire_offsets(
    zk: KazooClient,
    group_id: str,
    known: Iterable[TopicPartition],
    expired: Iterable[TopicPartition],
    fence: int,
    remove_empty_group: bool = True,
) -> bool:
    """Delete the expired offsets of the group (and, with `remove_empty_group`, the group
    itself once no offset is left), conditional on the coordinator's fence; True if the
    group was removed.

    `known` are the offsets read when expiry was decided: a topic's znode goes with its
    last offset, and a commit made meanwhile (never by this coordinator, which holds the
    group's lock) makes the deletion fail rather than vanish."""
    check_group_id(group_id)
    doomed = set(expired)
    remaining = set(known) - doomed
    paths = [offset_path(group_id, tp) for tp in sorted(doomed)]
    paths += [
        topic_offsets_path(group_id, topic)
        for topic in sorted({tp.topic for tp in doomed} - {tp.topic for tp in remaining})
    ]
    removes_group = remove_empty_group and not remaining
    if removes_group:
        paths += [offsets_path(group_id), group_path(group_id)]
    fence_path = offsets_path(group_id)
    sizes = [("", op_bytes(p)) for p in paths]
    for run in plan_chunks(sizes, op_bytes(fence_path), check_topics=False):
        transaction = zk.transaction()
        transaction.check(fence_path, fence)
        for path in paths[run.start : run.stop]:
            transaction.delete(path)
        with translated():
            errors = failures(transaction.commit())
        if errors[0] is not None:
            raise NotCoordinatorError(f"another coordinator loaded group {group_id!r}")
        failed = next((e for e in errors if e is not None), None)
        if failed is not None:
            raise failed
    return removes_group


def missing_topics(zk: KazooClient, topics: Sequence[str]) -> set[str]:
    """Those of `topics` whose znode does not exist (deleted, or never made)."""
    with translated():
        pending = {topic: zk.exists_async(znodes.topic_path(topic)) for topic in topics}
    missing = set()
    for topic, answer in pending.items():
        with translated():
            if answer.get() is None:
                missing.add(topic)
    return missing


def delete_topic_offsets(zk: KazooClient, topic: str) -> list[str]:
    """Remove every group's committed offsets of a deleted topic; the groups that had some.

    Run once the topic's znode is gone, so that no commit can add one afterwards (each
    commit checks its topic's znode)."""
    groups = children_if_present(zk, CONSUMERS_PATH)
    with translated():
        listings = {
            name: zk.get_children_async(f"{CONSUMERS_PATH}/{name}/offsets/{_znode_name(topic)}")
            for name in groups
        }
    cleaned = []
    for name, listing in listings.items():
        try:
            with translated():
                partitions = listing.get()
        except ZnodeMissingError:
            continue
        directory = f"{CONSUMERS_PATH}/{name}/offsets/{_znode_name(topic)}"
        with translated():
            pending = [zk.delete_async(f"{directory}/{p}") for p in partitions]
        for answer in pending:
            with contextlib.suppress(ZnodeMissingError), translated():
                answer.get()
        with contextlib.suppress(ZnodeMissingError), translated():
            zk.delete(directory)
        cleaned.append(unquote(name, errors="surrogateescape"))
    return cleaned


def delete_group(zk: KazooClient, group_id: str) -> bool:
    """Remove the group's offsets; False if it had none."""
    path = group_path(group_id)
    with translated():
        if zk.exists(path) is None:
            return False
        zk.delete(path, recursive=True)
    return True


def group_exists(zk: KazooClient, group_id: str) -> bool:
    """Whether the group has committed offsets."""
    with translated():
        return zk.exists(offsets_path(group_id)) is not None


def list_groups(zk: KazooClient) -> list[str]:
    """The ids of the groups with committed offsets."""
    return sorted(
        unquote(name, errors="surrogateescape") for name in children_if_present(zk, CONSUMERS_PATH)
    )
