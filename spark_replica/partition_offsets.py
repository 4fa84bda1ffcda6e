"""The JSON form of offsets per partition, `{"topic": {"partition": offset}}`.

Spark's checkpoint keeps a replog source's offsets in it, the startingOffsets and
endingOffsets options take it (as Kafka's connector does), and `replog lag` reads it back
from a query's checkpoint; so it sits in the library, below both the connector and the
tools. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from spark_replica.errors import ConfigError
from spark_replica.topics import TopicPartition

# Kafka's placeholders inside offset JSON: "the log start" and "the HW".
EARLIEST = -2
LATEST = -1

Offsets = dict[TopicPartition, int]


def encode_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """`{"topic": {"partition": offset}}`, sorted so the same offsets give the same JSON."""
    encoded: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        encoded.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return encoded


def decode_offsets(encoded: Mapping[str, object], what: str = "offsets") -> Offsets:
    """The inverse of encode_offsets; raise ConfigError naming `what` on a malformed value.

    Offsets must be integers of at least -2: -2 and -1 stand for earliest and latest.
    """
    if not isinstance(encoded, Mapping):
        raise ConfigError(f'{what}: expected {{"topic": {{"partition": offset}}}}, got {encoded!r}')
    decoded: Offsets = {}
    for topic, partitions in encoded.items():
        if not isinstance(topic, str) or not isinstance(partitions, Mapping):
            raise ConfigError(
                f'{what}: expected {{"topic": {{"partition": offset}}}}, '
                f"got {topic!r}: {partitions!r}"
            )
        for partition, offset in partitions.items():
            number = _partition_number(partition, what, topic)
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise ConfigError(
                    f"{what}: offset {offset!r} of {topic}-{number} is not an integer >= -2 "
                    "(-2 earliest, -1 latest)"
                )
            decoded[TopicPartition(topic, number)] = offset
    return decoded


def parse_offsets_json(text: str, what: str) -> Offsets:
    """Offsets from an option's JSON text, e.g. `{"events": {"0": 23, "1": -2}}`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what}: not valid JSON ({exc.msg}): {text!r}") from None
    return decode_offsets(value, what)


def _partition_number(partition: object, what: str, topic: str) -> int:
    try:
        number = int(str(partition))
    except ValueError:
        raise ConfigError(f"{what}: partition {partition!r} of {topic!r} is not a number") from None
    if number < 0:
        raise ConfigError(f"{what}: partition {number} of {topic!r} is negative")
    return number
