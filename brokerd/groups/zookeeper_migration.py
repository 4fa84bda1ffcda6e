"""Moving committed offsets from ZooKeeper, where earlier versions kept them, to the
offsets topic: once, when the partition a group hashes to is loaded.

An earlier replog stored each group's offsets under `/consumers/<group>/offsets`
(spark_replica/zk/group_store.py). A broker of this version loading an offsets partition
reads the offsets of the ZooKeeper groups that hash to it, appends those the topic does
not hold yet (acks=all, like any commit), and only then deletes the group's znodes. A
crash in between repeats the move at the next load, which finds the offsets already in
the topic and appends nothing again: the topic's offsets always win, so an offset
committed after the move is never overwritten by the older one left in ZooKeeper.
"""

from __future__ import annotations

import asyncio
import logging

from brokerd.core.context import BrokerContext
from brokerd.groups import offsets_topic
from brokerd.groups.stored_groups import OffsetChange, StoredGroups
from brokerd.replication.partition import Partition
from spark_replica.topics import offsets_partition_for
from spark_replica.wire.kafka.offsets_records import OffsetValue
from spark_replica.zk import group_store

logger = logging.getLogger("brokerd.groups")


async def migrate_partition(
    ctx: BrokerContext, partition: Partition, stored: StoredGroups, partition_count: int
) -> None:
    """Move the ZooKeeper offsets of the groups of `partition` into it (see the top)."""
    if ctx.zk is None:
        return
    zk = ctx.zk
    index = partition.tp.partition
    groups = await asyncio.to_thread(group_store.list_groups, zk)
    for group_id in groups:
        if not group_id or offsets_partition_for(group_id, partition_count) != index:
            continue
        in_zookeeper = await asyncio.to_thread(group_store.read_offsets, zk, group_id)
        held = stored.offsets_of(group_id)
        changes = [
            OffsetChange(
                group_id,
                tp,
                OffsetValue(c.offset, c.leader_epoch, c.metadata, c.commit_timestamp_ms),
            )
            for tp, c in sorted(in_zookeeper.items())
            if tp not in held
        ]
        await offsets_topic.append(ctx, partition, [c.record() for c in changes])
        for change in changes:
            stored.change(change)
        await asyncio.to_thread(group_store.delete_group, zk, group_id)
        logger.info(
            "moved %d committed offsets of group %r from ZooKeeper to %s",
            len(changes),
            group_id,
            partition.tp,
        )
