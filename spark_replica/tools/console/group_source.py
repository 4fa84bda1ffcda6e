"""Reading Kafka consumer groups for the console, from the brokers' Kafka listeners.

Groups live behind the Kafka listeners (as for `replog groups`), whose addresses the
brokers registered in ZooKeeper; without ZooKeeper the console does not know them.
Each round lists the groups and describes at most MAX_GROUPS of them (by name): state
and members, committed offsets, and the log end of every partition they commit or own.
A group that cannot be described is shown with the reason instead of failing the rest.
"""

from __future__ import annotations

from spark_replica.client.kafka_admin import LATEST_TIMESTAMP, Address, KafkaAdminClient
from spark_replica.errors import ReplogError
from spark_replica.security.settings import SecurityConfig
from spark_replica.tools.console.error_lines import collapse_error
from spark_replica.tools.console.group_view import group_json
from spark_replica.tools.group_lag import owners

# A page of groups the console can refresh every few seconds without loading the
# coordinators; the document says how many there are in all.
MAX_GROUPS = 100
GROUPS_TIMEOUT_S = 5.0
CLIENT_ID = "replog-console"


async def describe_group(admin: KafkaAdminClient, group: str) -> dict[str, object]:
    try:
        description = await admin.describe_group(group)
        committed = await admin.committed_offsets(group)
        wanted = [*committed, *owners(description)]
        log_ends = await admin.list_offsets(wanted, LATEST_TIMESTAMP) if wanted else {}
    except ReplogError as exc:
        return {"group": group, "error": collapse_error(str(exc) or type(exc).__name__)}
    return group_json(description, committed, log_ends)


async def read_groups(
    bootstrap: list[Address], security: SecurityConfig | None
) -> dict[str, object]:
    """The groups part of /api/groups; ReplogError when no Kafka listener answers."""
    async with KafkaAdminClient(bootstrap, security, CLIENT_ID, GROUPS_TIMEOUT_S) as admin:
        listed = sorted(g.group_id for g in await admin.list_groups())
        shown = listed[:MAX_GROUPS]
        groups = [await describe_group(admin, group) for group in shown]
    return {"groups": groups, "total": len(listed)}
