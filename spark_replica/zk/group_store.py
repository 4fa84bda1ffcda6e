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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from kazoo.client import KazooClient

from spark_replica.errors import ZnodeExistsError, ZnodeMissingError, ZooKeeperError
from spark_replica.topics import TopicPartition
from spark_replica.zk.kazoo_errors import children_if_present, failures, translated

CONSUMERS_PATH = "/consumers"
VERSION = 1
# Operations per multi-op: ZooKeeper refuses a request over jute.maxbuffer (1 MiB).
MAX_OPS_PER_TRANSACTION = 500
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


def write_offsets(
    zk: KazooClient, group_id: str, commits: Mapping[TopicPartition, CommittedOffset]
) -> None:
    """Store the commits durably: all of them or, past one multi-op's size, each chunk of
    MAX_OPS_PER_TRANSACTION all-or-nothing. Raises ZooKeeperError if they could not be."""
    items = sorted(commits.items())
    for start in range(0, len(items), MAX_OPS_PER_TRANSACTION):
        chunk = dict(items[start : start + MAX_OPS_PER_TRANSACTION])
        for attempt in range(WRITE_ATTEMPTS):
            try:
                _write_chunk(zk, group_id, chunk)
                break
            except (ZnodeExistsError, ZnodeMissingError):
                if attempt == WRITE_ATTEMPTS - 1:
                    raise


def _write_chunk(
    zk: KazooClient, group_id: str, chunk: Mapping[TopicPartition, CommittedOffset]
) -> None:
    existing: dict[str, set[str]] = {}
    for topic in sorted({tp.topic for tp in chunk}):
        path = topic_offsets_path(group_id, topic)
        children = children_if_present(zk, path)
        if not children:
            with translated():
                zk.ensure_path(path)
        existing[topic] = set(children)
    transaction = zk.transaction()
    for tp, committed in chunk.items():
        path = offset_path(group_id, tp)
        if str(tp.partition) in existing[tp.topic]:
            transaction.set_data(path, committed.encode())
        else:
            transaction.create(path, committed.encode())
    with translated():
        results = transaction.commit()
    for error in failures(results):
        if error is not None:
            raise error


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
