"""One generic codec driven by declarative message tables, for both protocols.

A ``Message`` is a list of ``Field``s: for Kafka, transcribed from Kafka's JSON
definitions (a name, a type, the versions the field exists in, the versions it may be
null in, its default, and for tagged fields the tag); for the native protocol, one
version in classic encodings (spark_replica.wire.native.table). At construction the
table is compiled once per version into a plan of steps (runs of fixed-width fields
merged into one struct unpack/pack), so decoding and encoding build no closures per call.

Decoded structs are ``Data`` objects whose attributes are the field names in
snake_case, or instances of the class a table names (``build``: the native messages'
dataclasses, built with the field values as keywords); a field absent in the decoded
version holds its default, so a handler can read every field at any version. Encoding
reads attributes with ``getattr(obj, name, default)`` from any object, so a response
may leave out fields its version lacks.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from spark_replica.errors import ProtocolError
from spark_replica.wire.primitives import ZERO_UUID, Reader, Writer

# A version range's upper bound when the JSON says "N+".
_NO_UPPER_BOUND = 1 << 15
_MISSING: Any = object()

ReadStep = Callable[[Reader, dict[str, Any]], None]
WriteStep = Callable[[Writer, Any], None]
Read = Callable[[Reader], Any]
Write = Callable[[Writer, Any], None]


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


# Fixed-width types: struct code and zero value. bool packs as "?", which reads any
# non-zero byte as True, as Kafka does.
_FIXED: dict[str, tuple[str, Any]] = {
    "int8": ("b", 0),
    "int16": ("h", 0),
    "uint16": ("H", 0),
    "int32": ("i", 0),
    "uint32": ("I", 0),
    "int64": ("q", 0),
    "float64": ("d", 0.0),
    "bool": ("?", False),
}
# Variable-width scalars: (classic, flexible) method names, nullable and not.
_VARIABLE: dict[str, tuple[str, str, str, str]] = {
    # type: (classic nullable, classic required, compact nullable, compact required)
    "string": ("string", "required_string", "compact_string", "required_compact_string"),
    "bytes": ("bytes_", "required_bytes", "compact_bytes", "required_compact_bytes"),
    "records": ("records", "records", "compact_records", "compact_records"),
    "uuid": ("uuid", "uuid", "uuid", "uuid"),
}
_ZERO: dict[str, Any] = {"string": "", "bytes": b"", "records": None, "uuid": ZERO_UUID}


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
            if element not in _FIXED and element not in _VARIABLE and type != "map":
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
                default = _FIXED[self.type][1] if self.type in _FIXED else _ZERO[self.type]
        self.default = default


class _Codec:
    """One struct's fields compiled for one version."""

    __slots__ = (
        "base",
        "build",
        "flexible",
        "fresh_lists",
        "read_steps",
        "read_tags",
        "write_steps",
        "write_tags",
    )

    def __init__(
        self,
        fields: Sequence[Field],
        version: int,
        flexible: bool,
        build: Callable[..., Any] | None = None,
    ) -> None:
        self.build = build
        self.base: dict[str, Any] = {}
        fresh: list[tuple[str, list[Any] | dict[str, Any]]] = []
        regular: list[Field] = []
        self.flexible = flexible
        self.read_tags: dict[int, tuple[str, Read]] = {}
        write_tags: list[tuple[int, str, Any, Write]] = []
        for field in fields:
            # A tagged field exists only where it is tagged: Kafka never sends it untagged.
            tag = field.tag
            is_tagged = tag is not None
            present = _in(field.versions, version) and (
                not is_tagged or (flexible and _in(field.tagged, version))
            )
            if not present or is_tagged:
                if isinstance(field.default, list | dict):
                    fresh.append((field.attr, field.default))
                else:
                    self.base[field.attr] = field.default
            if not present:
                continue
            if tag is not None:
                read, write = _field_codec(field, version, flexible)
                self.read_tags[tag] = (field.attr, read)
                write_tags.append((tag, field.attr, field.default, write))
            else:
                regular.append(field)
        self.fresh_lists = tuple(fresh)
        self.write_tags = tuple(sorted(write_tags, key=lambda entry: entry[0]))
        self.read_steps, self.write_steps = _compile_steps(regular, version, flexible)

    def decode(self, reader: Reader) -> Any:
        values = self.base.copy()
        for attr, default in self.fresh_lists:
            values[attr] = default.copy()
        for step in self.read_steps:
            step(reader, values)
        if self.flexible:
            _read_tagged(reader, self.read_tags, values)
        if self.build is not None:
            return self.build(**values)
        data = Data.__new__(Data)
        data.__dict__ = values
        return data

    def encode(self, writer: Writer, obj: Any) -> None:
        for step in self.write_steps:
            step(writer, obj)
        if self.flexible:
            _write_tagged(writer, self.write_tags, obj)


