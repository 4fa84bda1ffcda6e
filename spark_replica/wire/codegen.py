"""A table's layout at one version compiled into plain Python functions, once.

The table engine (spark_replica.wire.schema) resolves a message's fields at a version
into a ``Layout``; this module writes the source of one decode and two encode functions
for it and compiles them with ``compile``, the first time the table is used at that
version. Nested structs and arrays are inlined as loops, a run of fixed-width fields is
one ``struct`` call, and the reader's position is a local variable, so decoding or
encoding a message does no per-field dispatch on type names and no per-field function
calls (every produce and fetch pays for these codecs, on the client and on the broker).

Decoding checks every length and count against the bytes that remain before slicing or
sizing anything, with spark_replica.wire.bounds raising the same errors the Reader's
own methods raise; kinds this module does not inline (varints, uuids, compact lengths)
call the Reader's methods. Encoding has two variants of the same layout: one appends to
a plain Writer's buffer directly, the other calls the writer's own methods field by
field (``fixed`` for a run of fixed-width fields), so a Writer subclass (the fuzzer's
MarkingWriter) sees every int and length it writes. Record bytes are sliced from the
frame on decode and kept by reference on encode (no copy).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_replica.errors import ProtocolError
from spark_replica.wire.bounds import bounded_count
from spark_replica.wire.primitives import (
    MAX_STRING_BYTES,
    Reader,
    Writer,
    encode_utf8,
    read_tagged,
    refuse_long_string,
    write_tagged,
)

Decode = Callable[[Reader], Any]
Encode = Callable[[Writer, Any], None]

# Fixed-width types: their struct code. bool packs as "?", which reads any non-zero byte
# as True, as Kafka does.
FIXED_CODES: dict[str, str] = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "bool": "?",
}
# Variable-width scalars: the Reader/Writer method names (classic nullable, classic
# required, compact nullable, compact required).
VARIABLE_METHODS: dict[str, tuple[str, str, str, str]] = {
    "string": ("string", "required_string", "compact_string", "required_compact_string"),
    "bytes": ("bytes_", "required_bytes", "compact_bytes", "required_compact_bytes"),
    "records": ("records", "records", "compact_records", "compact_records"),
    "uuid": ("uuid", "uuid", "uuid", "uuid"),
}


@dataclass(frozen=True, slots=True)
class Slot:
    """One field present at the version compiled: ``kind`` is a fixed-width type name,
    "string", "bytes", "records", "uuid", "map", "array" (of ``element``: a scalar type
    name or, with ``layout``, structs) or "struct" (one ``layout`` in place)."""

    attr: str
    name: str
    kind: str
    default: Any
    nullable: bool = False
    empty_if_null: bool = False
    element: str = ""
    layout: Layout | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    """One struct at one version: its regular fields in wire order, the values of the
    fields absent at this version (a list or dict default is copied per struct), its
    tagged fields by tag, whether it is flexible, and what builds it (None: ``new_data``,
    whose attributes may be missing on encode, so they are read with their default)."""

    slots: tuple[Slot, ...]
    absent: tuple[tuple[str, Any], ...]
    tagged: tuple[tuple[int, Slot], ...]
    flexible: bool
    build: Callable[..., Any] | None
    new_data: Callable[[dict[str, Any]], Any] = field(compare=False, default=dict)


@dataclass(frozen=True, slots=True)
class Compiled:
    """A layout's functions: decode, and encode for a plain Writer or any Writer."""

    decode: Decode
    encode_plain: Encode
    encode_any: Encode

    def encode(self, writer: Writer, obj: Any) -> None:
        if type(writer) is Writer:
            self.encode_plain(writer, obj)
        else:
            self.encode_any(writer, obj)


def compile_layout(layout: Layout) -> Compiled:
    """The layout's decode and encode functions, generated and compiled once."""
    source = _Source()
    decode = source.function("decode", "reader", _DecodeEmitter(source).struct(layout))
    plain = source.function(
        "encode_plain", "writer, obj", _EncodeEmitter(source, True).struct(layout)
    )
    any_writer = source.function(
        "encode_any", "writer, obj", _EncodeEmitter(source, False).struct(layout)
    )
    return Compiled(decode, plain, any_writer)


