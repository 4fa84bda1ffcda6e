"""Committed offsets of consumer groups as earlier replog versions kept them in
ZooKeeper, read once to move them to the offsets topic (brokerd/groups/zookeeper_migration.py).

`/consumers/<group>/offsets/<topic>/<partition>` holds
`{"version":1,"offset":N,"leader_epoch":E,"metadata":"...","commit_timestamp":ms}`, with
group ids and topics percent-encoded into znode names (a group id may hold "/" or be
"."). Nothing writes here any more: a group's znodes are deleted once its offsets are in
the topic. Blocking kazoo calls: callers run them with asyncio.to_thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote, unquote

from kazoo.client import KazooClient

from spark_replica.errors import ZnodeMissingError, ZooKeeperError
from spark_replica.topics import TopicPartition
from spark_replica.zk.kazoo_errors import children_if_present, translated

CONSUMERS_PATH = "/consumers"


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1

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


def delete_group(zk: KazooClient, group_id: str) -> bool:
    """Remove the group's offsets; False if it had none."""
    path = group_path(group_id)
    with translated():
        if zk.exists(path) is None:
            return False
        zk.delete(path, recursive=True)
    return True


def list_groups(zk: KazooClient) -> list[str]:
    """The ids of the groups with committed offsets."""
    return sorted(
        unquote(name, errors="surrogateescape") for name in children_if_present(zk, CONSUMERS_PATH)
    )
