"""The native messages' layouts as tables, read and written by the one engine.

Every native API has one version (0) and classic encodings: a native table is its
fields in wire order, and each struct names the dataclass its values build, so brokerd
and the client keep their message types and their ``read``/``write`` calls while the
encoding comes from spark_replica.wire.schema like Kafka's (``Tabled`` and ``tabled``).
The sub-structures several messages share are declared here once: the per-topic layout,
the error pair; a broker's address is in metadata.py beside BrokerInfo.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_replica.wire.schema import Field


def wire_field(
    name: str, type: str, *, nullable: bool = False, empty_if_null: bool = False
) -> Field:
    """A scalar or scalar-array field; `nullable` ones read and write null (-1)."""
    return Field(name, type, "0+", nullable="0+" if nullable else None, empty_if_null=empty_if_null)


def struct_array(name: str, build: Callable[..., Any], *fields: Field) -> Field:
    """An array of structs, each built by `build` from its fields' values."""
    return Field(name, list(fields), "0+", build=build)


def struct(name: str, build: Callable[..., Any], *fields: Field) -> Field:
    """One struct in place (not an array), built by `build`."""
    return Field(name, list(fields), "0+", build=build, array=False)


def per_topic(
    name: str, build_topic: Callable[..., Any], build_partition: Callable[..., Any], *fields: Field
) -> Field:
    """The common layout: per topic its name, then per partition `fields`."""
    return struct_array(
        name,
        build_topic,
        wire_field("topic", "string"),
        struct_array("partitions", build_partition, *fields),
    )


def per_topic_partition_ids(name: str, build_topic: Callable[..., Any]) -> Field:
    """Per topic its name, then its partition ids."""
    return struct_array(
        name, build_topic, wire_field("topic", "string"), wire_field("partitions", "[]int32")
    )


# An error code and its message (null when there is none).
ERROR = (wire_field("error_code", "int16"), wire_field("error_message", "string", nullable=True))