def compile_value(slot: Slot, flexible: bool) -> tuple[Decode, Encode]:
    """Read and write one value of `slot` alone (a tagged field's bytes)."""
    source = _Source()
    decode = source.function("decode", "reader", _DecodeEmitter(source).value(slot, flexible))
    encode = source.function(
        "encode", "writer, obj", _EncodeEmitter(source, True).value(slot, flexible)
    )
    return decode, encode


class _Source:
    """Names for the constants a generated function refers to, and its compilation."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            "ProtocolError": ProtocolError,
            "Sequence": Sequence,
            "BUFFERS": (bytes, bytearray, memoryview),
            "bounded_count": bounded_count,
            "struct_error": struct.error,
            "unpack_from": struct.unpack_from,
            "pack": struct.pack,
            "short": _short,
            "misfit": _misfit,
            "too_long": refuse_long_string,
            "utf8": encode_utf8,
            "read_tagged": read_tagged,
            "write_tagged": write_tagged,
            "MAX_STRING_BYTES": MAX_STRING_BYTES,
            "I16": struct.Struct(">h"),
            "I32": struct.Struct(">i"),
        }
        self._names = 0

    def const(self, value: Any) -> str:
        self._names += 1
        name = f"c{self._names}"
        self.namespace[name] = value
        return name

    def var(self) -> str:
        self._names += 1
        return f"v{self._names}"

    def function(self, name: str, params: str, body: list[str]) -> Any:
        lines = body or ["pass"]
        text = "\n".join([f"def {name}({params}):", *("    " + line for line in lines)])
        exec(compile(text, f"<wire codec {name}>", "exec"), self.namespace)
        return self.namespace.pop(name)


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _short(end: int, needed: int) -> None:
    raise ProtocolError(f"frame ends at byte {end}, fields needed {needed}")


def _misfit(attrs: tuple[str, ...], exc: struct.error) -> None:
    raise ProtocolError(f"a value of {attrs} does not fit its field: {exc}") from None


def _refuse_unless_fits(length: str) -> str:
    """The line that refuses a length of more bytes than remain (negative ones too)."""
    return f"if {length} < 0 or {length} > end - pos: bounded_count({length}, end - pos, 'byte')"


def _method(kind: str, flexible: bool, nullable: bool) -> str:
    """The Reader/Writer method of a scalar kind."""
    if kind in FIXED_CODES:
        return "boolean" if kind == "bool" else kind
    return VARIABLE_METHODS[kind][(2 if flexible else 0) + (0 if nullable else 1)]


def _fixed_runs(slots: Sequence[Slot]) -> list[list[Slot]]:
    """The slots in order, adjacent fixed-width ones grouped (others alone)."""
    runs: list[list[Slot]] = []
    for slot in slots:
        fixed = slot.kind in FIXED_CODES
        if fixed and runs and runs[-1][0].kind in FIXED_CODES:
            runs[-1].append(slot)
        else:
            runs.append([slot])
    return runs


def _item_bytes(slot: Slot) -> int:
    """The fewest bytes one item of an array takes (a scalar's width, else 1; a map
    pair its two lengths)."""
    if slot.kind == "map":
        return 4
    if slot.element in FIXED_CODES:
        return struct.calcsize(">" + FIXED_CODES[slot.element])
    return 1


class _DecodeEmitter:
    """Source lines that read a layout into locals; `view`, `pos`, `end` are locals of
    the function, and `pos` goes back to the reader around every call of its methods."""

    def __init__(self, source: _Source) -> None:
        self.source = source

    def prologue(self) -> list[str]:
        return ["view = reader.view", "pos = reader.pos", "end = reader.end"]

    def struct(self, layout: Layout) -> list[str]:
        target = self.source.var()
        lines = [
            *self.prologue(),
            *self.build(layout, target),
            "reader.pos = pos",
            f"return {target}",
        ]
        return lines

    def value(self, slot: Slot, flexible: bool) -> list[str]:
        target = self.source.var()
        return [
            *self.prologue(),
            *self.slot(slot, target, flexible),
            "reader.pos = pos",
            f"return {target}",
        ]

    def build(self, layout: Layout, target: str) -> list[str]:
        """Read the layout's fields and build its struct into `target`."""
        lines: list[str] = []
        values: list[tuple[str, str]] = []
        for run in _fixed_runs(layout.slots):
            if run[0].kind in FIXED_CODES:
                names = [self.source.var() for _ in run]
                lines += self.fixed_run(run, names)
                values += [(slot.attr, name) for slot, name in zip(run, names, strict=True)]
            else:
                name = self.source.var()
                lines += self.slot(run[0], name, layout.flexible)
                values.append((run[0].attr, name))
        for attr, default in layout.absent:
            values.append((attr, self._default(default)))
        mapping = "{" + ", ".join(f"{attr!r}: {value}" for attr, value in values) + "}"
        if layout.flexible:
            tags = {tag: (slot.attr, compile_value(slot, True)[0]) for tag, slot in layout.tagged}
            lines += [
                f"{target} = {mapping}",
                "reader.pos = pos",
                f"read_tagged(reader, {self.source.const(tags)}, {target})",
                "pos = reader.pos",
            ]
            mapping = target
        if layout.build is not None and not layout.flexible:
            keywords = ", ".join(f"{attr}={value}" for attr, value in values)
            lines.append(f"{target} = {self.source.const(layout.build)}({keywords})")
        elif layout.build is not None:
            lines.append(f"{target} = {self.source.const(layout.build)}(**{mapping})")
        else:
            lines.append(f"{target} = {self.source.const(layout.new_data)}({mapping})")
        return lines

    def _default(self, default: Any) -> str:
        constant = self.source.const(default)
        return f"{constant}.copy()" if isinstance(default, list | dict) else constant

    def fixed_run(self, run: list[Slot], names: list[str]) -> list[str]:
        codec = struct.Struct(">" + "".join(FIXED_CODES[slot.kind] for slot in run))
        return [
            f"if pos + {codec.size} > end: short(end, pos + {codec.size})",
            f"{', '.join(names)}, = {self.source.const(codec)}.unpack_from(view, pos)",
            f"pos += {codec.size}",
        ]

    def call(self, method: str, target: str, *args: str) -> list[str]:
        return [
            "reader.pos = pos",
            f"{target} = reader.{method}({', '.join(args)})",
            "pos = reader.pos",
        ]

    def slot(self, slot: Slot, target: str, flexible: bool) -> list[str]:
        kind = slot.kind
        if kind in FIXED_CODES:
            return self.fixed_run([slot], [target])
        if kind == "struct":
            assert slot.layout is not None
            return self.build(slot.layout, target)
        if kind in ("array", "map"):
            return self.array(slot, target, flexible)
        if flexible or kind == "uuid":
            lines = self.call(_method(kind, flexible, slot.nullable), target)
        elif kind == "string":
            lines = self.string(target, slot.nullable)
        else:
            lines = self.byte_field(target, kind, slot.nullable or kind == "records")
        if slot.empty_if_null:
            lines.append(f"if {target} is None: {target} = b''")
        return lines

    def string(self, target: str, nullable: bool) -> list[str]:
        null = (
            f"{target} = None"
            if nullable
            else "raise ProtocolError('a non-nullable string field is null')"
        )
        return [
            "if pos + 2 > end: short(end, pos + 2)",
            f"{target}, = I16.unpack_from(view, pos)",
            "pos += 2",
            f"if {target} == -1: {null}",
            "else:",
            f"    if {target} > MAX_STRING_BYTES: too_long({target})",
            f"    {_refuse_unless_fits(target)}",
            f"    pos += {target}",
            f"    {target} = str(view[pos - {target}:pos], 'utf-8', 'surrogateescape')",
        ]

    def byte_field(self, target: str, kind: str, nullable: bool) -> list[str]:
        null = (
            f"{target} = None"
            if nullable
            else "raise ProtocolError('a non-nullable bytes field is null')"
        )
        whole = f"view[pos - {target}:pos]"
        return [
            "if pos + 4 > end: short(end, pos + 4)",
            f"{target}, = I32.unpack_from(view, pos)",
            "pos += 4",
            f"if {target} == -1: {null}",
            "else:",
            f"    {_refuse_unless_fits(target)}",
            f"    pos += {target}",
            f"    {target} = {whole if kind == 'records' else f'bytes({whole})'}",
        ]

    def array(self, slot: Slot, target: str, flexible: bool) -> list[str]:
        count = self.source.var()
        item_bytes = _item_bytes(slot)
        if flexible:
            lines = self.call("compact_array_length", count, str(item_bytes))
        else:
            lines = [
                "if pos + 4 > end: short(end, pos + 4)",
                f"{count}, = I32.unpack_from(view, pos)",
                "pos += 4",
                f"if {count} != -1 and ({count} < 0 or {count} * {item_bytes} > end - pos):",
                f"    bounded_count({count}, end - pos, 'array', {item_bytes})",
            ]
        null = (
            f"{target} = None"
            if slot.nullable
            else f"raise ProtocolError({f'non-nullable array {slot.name} is null'!r})"
        )
        lines += [f"if {count} == -1: {null}", "else:"]
        lines += _indent(self.items(slot, target, count, flexible))
        return lines

    def items(self, slot: Slot, target: str, count: str, flexible: bool) -> list[str]:
        if slot.kind == "map":
            key, value = self.source.var(), self.source.var()
            return [
                f"{target} = {{}}",
                f"for _ in range({count}):",
                *_indent(self.slot(Slot("", "", "string", ""), key, flexible)),
                *_indent(self.slot(Slot("", "", "string", ""), value, flexible)),
                f"    {target}[{key}] = {value}",
            ]
        if slot.element in FIXED_CODES:
            code = FIXED_CODES[slot.element]
            width = struct.calcsize(">" + code)
            return [
                f"{target} = list(unpack_from('>%d{code}' % {count}, view, pos))",
                f"pos += {count} * {width}",
            ]
        item = self.source.var()
        if slot.layout is not None:
            read = self.build(slot.layout, item)
        else:
            element = Slot("", slot.name, slot.element, None)
            read = self.slot(element, item, flexible)
        return [
            f"{target} = []",
            f"for _ in range({count}):",
            *_indent(read),
            f"    {target}.append({item})",
        ]


