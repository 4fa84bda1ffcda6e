"""The native messages' layouts as tables, read and written by the one engine.

Native APIs have classic encodings and start at version 0: a native table is its fields
in wire order, each present from the version its ``since`` names (0 unless said: a
field added later never moves the bytes of an older version), and each struct names
the dataclass its values build, so brokerd and the client keep their message types and
their ``read``/``write`` calls while the encoding comes from spark_replica.wire.schema
like Kafka's (``Tabled`` and ``tabled``, whose ``latest`` is the table's highest version).
The sub-structures several messages share are declared here once: the per-topic layout,
the error pair; a broker's address is in metadata.py beside BrokerInfo.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_replica.wire.schema import Field


def wire_field(
    name: str,
    type: str,
    *,
    nullable: bool = False,
    empty_if_null: bool = False,
    since: int = 0,
    default: Any = None,
) -> Field:
    """A scalar or scalar-array field, on the wire from version `since`; `nullable` ones
    read and write null (-1). `default` is its value where it is not on the wire (None:
    null for a nullable field, else its type's zero)."""
    extra = {} if default is None and not nullable else {"default": default}
    return Field(
        name,
        type,
        f"{since}+",
        nullable=f"{since}+" if nullable else None,
        empty_if_null=empty_if_null,
        **extra,
    )


def struct_array(name: str, build: Callable[..., Any], *fields: Field, since: int = 0) -> Field:
    """An array of structs from version `since`, each built by `build` from its values."""
    return Field(name, list(fields), f"{since}+", build=build)


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
