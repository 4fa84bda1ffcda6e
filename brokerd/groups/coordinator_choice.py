"""Which partition of `__consumer_offsets` holds a group: Kafka's rule, pure.

A group lives in partition `abs(hash(group id)) mod partition count`, with Java's
String.hashCode (31·h + c over UTF-16 code units, wrapping at 32 bits) and Kafka's
abs (which sends the one negative number without a positive, -2^31, to 0). Using Kafka's
exact rule means Kafka's tools that compute a group's offsets partition agree with this
broker. The group's coordinator is whichever broker leads that partition, so a broker
starting or stopping moves only the groups of the partitions it led, not most groups.
"""

from __future__ import annotations

INT32_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode of `text`, as a signed 32-bit int."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for index in range(0, len(data), 2):
        h = (31 * h + (data[index] << 8 | data[index + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition_for(group_id: str, partition_count: int) -> int:
    """The offsets partition of `group_id` among `partition_count` (at least 1)."""
    if partition_count < 1:
        raise ValueError(f"the offsets topic has {partition_count} partitions")
    h = java_string_hash(group_id)
    return (0 if h == INT32_MIN else abs(h)) % partition_count
