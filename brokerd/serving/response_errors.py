"""The error codes a response carries, wherever its layout keeps them: pure, no I/O.

Both dialects build responses from tables read by one engine: replog's as slotted
dataclasses (spark_replica/wire/native/table.py), Kafka's as `Data`
(spark_replica/wire/schema.py). Either way an error is a field named `error_code`, at
the top or inside nested lists of structs (topics, partitions, groups, ...). One walk
over the structs therefore finds every error of either dialect, so that the errors are
counted once, by the dispatch, rather than by each handler of each dialect.

The walk goes into a list only when its first item is a struct (lists are of one kind),
so replica ids and record chunks are never looked at one by one; a slotted struct's
fields are read with one attrgetter call. Measured with timeit, the walk over a
100-partition Fetch answer takes about 50 us (Kafka's) to 100 us (replog's): a cost per
request and partition, never per record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from spark_replica.wire.schema import Data

ERROR_FIELD = "error_code"
# Values that hold no struct: looked at once, never walked into.
_LEAVES = frozenset({int, str, bytes, bytearray, memoryview, bool, float, type(None)})


class _Layout:
    """A dataclass's field names and one C-level getter of all their values."""

    __slots__ = ("names", "values")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        getter = attrgetter(*names)
        self.values: Callable[[Any], tuple[Any, ...]] = (
            getter if len(names) > 1 else lambda node: (getter(node),)
        )


# Each class seen, once: its layout, or None when it is not a struct (a dataclass).
_layouts: dict[type, _Layout | None] = {}


def error_codes(response: object) -> list[int]:
    """Every non-zero `error_code` in the response, in no particular order."""
    found: list[int] = []
    pending: list[Any] = [response]
    items: Iterable[tuple[str, Any]]
    while pending:
        node = pending.pop()
        if type(node) is Data:
            items = vars(node).items()
        else:
            layout = _layout(type(node))
            if layout is None:
                continue
            items = zip(layout.names, layout.values(node), strict=False)
        for name, value in items:
            if name == ERROR_FIELD:
                if value:
                    found.append(int(value))  # an int, or an IntEnum of one
                continue
            kind = type(value)
            if kind in _LEAVES:
                continue
            if kind is list:
                if value and _is_struct(value[0]):
                    pending.extend(value)
            elif _is_struct(value):
                pending.append(value)
    return found


def _is_struct(value: object) -> bool:
    kind = type(value)
    return kind is Data or (kind not in _LEAVES and _layout(kind) is not None)


def _layout(kind: type) -> _Layout | None:
    try:
        return _layouts[kind]
    except KeyError:
        pass
    fields = dataclasses.fields(kind) if dataclasses.is_dataclass(kind) else ()
    layout = _layouts[kind] = _Layout(tuple(f.name for f in fields)) if fields else None
    return layout
