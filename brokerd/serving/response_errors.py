"""The error codes a response carries, wherever its layout keeps them: pure, no I/O.

Both dialects build responses from tables read by one engine: replog's as slotted
dataclasses (spark_replica/wire/native/table.py), Kafka's as `Data`
(spark_replica/wire/schema.py). Either way an error is a field named `error_code`, at
the top or inside nested lists of structs (topics, partitions, groups, ...). One walk
over the structs therefore finds every error of either dialect, so that the errors are
counted once, by the dispatch, rather than by each handler of each dialect.

The walk goes into a list only when its first item is a struct (lists are of one kind),
so replica ids and record chunks are never looked at one by one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from spark_replica.wire.schema import Data

ERROR_FIELD = "error_code"
# Each class's dataclass field names (empty for anything else), looked up once.
_field_names_of: dict[type, tuple[str, ...]] = {}


def error_codes(response: object) -> list[int]:
    """Every non-zero `error_code` in the response, in no particular order."""
    found: list[int] = []
    pending: list[object] = [response]
    while pending:
        for name, value in _fields(pending.pop()):
            if name == ERROR_FIELD:
                if value:
                    found.append(value)
            elif isinstance(value, list):
                if value and _is_struct(value[0]):
                    pending.extend(value)
            elif _is_struct(value):
                pending.append(value)
    return found


def _is_struct(value: object) -> bool:
    return type(value) is Data or bool(_field_names(type(value)))


def _fields(node: object) -> Iterator[tuple[str, Any]]:
    if type(node) is Data:
        yield from vars(node).items()
        return
    for name in _field_names(type(node)):
        yield name, getattr(node, name)


def _field_names(kind: type) -> tuple[str, ...]:
    names = _field_names_of.get(kind)
    if names is None:
        names = _field_names_of[kind] = (
            tuple(f.name for f in dataclasses.fields(kind))
            if dataclasses.is_dataclass(kind)
            else ()
        )
    return names
