"""What the console's /api/groups says of one Kafka consumer group, from plain values.

As `replog groups describe --json` shows a group (spark_replica/tools/group_lag.py, the
rules both share), with the group's total lag and no error. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_replica.client.kafka_admin import GroupDescription
from spark_replica.tools.group_lag import group_json as described
from spark_replica.tools.group_lag import lag_rows, owners
from spark_replica.topics import TopicPartition


def group_json(
    description: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
) -> dict[str, object]:
    """One group: one row per partition that has a commit or an owner, sorted."""
    rows = lag_rows(committed, log_ends, owners(description))
    lags = [row.lag for row in rows if row.lag is not None]
    return {**described(description, rows), "total_lag": sum(lags) if lags else None, "error": None}
