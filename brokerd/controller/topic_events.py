"""Events about topics: created or grown, deleted, configs altered.

Runs on the controller's event task with the current controllership's ControllerOps.
"""

from __future__ import annotations

import asyncio
import logging

from brokerd.controller import zk_store
from brokerd.controller.operations import ControllerOps
from brokerd.controller.states import PartitionState, ReplicaState
from brokerd.replication.topic_configs import read_configs
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store

logger = logging.getLogger("brokerd.controller")

# Config change notifications older than this are deleted (Kafka's 15 minutes).
CONFIG_CHANGE_EXPIRY_MS = 15 * 60 * 1000


async def load_topics(ops: ControllerOps, topics: list[str]) -> list[TopicPartition]:
    """Read assignments, configs and existing states of `topics` into the context."""
    ctx = ops.ctx
    # The watches are set before the reads, so no change after the reads goes unseen.
    await asyncio.to_thread(ops.watch_topics, topics)
    assignments, configs = await asyncio.to_thread(zk_store.read_assignments, ops.zk, topics)
    states = await asyncio.to_thread(zk_store.read_states, ops.zk, list(assignments))
    ctx.assignments.update(assignments)
    ctx.topic_configs.update(configs)
    ctx.leadership.update(states)
    ops.mark_replicas(sorted(assignments), ctx.live_ids, ReplicaState.ONLINE)
    dead = {r for replicas in assignments.values() for r in replicas} - ctx.live_ids
    ops.mark_replicas(sorted(assignments), dead, ReplicaState.OFFLINE)
    for tp in assignments:
        known = tp in states and states[tp].leader in ctx.live_brokers
        initial = PartitionState.ONLINE if known else PartitionState.OFFLINE
        ctx.partition_states.transition([tp], PartitionState.NEW)
        if tp in states:
            ctx.partition_states.transition([tp], initial)
    return sorted(assignments)


async def on_topic_change(ops: ControllerOps) -> None:
    """New topics, topics gone, and partitions added to existing topics."""
    ctx = ops.ctx
    topics_now = set(await asyncio.to_thread(topic_store.list_topics, ops.zk))
    for topic in ctx.topics - topics_now:
        ctx.remove_topic(topic)
    new_partitions = await load_topics(ops, sorted(topics_now - ctx.topics))
    known, _ = await asyncio.to_thread(zk_store.read_assignments, ops.zk, sorted(ctx.topics))
    grown = sorted(tp for tp in known if tp not in ctx.assignments)
    if grown:
        ctx.assignments.update({tp: known[tp] for tp in grown})
        ctx.partition_states.transition(grown, PartitionState.NEW)
        ops.mark_replicas(grown, ctx.live_ids, ReplicaState.ONLINE)
        new_partitions += grown
    ops.announce(await ops.elect(new_partitions))


async def on_topic_deletion(ops: ControllerOps) -> None:
    """Stop every replica of each topic queued for deletion, have it delete its log, then
    remove the topic's znodes (the group coordinators remove the groups' committed
    offsets of it when their metadata loses the topic).

    Replicas on brokers that are down are not waited for: once the znodes are gone, a
    broker deletes the logs of partitions no longer assigned to it when it starts.
    """
    ctx = ops.ctx
    for topic in await asyncio.to_thread(topic_store.topics_to_delete, ops.zk):
        partitions = ctx.partitions_of_topic(topic)
        ctx.partition_states.transition(partitions, PartitionState.OFFLINE)
        ctx.partition_states.transition(partitions, PartitionState.NON_EXISTENT)
        ops.mark_replicas(partitions, None, ReplicaState.OFFLINE)
        ops.mark_replicas(partitions, None, ReplicaState.REPLICA_DELETION_STARTED)
        stopped = await _stop_replicas(ops, partitions)
        logger.info("deleting topic %s: replicas on %s deleted their logs", topic, stopped)
        await asyncio.to_thread(topic_store.remove_topic_znodes, ops.zk, topic)
        ctx.remove_topic(topic)
    ops.announce([])


async def _stop_replicas(ops: ControllerOps, partitions: list[TopicPartition]) -> list[int]:
    """StopReplica(delete) to every live replica; the brokers that confirmed."""
    on_broker: dict[int, list[TopicPartition]] = {}
    for tp in partitions:
        for replica in ops.ctx.assignments[tp]:
            on_broker.setdefault(replica, []).append(tp)
    confirmed = await ops.delete_replicas(on_broker)
    ops.mark_replicas(partitions, set(confirmed), ReplicaState.REPLICA_DELETION_SUCCESSFUL)
    return confirmed


async def on_config_change(ops: ControllerOps) -> None:
    """Re-read changed topic configs; enabling unclean election elects offline leaders.

    The controller is also the one place that ages out old notifications (brokers have
    long applied them), so `/config/changes` does not grow forever.
    """
    ctx = ops.ctx
    topics, newest = await asyncio.to_thread(
        zk_store.read_config_changes, ops.zk, ctx.last_config_change
    )
    ctx.last_config_change = newest
    wanted = ctx.topics if topics is None else topics & ctx.topics
    if wanted:
        was_unclean = {t for t in wanted if ctx.unclean_enabled(t)}
        ctx.topic_configs.update(await asyncio.to_thread(read_configs, ops.zk, sorted(wanted)))
        now_unclean = sorted(t for t in wanted if ctx.unclean_enabled(t))
        offline = [
            tp
            for topic in now_unclean
            if topic not in was_unclean
            for tp in ctx.partitions_of_topic(topic)
            if tp in ctx.leadership and ctx.leadership[tp].leader not in ctx.live_brokers
        ]
        if offline:
            ops.announce(await ops.elect(offline))
    purged = await asyncio.to_thread(zk_store.purge_config_changes, ops.zk, CONFIG_CHANGE_EXPIRY_MS)
    if purged:
        logger.info("purged %d config change notifications", purged)
