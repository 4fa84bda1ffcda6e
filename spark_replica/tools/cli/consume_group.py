"""`replog consume --group G`: start where group G left off, and commit what was printed.

Kafka's console consumer joins the group; replog's consumer reads over replog's own
protocol and keeps no membership, so it takes the group's committed offsets as a
standalone consumer does (Kafka's `assign` plus commits with no generation): a partition
with a committed offset starts there, any other where the flags say (the end, or the
beginning with --from-beginning, as Kafka's auto.offset.reset). The next offset after
each printed record is committed every COMMIT_INTERVAL_S and when the command ends, as
Kafka's auto commit does; a group whose consumers are running refuses the commit
(offsets belong to its members then), and the command says so and exits 1.

Groups live on the brokers' Kafka listeners, reached through the cluster directory or
the registrations in ZooKeeper (--dir or --zookeeper): a --bootstrap-server of replog
listeners does not lead to them, and is refused with --group.
"""

from __future__ import annotations

import argparse

from spark_replica.client.kafka_admin import KafkaAdminClient
from spark_replica.errors import ConfigError
from spark_replica.tools.cli.common import CLIENT_ID, client_security, kafka_bootstrap
from spark_replica.topics import TopicPartition

COMMIT_INTERVAL_S = 5.0
GROUP_TIMEOUT_S = 30.0


def open_group_admin(args: argparse.Namespace) -> KafkaAdminClient:
    """A Kafka-protocol client for --group's offsets; checked before anything is read."""
    if args.bootstrap:
        raise ConfigError(
            "--group keeps offsets on the brokers' Kafka listeners, which --bootstrap-server "
            "(replog listeners) does not reach: pass --zookeeper or --dir instead"
        )
    return KafkaAdminClient(
        kafka_bootstrap(args), client_security(args), CLIENT_ID, GROUP_TIMEOUT_S
    )


class GroupProgress:
    """The next offset after each printed record, and when it was last committed."""

    def __init__(self, admin: KafkaAdminClient, group: str, now: float) -> None:
        self.admin = admin
        self.group = group
        self.printed: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.last_commit = now

    async def start_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of `partitions` (those it has)."""
        committed = await self.admin.committed_offsets(self.group)
        self.committed = {tp: committed[tp] for tp in partitions if tp in committed}
        return dict(self.committed)

    def printed_record(self, tp: TopicPartition, offset: int) -> None:
        self.printed[tp] = offset + 1

    async def commit_if_due(self, now: float) -> None:
        if now - self.last_commit >= COMMIT_INTERVAL_S:
            await self.commit(now)

    async def commit(self, now: float) -> None:
        """Commit what moved since the last commit (nothing to send: no request)."""
        moved = {
            tp: offset for tp, offset in self.printed.items() if self.committed.get(tp) != offset
        }
        self.last_commit = now
        if moved:
            await self.admin.commit_offsets(self.group, moved)
            self.committed.update(moved)