def _read_tagged(
    reader: Reader, known: dict[int, tuple[str, Read]], values: dict[str, Any]
) -> None:
    for _ in range(reader.tagged_field_count()):
        tag = reader.unsigned_varint()
        size = reader.unsigned_varint()
        entry = known.get(tag)
        if entry is None:
            reader.take(size)
            continue
        end = reader.pos + size
        if end > reader.end:
            raise ProtocolError(f"tagged field {tag} runs past the frame end")
        inner = Reader(reader.view, reader.pos, end)
        values[entry[0]] = entry[1](inner)
        if inner.pos != end:
            raise ProtocolError(f"tagged field {tag} has {end - inner.pos} bytes left over")
        reader.pos = end


def _write_tagged(writer: Writer, tags: Sequence[tuple[int, str, Any, Write]], obj: Any) -> None:
    present = []
    for tag, attr, default, write in tags:
        value = getattr(obj, attr, default)
        if value != default:
            present.append((tag, value, write))
    writer.unsigned_varint(len(present))
    for tag, value, write in present:
        inner = Writer()
        write(inner, value)
        writer.unsigned_varint(tag)
        writer.unsigned_varint(len(inner))
        for buffer in inner.buffers():
            writer.raw(buffer)


def _compile_steps(
    fields: Sequence[Field], version: int, flexible: bool
) -> tuple[tuple[ReadStep, ...], tuple[WriteStep, ...]]:
    """Steps for the regular fields in order; adjacent fixed-width fields share one step."""
    read_steps: list[ReadStep] = []
    write_steps: list[WriteStep] = []
    run: list[Field] = []

    def close_run() -> None:
        if run:
            read_step, write_step = _fixed_run([(f.attr, f.type, f.default) for f in run])
            read_steps.append(read_step)
            write_steps.append(write_step)
            run.clear()

    for field in fields:
        if field.type in _FIXED:
            run.append(field)
            continue
        close_run()
        read, write = _field_codec(field, version, flexible)
        read_steps.append(_single_read(field.attr, read))
        write_steps.append(_single_write(field.attr, field.default, write))
    close_run()
    return tuple(read_steps), tuple(write_steps)


def _fixed_run(fields: list[tuple[str, str, Any]]) -> tuple[ReadStep, WriteStep]:
    codec = struct.Struct(">" + "".join(_FIXED[kind][0] for _, kind, _ in fields))
    size = codec.size
    unpack_from = codec.unpack_from
    attrs = tuple(attr for attr, _, _ in fields)
    with_defaults = tuple((attr, default) for attr, _, default in fields)

    def read(reader: Reader, values: dict[str, Any]) -> None:
        pos = reader.pos
        if pos + size > reader.end:
            raise ProtocolError(f"frame ends at byte {reader.end}, fields needed {pos + size}")
        reader.pos = pos + size
        values.update(zip(attrs, unpack_from(reader.view, pos), strict=True))

    def write(writer: Writer, obj: Any) -> None:
        try:
            writer.fixed(codec, [getattr(obj, attr, default) for attr, default in with_defaults])
        except struct.error as exc:
            raise ProtocolError(f"a value of {attrs} does not fit its field: {exc}") from None

    return read, write


def _single_read(attr: str, read: Read) -> ReadStep:
    def step(reader: Reader, values: dict[str, Any]) -> None:
        values[attr] = read(reader)

    return step


def _single_write(attr: str, default: Any, write: Write) -> WriteStep:
    def step(writer: Writer, obj: Any) -> None:
        write(writer, getattr(obj, attr, default))

    return step


def _field_codec(field: Field, version: int, flexible: bool) -> tuple[Read, Write]:
    """Read and write functions of one field's value at one version."""
    nullable = _in(field.nullable, version)
    if field.fields is not None:
        codec = _Codec(field.fields, version, flexible, field.build)
        if field.type == "struct":
            return codec.decode, codec.encode
        return _array(codec.decode, codec.encode, flexible, nullable, field.name)
    if field.type == "map":
        return _string_map(flexible, nullable, field.name)
    if field.type.startswith("[]"):
        element = field.type[2:]
        read, write = _scalar(element, flexible, nullable=False)
        item_bytes = struct.calcsize(">" + _FIXED[element][0]) if element in _FIXED else 1
        return _array(read, write, flexible, nullable, field.name, item_bytes)
    if field.empty_if_null:
        return _empty_if_null(*_scalar(field.type, flexible, nullable=True))
    return _scalar(field.type, flexible, nullable)


