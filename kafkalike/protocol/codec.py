"""Messages to bytes and back, from construct schemas built out of ``protocol_specs/``.

For each (message, version) the spec's fields become a tree of construct classes
(:mod:`kafkalike.protocol.wire`), compiled by construct into plain Python functions the first
time that version is used. Decoded messages are construct ``Container`` objects (dicts with
attribute access) holding every field the message has at any version: fields the decoded
version lacks carry their defaults. Encoding takes any mapping; missing fields take defaults.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeAlias

from construct import Construct, Container, Float64b, Int8sb, Int16sb, Int16ub, Int32sb, Int32ub, Int64sb

from kafkalike.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from kafkalike.protocol.spec import ApiSpec, FieldSpec, MessageSpec, api_specs, default_value, load_specs
from kafkalike.protocol.wire import (
    ExternalBytes,
    FrameReader,
    KArray,
    KBool,
    KBytes,
    KNullableStruct,
    KString,
    KStruct,
    KUuid,
    PartsWriter,
    ViewReader,
)

# A decoded message: a construct Container (a dict with attribute access), untyped by nature.
Message: TypeAlias = Any

_FIXED: dict[str, tuple[Construct, int]] = {
    "int8": (Int8sb, 1),
    "int16": (Int16sb, 2),
    "int32": (Int32sb, 4),
    "int64": (Int64sb, 8),
    "uint16": (Int16ub, 2),
    "uint32": (Int32ub, 4),
    "float64": (Float64b, 8),
    "bool": (KBool(), 1),
    "uuid": (KUuid(), 16),
}


class _Builder:
    """Turns one message spec at one version into a construct tree."""

    def __init__(self, message: MessageSpec, version: int) -> None:
        self.message = message
        self.version = version
        self.flexible = version in message.flexible

    def children(self, f: FieldSpec) -> tuple[FieldSpec, ...]:
        if f.fields:
            return f.fields
        struct_spec = self.message.structs.get(f.element_type)
        if struct_spec is None:
            raise ValueError(f"{self.message.name}: unknown struct type {f.element_type}")
        return struct_spec.fields

    def default_expr(self, f: FieldSpec) -> str:
        """Python source for the value a field takes when absent (fresh objects each time)."""
        if f.is_struct and not f.is_array and f.default != "null":
            inner = ", ".join(f"{c.name!r}: {self.default_expr(c)}" for c in self.children(f))
            return f"KContainer({{{inner}}})"
        value = default_value(f.type, f.default)
        if value is None or isinstance(value, (bool, int, float, str, bytes, list)):
            return repr(value)
        return f"UUID(int={value.int})"  # type: ignore[attr-defined]

    def field(self, f: FieldSpec) -> tuple[Construct, int]:
        """The construct for a field at this version, and its smallest encoded size."""
        compact = self.flexible and (f.flexible is None or self.version in f.flexible)
        nullable = self.version in f.nullable
        element_type = f.element_type
        if f.is_struct:
            element, element_size = self.struct(f.element_type, self.children(f))
        elif element_type in _FIXED:
            element, element_size = _FIXED[element_type]
        elif element_type == "string":
            element, element_size = KString(compact, nullable and not f.is_array), 1 if compact else 2
        else:  # bytes, records
            records = element_type == "records"
            element, element_size = KBytes(compact, nullable and not f.is_array, records), 1 if compact else 4
        if f.is_array:
            return KArray(element, compact, nullable, element_size), 1 if compact else 4
        if f.is_struct and nullable:
            return KNullableStruct(element), 1
        return element, element_size

    def struct(self, name: str, fields: tuple[FieldSpec, ...]) -> tuple[KStruct, int]:
        regular: list[tuple[str, Construct, str]] = []
        tagged: list[tuple[int, str, Construct, str]] = []
        absent: list[tuple[str, str]] = []
        size = 1 if self.flexible else 0
        for f in fields:
            if self.version not in f.versions:
                absent.append((f.name, self.default_expr(f)))
                continue
            sub, sub_size = self.field(f)
            if f.tag is not None and self.version in f.tagged:
                if self.flexible:
                    tagged.append((f.tag, f.name, sub, self.default_expr(f)))
                else:
                    absent.append((f.name, self.default_expr(f)))
                continue
            regular.append((f.name, sub, self.default_expr(f)))
            size += sub_size
        tagged.sort(key=lambda t: t[0])
        return KStruct(name, regular, tagged, absent, self.flexible), size


@dataclass(frozen=True)
class Schema:
    """A compiled message at one version."""

    name: str
    version: int
    construct: Any

    def decode(self, data: bytes | bytearray | memoryview) -> Message:
        reader = FrameReader(data)
        message = _call_parse(self.construct, reader)
        if reader.remaining():
            raise DecodeError(f"{self.name} v{self.version}: {reader.remaining()} bytes left over")
        return message

    def decode_from(self, reader: FrameReader | ViewReader) -> Message:
        return _call_parse(self.construct, reader)

    def field_names(self) -> set[str]:
        """The top-level fields this version carries on the wire (regular and tagged)."""
        tree = self.construct.defersubcon
        return {name for name, _, _ in tree.fields} | {name for _, name, _, _ in tree.tagged}

    def encode(self, message: Mapping[str, Any]) -> bytes:
        try:
            return bytes(self.construct.build(message))
        except (struct.error, TypeError, AttributeError, ValueError, UnicodeEncodeError) as exc:
            raise EncodeError(f"{self.name} v{self.version}: {exc}") from exc

    def encode_into(self, message: Mapping[str, Any], stream: Any) -> None:
        """Encode onto ``stream`` (anything with ``write``; a ``PartsWriter`` keeps
        ``ExternalBytes`` values apart instead of copying them)."""
        try:
            self.construct.buildfunc(message, stream, Container())
        except (struct.error, TypeError, AttributeError, ValueError, UnicodeEncodeError) as exc:
            raise EncodeError(f"{self.name} v{self.version}: {exc}") from exc

    def encode_parts(self, message: Mapping[str, Any]) -> tuple[list[bytes | ExternalBytes], int]:
        """The encoding as bytes and ``ExternalBytes`` parts, in order, and its total size."""
        writer = PartsWriter()
        self.encode_into(message, writer)
        return writer.finish(), writer.size


def _call_parse(construct: Any, reader: FrameReader | ViewReader) -> Message:
    try:
        return construct.parsefunc(reader, Container())  # type: ignore[no-any-return]
    except DecodeError:
        raise
    except (struct.error, UnicodeDecodeError, ValueError, OverflowError, IndexError) as exc:
        raise DecodeError(str(exc)) from exc


@cache
def _schema(spec_name: str, section: str, version: int) -> Schema:
    spec = load_specs()[spec_name]
    if version not in spec.versions:
        raise UnsupportedVersionError(spec.key if spec.key is not None else -1, version)
    message = spec.messages[section]
    tree, _ = _Builder(message, version).struct(message.name, message.fields)
    return Schema(message.name, version, tree.compile())


def schema(spec_name: str, section: str, version: int) -> Schema:
    """The compiled schema of ``section`` (request/response/message) of a spec at a version."""
    return _schema(spec_name, section, version)


def _api(api_key: int) -> ApiSpec:
    spec = api_specs().get(api_key)
    if spec is None:
        raise UnsupportedVersionError(api_key, 0)
    return spec


def request_schema(api_key: int, version: int) -> Schema:
    return _schema(_api(api_key).name, "request", version)


def response_schema(api_key: int, version: int) -> Schema:
    return _schema(_api(api_key).name, "response", version)