class _EncodeEmitter:
    """Source lines that write a struct `obj`: `plain` appends to a plain Writer's
    buffer (`buf`, reloaded after every call that may replace it), otherwise every field
    goes through the writer's own methods."""

    def __init__(self, source: _Source, plain: bool) -> None:
        self.source = source
        self.plain = plain

    def struct(self, layout: Layout) -> list[str]:
        prologue = ["buf = writer.buf"] if self.plain else []
        return [*prologue, *self.fields(layout, "obj")]

    def value(self, slot: Slot, flexible: bool) -> list[str]:
        return ["buf = writer.buf", *self.slot(slot, "obj", flexible)]

    def fields(self, layout: Layout, obj: str) -> list[str]:
        lines: list[str] = []
        strict = layout.build is not None
        for run in _fixed_runs(layout.slots):
            values = [self.attr(obj, slot, strict) for slot in run]
            if run[0].kind in FIXED_CODES:
                lines += self.fixed_run(run, values)
                continue
            value = self.source.var()
            lines.append(f"{value} = {values[0]}")
            lines += self.slot(run[0], value, layout.flexible)
        if layout.flexible:
            tags = tuple(
                (tag, slot.attr, slot.default, compile_value(slot, True)[1])
                for tag, slot in layout.tagged
            )
            lines += [f"write_tagged(writer, {self.source.const(tags)}, {obj})", *self.reload()]
        return lines

    def attr(self, obj: str, slot: Slot, strict: bool) -> str:
        if strict:
            return f"{obj}.{slot.attr}"
        return f"getattr({obj}, {slot.attr!r}, {self.source.const(slot.default)})"

    def reload(self) -> list[str]:
        return ["buf = writer.buf"] if self.plain else []

    def fixed_run(self, run: list[Slot], values: list[str]) -> list[str]:
        codec = self.source.const(
            struct.Struct(">" + "".join(FIXED_CODES[slot.kind] for slot in run))
        )
        attrs = self.source.const(tuple(slot.attr for slot in run))
        write = (
            f"buf += {codec}.pack({', '.join(values)})"
            if self.plain
            else f"writer.fixed({codec}, ({', '.join(values)},))"
        )
        return ["try:", f"    {write}", "except struct_error as exc:", f"    misfit({attrs}, exc)"]

    def call(self, method: str, *args: str) -> list[str]:
        return [f"writer.{method}({', '.join(args)})", *self.reload()]

    def slot(self, slot: Slot, value: str, flexible: bool) -> list[str]:
        kind = slot.kind
        if kind in FIXED_CODES:
            return self.fixed_run([slot], [value])
        if kind == "struct":
            assert slot.layout is not None
            return self.fields(slot.layout, value)
        if kind in ("array", "map"):
            return self.array(slot, value, flexible)
        method = _method(kind, flexible, slot.nullable)
        if not self.plain or flexible or kind == "uuid":
            return self.call(method, value)
        if kind == "string":
            return self.string(value, slot.nullable)
        return self.byte_field(value, method, slot.nullable or kind == "records")

    def string(self, value: str, nullable: bool) -> list[str]:
        null = (
            "buf += b'\\xff\\xff'"
            if nullable
            else ("raise ProtocolError('a non-nullable string field holds None')")
        )
        data = self.source.var()
        return [
            f"if {value} is None: {null}",
            "else:",
            f"    {data} = utf8({value})",
            f"    buf += I16.pack(len({data}))",
            f"    buf += {data}",
        ]

    def byte_field(self, value: str, method: str, nullable: bool) -> list[str]:
        """A buffer inline (by reference when large); anything else, a list of record
        buffers for one, through the writer's method."""
        null = (
            "buf += b'\\xff\\xff\\xff\\xff'"
            if nullable
            else "raise ProtocolError('a non-nullable bytes field holds None')"
        )
        size = self.source.var()
        return [
            f"if isinstance({value}, BUFFERS):",
            f"    {size} = len({value})",
            f"    buf += I32.pack({size})",
            f"    if {size} >= writer._large_field_bytes:",
            *_indent(_indent(self.call("raw", value))),
            "    else:",
            f"        buf += {value}",
            f"elif {value} is None: {null}",
            "else:",
            *_indent(self.call(method, value)),
        ]

    def array(self, slot: Slot, value: str, flexible: bool) -> list[str]:
        length = "compact_array_length" if flexible else "array_length"
        null = (
            self.call(length, "None")
            if slot.nullable
            else [f"raise ProtocolError({f'non-nullable array {slot.name} holds None'!r})"]
        )
        lines = [f"if {value} is None:", *_indent(null), "else:"]
        body: list[str] = []
        if slot.kind == "map":
            body.append(f"{value} = list({value}.items())")
        else:
            body += [
                f"if type({value}) is not list and not isinstance({value}, Sequence):",
                f"    {value} = list({value})",
            ]
        if self.plain and not flexible:
            body.append(f"buf += I32.pack(len({value}))")
        else:
            body += self.call(length, f"len({value})")
        body += self.items(slot, value, flexible)
        return lines + _indent(body)

    def items(self, slot: Slot, value: str, flexible: bool) -> list[str]:
        item = self.source.var()
        if slot.kind == "map":
            pair = Slot("", "", "string", "")
            write = [
                *self.slot(pair, f"{item}[0]", flexible),
                *self.slot(pair, f"{item}[1]", flexible),
            ]
        elif slot.layout is not None:
            write = self.fields(slot.layout, item)
        elif self.plain and slot.element in FIXED_CODES:
            code = FIXED_CODES[slot.element]
            attrs = self.source.const((slot.attr,))
            return [
                "try:",
                f"    buf += pack('>%d{code}' % len({value}), *{value})",
                "except struct_error as exc:",
                f"    misfit({attrs}, exc)",
            ]
        else:
            write = self.slot(Slot("", slot.name, slot.element, None), item, flexible)
        return [f"for {item} in {value}:", *_indent(write)]
