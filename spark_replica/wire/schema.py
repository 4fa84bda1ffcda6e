"""One generic codec driven by declarative message tables, for both protocols.

A ``Message`` is a list of ``Field``s: for Kafka, transcribed from Kafka's JSON
definitions (a name, a type, the versions the field exists in, the versions it may be
null in, its default, and for tagged fields the tag); for the native protocol, classic
encodings from version 0, each field present from the version it was added in
(spark_replica.wire.native.table). At construction the table is resolved once per
version into a layout and compiled into plain functions (spark_replica.wire.codegen), so
decoding and encoding dispatch on no type name per field.

Decoded structs are ``Data`` objects whose attributes are the field names in
snake_case, or instances of the class a table names (``build``: the native messages'
dataclasses, built with the field values as keywords); a field absent in the decoded
version holds its default, so a handler can read every field at any version. Encoding
reads attributes with ``getattr(obj, name, default)`` from any object, so a response
may leave out fields its version lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from spark_replica.errors import ProtocolError
from spark_replica.wire.codegen import (
    FIXED_CODES,
    VARIABLE_METHODS,
    Compiled,
    Layout,
    Slot,
    compile_layout,
)
from spark_replica.wire.primitives import ZERO_UUID, Reader, Writer

# A version range's upper bound when the JSON says "N+".
_NO_UPPER_BOUND = 1 << 15
_MISSING: Any = object()


class Data:
    """A decoded struct, or a struct to encode: attributes named after its fields."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Data) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{key}={value!r}" for key, value in self.__dict__.items())
        return f"Data({inner})"

    if TYPE_CHECKING:
        # Fields come from message tables at run time, so the checker cannot know them;
        # declared for it only, so a missing attribute still raises AttributeError (which
        # the encoder's getattr(obj, name, default) relies on).
        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...


def snake_case(name: str) -> str:
    """Kafka's field name as a Python attribute: ``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def parse_versions(text: str | None) -> tuple[int, int]:
    """Kafka's version notation ("0+", "3-5", "7", "none") as an inclusive (low, high)."""
    if text is None or text == "none":
        return (1, 0)
    if text.endswith("+"):
        return (int(text[:-1]), _NO_UPPER_BOUND)
    low, _, high = text.partition("-")
    return (int(low), int(high or low))


def _in(bounds: tuple[int, int], version: int) -> bool:
    return bounds[0] <= version <= bounds[1]


# The zero value of each scalar type, a field's default unless the table gives one.
_ZERO: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "uint32": 0,
    "int64": 0,
    "float64": 0.0,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": ZERO_UUID,
}


class Field:
    """One field of a message table, as Kafka's JSON describes it.

    ``type`` is a type name ("int32", "string", "[]int32", ...; "map" is an array of
    string key and value pairs read as a dict, the native topic configs) or, for an
    array of structs, the list of the struct's fields (one struct, not an array, with
    ``array=False``); ``build`` makes each struct from its values (default: Data).
    ``empty_if_null`` reads a null bytes or records field as empty rather than refusing
    it, as the native protocol always has.
    """

    __slots__ = (
        "attr",
        "build",
        "default",
        "empty_if_null",
        "fields",
        "name",
        "nullable",
        "tag",
        "tagged",
        "type",
        "versions",
    )

    def __init__(
        self,
        name: str,
        type: str | list[Field],
        versions: str,
        *,
        nullable: str | None = None,
        default: Any = _MISSING,
        tag: int | None = None,
        tagged: str | None = None,
        build: Callable[..., Any] | None = None,
        array: bool = True,
        empty_if_null: bool = False,
    ) -> None:
        self.name = name
        self.attr = snake_case(name)
        self.fields: list[Field] | None = None
        self.build = build
        self.empty_if_null = empty_if_null
        if isinstance(type, list):
            self.fields = type
            self.type = "[]struct" if array else "struct"
        else:
            element = type[2:] if type.startswith("[]") else type
            if element not in FIXED_CODES and element not in VARIABLE_METHODS and type != "map":
                raise ValueError(f"field {name}: unknown type {type!r}")
            self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        if (tag is None) != (tagged is None):
            raise ValueError(f"field {name}: tag and tagged go together")
        self.tag = tag
        self.tagged = parse_versions(tagged)
        if default is _MISSING:
            if self.type.startswith("[]"):
                default = []
            elif self.type == "struct":
                default = None
            elif self.type == "map":
                default = {}
            else:
                default = _ZERO[self.type]
        self.default = default


def _new_data(values: dict[str, Any]) -> Data:
    data = Data.__new__(Data)
    data.__dict__ = values
    return data