def _string_map(flexible: bool, nullable: bool, name: str) -> tuple[Read, Write]:
    """A dict on the wire as an array of (key, value) strings; each pair takes at least
    its two lengths."""
    read_string, write_string = _scalar("string", flexible, nullable=False)

    def read_pair(reader: Reader) -> tuple[str, str]:
        return read_string(reader), read_string(reader)

    def write_pair(writer: Writer, pair: tuple[str, str]) -> None:
        write_string(writer, pair[0])
        write_string(writer, pair[1])

    read_pairs, write_pairs = _array(read_pair, write_pair, flexible, nullable, name, 4)

    def read(reader: Reader) -> dict[str, str] | None:
        pairs = read_pairs(reader)
        return None if pairs is None else dict(pairs)

    def write(writer: Writer, value: dict[str, str] | None) -> None:
        write_pairs(writer, None if value is None else list(value.items()))

    return read, write


def _empty_if_null(read: Read, write: Write) -> tuple[Read, Write]:
    def read_or_empty(reader: Reader) -> Any:
        value = read(reader)
        return b"" if value is None else value

    return read_or_empty, write


def _scalar(kind: str, flexible: bool, nullable: bool) -> tuple[Read, Write]:
    if kind in _FIXED:
        name = "boolean" if kind == "bool" else kind
        return getattr(Reader, name), _write_with(name)
    names = _VARIABLE[kind]
    name = names[(2 if flexible else 0) + (0 if nullable else 1)]
    return getattr(Reader, name), _write_with(name)


def _write_with(name: str) -> Write:
    """Write with the writer's own method `name`, so a Writer subclass sees every field
    (the fuzzer's MarkingWriter notes where lengths and ints go); a plain Writer's is
    called directly, without looking it up on each value."""
    plain = getattr(Writer, name)

    def write(writer: Writer, value: Any) -> None:
        if type(writer) is Writer:
            plain(writer, value)
        else:
            getattr(writer, name)(value)

    return write


def _array(
    read_item: Read,
    write_item: Write,
    flexible: bool,
    nullable: bool,
    name: str,
    item_bytes: int = 1,
) -> tuple[Read, Write]:
    """An array's codec; its count is refused unless the frame can hold that many items
    of at least `item_bytes` each (one byte for a struct, a scalar's width)."""
    read_length = Reader.compact_array_length if flexible else Reader.array_length
    write_length = _write_with("compact_array_length" if flexible else "array_length")

    def read(reader: Reader) -> list[Any] | None:
        count = read_length(reader, item_bytes)
        if count < 0:
            if nullable:
                return None
            raise ProtocolError(f"non-nullable array {name} is null")
        return [read_item(reader) for _ in range(count)]

    def write(writer: Writer, items: Any) -> None:
        if items is None:
            if not nullable:
                raise ProtocolError(f"non-nullable array {name} holds None")
            write_length(writer, None)
            return
        if not isinstance(items, list | tuple) and not isinstance(items, Sequence):
            items = list(items)
        write_length(writer, len(items))
        for item in items:
            write_item(writer, item)

    return read, write


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
        self._codecs = {
            version: _Codec(fields, version, self.is_flexible(version), build)
            for version in range(versions[0], versions[1] + 1)
        }

    def __repr__(self) -> str:
        return f"Message({self.name}, key {self.api_key}, v{self.versions[0]}-{self.versions[1]})"

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible

    def _codec(self, version: int) -> _Codec:
        codec = self._codecs.get(version)
        if codec is None:
            raise ProtocolError(f"{self.name} has no layout for version {version}")
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


# The one version of a table that is not versioned (the native messages, the headers).
SINGLE_VERSION = 0

M = TypeVar("M", bound="Tabled")


class Tabled:
    """A class whose instances are the structs of its TABLE, a table of one version:
    ``read`` and ``write`` come from the engine."""

    __slots__ = ()
    TABLE: ClassVar[Message]

    def write(self, w: Writer) -> None:
        self.TABLE.encode(SINGLE_VERSION, self, w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        decoded: Self = cls.TABLE.decode(SINGLE_VERSION, r)
        return decoded


def tabled(*fields: Field) -> Callable[[type[M]], type[M]]:
    """Give a class its table: `fields` in wire order, decoded into the class."""

    def attach(cls: type[M]) -> type[M]:
        api_key = getattr(cls, "API_KEY", -1)
        versions = (SINGLE_VERSION, SINGLE_VERSION)
        cls.TABLE = Message(cls.__name__, api_key, versions, None, list(fields), cls)
        return cls

    return attach
