"""The sub-structures Kafka's message tables share, declared once and composed.

Kafka's definitions repeat a handful of shapes across APIs: the throttle time and error
code that open most responses, an error code with its message, a group member's id with
its static instance id, a resource's type and name, arrays of per-item results, an array
of topics each holding its partitions; and every API's request and response share its
name, key, versions and first flexible version. Each is a function here returning its
fields for the versions an API gives it (they differ per API, so they are parameters,
never copies), and the tables compose them, naming the parts as each API's JSON does.
"""

from __future__ import annotations

from spark_replica.wire.schema import Field, Message

# Kafka's PatternType.LITERAL: what a version without the pattern type field means.
LITERAL = 3

# Kafka's "authorized operations not requested" marker (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)


def api(
    name: str,
    *,
    api_key: int,
    versions: tuple[int, int],
    flexible: int | None,
    request: list[Field],
    response: list[Field],
) -> tuple[Message, Message]:
    """One API's request and response tables, `name` + "Request" and + "Response": one
    key, one version range (what is served either way) and one first flexible version."""
    return (
        Message(f"{name}Request", api_key, versions, flexible, request),
        Message(f"{name}Response", api_key, versions, flexible, response),
    )


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


def throttle(versions: str = "0+") -> Field:
    """The time the broker asks the client to wait, first in most responses."""
    return Field("ThrottleTimeMs", "int32", versions)


def error_code(versions: str = "0+") -> Field:
    """Kafka's error code: 0 for none, else the error's number."""
    return Field("ErrorCode", "int16", versions)


def error_message(versions: str = "0+", nullable: str | None = None) -> Field:
    """A nullable error message, null unless set; nullable in `versions` unless told."""
    return Field("ErrorMessage", "string", versions, nullable=nullable or versions, default=None)


def error(versions: str = "0+", message: str | None = None) -> list[Field]:
    """An error code and, from `message` on, its message (none when `message` is None)."""
    if message is None:
        return [error_code(versions)]
    return [error_code(versions), error_message(message)]


def head(throttle_versions: str, error_versions: str = "0+") -> list[Field]:
    """The opening of a response that answers as a whole: throttle time, error code."""
    return [throttle(throttle_versions), error_code(error_versions)]


def results(array: str, *keys: Field, message: str | None = None) -> Field:
    """An array `array` of per-item results: the item's `keys`, then its error (with the
    message from version `message` on, if given)."""
    return Field(array, [*keys, *error(message=message)], "0+")


def member(versions: str, instance: str) -> list[Field]:
    """A group member's id in `versions` and its static instance id from `instance` on."""
    return [
        Field("MemberId", "string", versions),
        Field("GroupInstanceId", "string", instance, nullable=instance, default=None),
    ]


def group_generation_member(instance: str) -> list[Field]:
    """Which group, generation and member a request speaks for (SyncGroup, Heartbeat)."""
    return [
        Field("GroupId", "string", "0+"),
        Field("GenerationId", "int32", "0+"),
        *member("0+", instance),
    ]


def protocol(versions: str) -> list[Field]:
    """The nullable protocol type and name a group agreed on, present in `versions`."""
    return [
        Field("ProtocolType", "string", versions, nullable=versions, default=None),
        Field("ProtocolName", "string", versions, nullable=versions, default=None),
    ]


def authorized_operations(name: str, versions: str) -> Field:
    """The bit set of operations the caller may perform on a resource, sent only when
    asked for (the marker otherwise)."""
    return Field(name, "int32", versions, default=AUTHORIZED_OPERATIONS_OMITTED)


def node(versions: str = "0+") -> list[Field]:
    """Where a broker listens: its id, host and port."""
    return [
        Field("NodeId", "int32", versions),
        Field("Host", "string", versions),
        Field("Port", "int32", versions),
    ]


def resource(pattern: str | None = None) -> list[Field]:
    """A resource's type and name, and with `pattern` the field of that name holding its
    pattern type (from version 1; LITERAL before)."""
    fields = [Field("ResourceType", "int8", "0+"), Field("ResourceName", "string", "0+")]
    if pattern is not None:
        fields.append(Field(pattern, "int8", "1+", default=LITERAL))
    return fields


def config_entry(versions: str, value_nullable: str) -> list[Field]:
    """A config's name and nullable value."""
    return [
        Field("Name", "string", versions),
        Field("Value", "string", versions, nullable=value_nullable),
    ]
