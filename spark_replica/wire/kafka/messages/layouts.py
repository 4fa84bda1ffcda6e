"""The sub-structures Kafka's message tables share, declared once and composed.

Kafka's definitions repeat one shape in most APIs that address partitions: an array of
topics, each its name and an array of partitions. The tables build it with `per_topic`
from the partition's fields, naming the parts as each API's JSON names them.
"""

from __future__ import annotations

from spark_replica.wire.schema import Field


def per_topic(
    *partition_fields: Field,
    topics: str = "Topics",
    name: str = "Name",
    partitions: str = "Partitions",
    versions: str = "0+",
) -> Field:
    """An array `topics` of structs: the topic's `name`, then the array `partitions` of
    `partition_fields`, all present in `versions`."""
    return Field(
        topics,
        [Field(name, "string", versions), Field(partitions, list(partition_fields), versions)],
        versions,
    )