def _layout(
    fields: Sequence[Field], version: int, flexible: bool, build: Callable[..., Any] | None
) -> Layout:
    """The fields present at `version`, in wire order, for the code generator."""
    slots: list[Slot] = []
    absent: list[tuple[str, Any]] = []
    tagged: list[tuple[int, Slot]] = []
    for field in fields:
        # A tagged field exists only where it is tagged: Kafka never sends it untagged.
        tag = field.tag
        present = _in(field.versions, version) and (
            tag is None or (flexible and _in(field.tagged, version))
        )
        if not present or tag is not None:
            absent.append((field.attr, field.default))
        if not present:
            continue
        slot = _slot(field, version, flexible)
        if tag is not None:
            tagged.append((tag, slot))
        else:
            slots.append(slot)
    tagged.sort(key=lambda entry: entry[0])
    return Layout(tuple(slots), tuple(absent), tuple(tagged), flexible, build, _new_data)


def _slot(field: Field, version: int, flexible: bool) -> Slot:
    nullable = _in(field.nullable, version)
    layout = None
    if field.fields is not None:
        layout = _layout(field.fields, version, flexible, field.build)
    kind, element = field.type, ""
    if field.type == "[]struct" or field.type.startswith("[]"):
        kind, element = "array", field.type[2:]
    return Slot(
        field.attr,
        field.name,
        kind,
        field.default,
        nullable,
        field.empty_if_null,
        element,
        layout,
    )


class Message:
    """One request or response: its api key, the versions tabled, and its fields."""

    def __init__(
        self,
        name: str,
        api_key: int,
        versions: tuple[int, int],
        flexible: int | None,
        fields: list[Field],
        build: Callable[..., Any] | None = None,
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.versions = versions
        self.flexible = flexible
        self.fields = fields
        self._build = build
        # Compiled on first use: a process speaks few of the versions tabled, and
        # compiling them all would cost every broker and CLI start most of a second.
        self._codecs: dict[int, Compiled] = {}

    def __repr__(self) -> str:
        return f"Message({self.name}, key {self.api_key}, v{self.versions[0]}-{self.versions[1]})"

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible

    def _codec(self, version: int) -> Compiled:
        codec = self._codecs.get(version)
        if codec is None:
            if not self.versions[0] <= version <= self.versions[1]:
                raise ProtocolError(f"{self.name} has no layout for version {version}")
            layout = _layout(self.fields, version, self.is_flexible(version), self._build)
            codec = self._codecs[version] = compile_layout(layout)
        return codec

    def decode(self, version: int, reader: Reader) -> Any:
        return self._codec(version).decode(reader)

    def encode(self, version: int, obj: Any, writer: Writer) -> None:
        self._codec(version).encode(writer, obj)

    def to_bytes(self, version: int, obj: Any) -> bytes:
        """The encoded body alone, joined (tests and small messages)."""
        writer = Writer()
        self.encode(version, obj, writer)
        return writer.getvalue()

    def from_bytes(self, version: int, data: bytes | bytearray | memoryview) -> Any:
        """Decode a whole body; bytes left over are malformed input."""
        reader = Reader(data)
        decoded = self.decode(version, reader)
        if reader.remaining():
            raise ProtocolError(f"{self.name} v{version}: {reader.remaining()} bytes left over")
        return decoded


# The first version of every native table, and the one version of the headers.
SINGLE_VERSION = 0

M = TypeVar("M", bound="Tabled")


class Tabled:
    """A class whose instances are the structs of its TABLE: ``read`` and ``write`` come
    from the engine, at version 0 unless the caller names another the table holds."""

    __slots__ = ()
    TABLE: ClassVar[Message]

    def write(self, w: Writer, version: int = SINGLE_VERSION) -> None:
        self.TABLE.encode(version, self, w)

    @classmethod
    def read(cls, r: Reader, version: int = SINGLE_VERSION) -> Self:
        decoded: Self = cls.TABLE.decode(version, r)
        return decoded

    def lowest_version(self) -> int:
        """The lowest version that can carry this struct's values: a request whose values
        mean something only from some version on (a read_committed Fetch) overrides it,
        so that it is refused rather than sent at a version that drops them."""
        return self.TABLE.versions[0]


def tabled(*fields: Field, latest: int = SINGLE_VERSION) -> Callable[[type[M]], type[M]]:
    """Give a class its table: `fields` in wire order, versions 0 to `latest`, decoded
    into the class (a field absent at a version is built with its default)."""

    def attach(cls: type[M]) -> type[M]:
        api_key = getattr(cls, "API_KEY", -1)
        versions = (SINGLE_VERSION, latest)
        cls.TABLE = Message(cls.__name__, api_key, versions, None, list(fields), cls)
        return cls

    return attach
