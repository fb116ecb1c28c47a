"""Construct classes for Kafka's wire types, with code emitters for construct's compiler.

Each class parses from and builds to a binary stream like any construct, and also emits
Python source for ``Construct.compile()``, so a whole message version compiles into one
module of straight-line functions. Every length read from the wire is checked against the
bytes actually left before anything is allocated.
"""

from __future__ import annotations

import struct
import uuid
from io import BytesIO
from typing import Any

from construct import Construct, Container

from kafkalike.protocol.errors import DecodeError, EncodeError

MAX_VARINT_BYTES = 5  # lengths and counts are int32-sized


class FrameReader(BytesIO):
    """A BytesIO that knows its size, so length fields can be bounded cheaply.

    With ``share_records`` it keeps the buffer it was made from, and ``records`` fields come back
    as views of that buffer instead of copies (writable ones when the frame is a bytearray, so a
    produce request's batches can be stamped with offsets where they lie).
    """

    def __init__(self, data: bytes | bytearray | memoryview, share_records: bool = False) -> None:
        super().__init__(data)
        self.end = len(data)
        self.source = data if share_records else None

    def remaining(self) -> int:
        return self.end - self.tell()


class ViewReader:
    """What ``FrameReader`` does, reading the buffer where it lies: a BytesIO copies any buffer
    but ``bytes`` when made, which for a large request costs more than parsing it."""

    __slots__ = ("_pos", "_view", "end", "source")

    def __init__(self, data: bytearray | memoryview, share_records: bool = False) -> None:
        self._view = memoryview(data)
        self._pos = 0
        self.end = len(self._view)
        self.source = data if share_records else None

    def read(self, n: int | None = -1) -> bytes:
        pos = self._pos
        end = self.end if n is None or n < 0 else min(pos + n, self.end)
        self._pos = end
        return self._view[pos:end].tobytes()

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, self.end)[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def remaining(self) -> int:
        return self.end - self._pos


LARGE_FRAME_BYTES = 64 * 1024


def frame_reader(data: bytes | bytearray | memoryview, share_records: bool = False) -> FrameReader | ViewReader:
    """A reader over one frame: a ``ViewReader`` for a large buffer BytesIO would copy."""
    if isinstance(data, bytes) or len(data) < LARGE_FRAME_BYTES:
        return FrameReader(data, share_records)
    return ViewReader(data, share_records)


def remaining(io: Any) -> int:
    if isinstance(io, FrameReader | ViewReader):
        return io.remaining()
    pos = io.tell()
    end = io.seek(0, 2)
    io.seek(pos)
    return int(end) - int(pos)


def read_exact(io: Any, n: int) -> bytes:
    data: bytes = io.read(n)
    if len(data) != n:
        raise DecodeError(f"needed {n} bytes, only {len(data)} left")
    return data


def read_uvarint(io: Any) -> int:
    result = 0
    for i in range(MAX_VARINT_BYTES):
        b = io.read(1)
        if not b:
            raise DecodeError("truncated varint")
        byte: int = b[0]
        result |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return result
    raise DecodeError("varint longer than 5 bytes")


def encode_uvarint(n: int) -> bytes:
    if n < 0:
        raise EncodeError(f"unsigned varint cannot hold {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write_uvarint(io: Any, n: int) -> None:
    io.write(encode_uvarint(n))


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _read_length(io: Any, compact: bool, width: Any) -> int:
    """A length or count: -1 means null. Compact forms store N+1 as an unsigned varint."""
    if compact:
        return read_uvarint(io) - 1
    return int(width.unpack(read_exact(io, width.size))[0])


def _write_length(io: Any, compact: bool, width: Any, n: int) -> None:
    if compact:
        write_uvarint(io, n + 1)
    else:
        io.write(width.pack(n))


def read_blob(io: Any, compact: bool, nullable: bool, wide: bool) -> bytes | None:
    n = _read_length(io, compact, _INT32 if wide else _INT16)
    if n < 0:
        if n == -1 and nullable:
            return None
        raise DecodeError(f"invalid length {n}")
    if n > remaining(io):
        raise DecodeError(f"length {n} exceeds the {remaining(io)} bytes left")
    return read_exact(io, n)


def read_records(io: Any, compact: bool, nullable: bool) -> bytes | memoryview | None:
    """A RECORDS field: a view of the frame (no copy) from a ``FrameReader`` sharing records."""
    source = getattr(io, "source", None)
    if source is None:
        return read_blob(io, compact, nullable, wide=True)
    n = _read_length(io, compact, _INT32)
    if n < 0:
        if n == -1 and nullable:
            return None
        raise DecodeError(f"invalid length {n}")
    pos = io.tell()
    if n > io.end - pos:  # FrameReader and ViewReader both know their end
        raise DecodeError(f"length {n} exceeds the {io.end - pos} bytes left")
    io.seek(pos + n)
    return memoryview(source)[pos : pos + n]


class ExternalBytes:
    """A bytes field whose content the encoder does not copy: ``encode_parts`` puts the object
    itself in the output where the bytes go (after their length), and whoever sends the parts
    writes them, e.g. with ``os.sendfile``. ``to_bytes`` is for writers that need the bytes."""

    def __len__(self) -> int:
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        raise NotImplementedError


class PartsWriter:
    """A write-only stream collecting bytes, with ``ExternalBytes`` kept apart as they are."""

    def __init__(self) -> None:
        self.parts: list[bytes | ExternalBytes] = []
        self._buffer = bytearray()
        self.size = 0

    def write(self, data: Any) -> int:
        self._buffer += data
        return len(data)

    def write_external(self, data: ExternalBytes) -> None:
        if self._buffer:
            self.parts.append(bytes(self._buffer))
            self.size += len(self._buffer)
            self._buffer.clear()
        self.parts.append(data)
        self.size += len(data)

    def finish(self) -> list[bytes | ExternalBytes]:
        if self._buffer:
            self.parts.append(bytes(self._buffer))
            self.size += len(self._buffer)
            self._buffer.clear()
        return self.parts


def read_string(io: Any, compact: bool, nullable: bool) -> str | None:
    data = read_blob(io, compact, nullable, wide=False)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"string is not UTF-8: {exc}") from None


def write_blob(io: Any, data: Any, compact: bool, nullable: bool, wide: bool) -> None:
    width = _INT32 if wide else _INT16
    if data is None:
        if not nullable:
            raise EncodeError("null for a non-nullable field")
        _write_length(io, compact, width, -1)
        return
    _write_length(io, compact, width, len(data))
    if isinstance(data, ExternalBytes):
        write_external = getattr(io, "write_external", None)
        if write_external is not None:
            write_external(data)
            return
        data = data.to_bytes()
    io.write(data)


def write_string(io: Any, value: str | None, compact: bool, nullable: bool) -> None:
    write_blob(io, None if value is None else value.encode("utf-8"), compact, nullable, wide=False)


def read_count(io: Any, compact: bool, nullable: bool, min_size: int) -> int:
    n = _read_length(io, compact, _INT32)
    if n < 0:
        if n == -1 and nullable:
            return -1
        raise DecodeError(f"invalid array length {n}")
    if n * max(min_size, 1) > remaining(io) and (min_size > 0 or n > 1 << 20):
        raise DecodeError(f"array of {n} elements cannot fit in {remaining(io)} bytes")
    return n


def read_bool(io: Any) -> bool:
    return read_exact(io, 1) != b"\x00"


def read_uuid(io: Any) -> uuid.UUID:
    return uuid.UUID(bytes=read_exact(io, 16))


def write_uuid(io: Any, value: uuid.UUID) -> None:
    io.write(value.bytes)


def parse_tagged_section(io: Any) -> list[tuple[int, bytes]]:
    count = read_uvarint(io)
    fields = []
    for _ in range(count):
        tag = read_uvarint(io)
        size = read_uvarint(io)
        if size > remaining(io):
            raise DecodeError(f"tagged field {tag} of {size} bytes exceeds the frame")
        fields.append((tag, read_exact(io, size)))
    return fields


_MISSING = object()  # a field the caller did not set

HELPERS = {
    "FrameReader": FrameReader,
    "read_exact": read_exact,
    "read_uvarint": read_uvarint,
    "write_uvarint": write_uvarint,
    "encode_uvarint": encode_uvarint,
    "read_blob": read_blob,
    "read_string": read_string,
    "read_records": read_records,
    "write_blob": write_blob,
    "write_string": write_string,
    "read_count": read_count,
    "read_bool": read_bool,
    "read_uuid": read_uuid,
    "write_uuid": write_uuid,
    "parse_tagged_section": parse_tagged_section,
    "DecodeError": DecodeError,
    "EncodeError": EncodeError,
    "KContainer": Container,
    "UUID": uuid.UUID,
}
HELPERS["_MISSING"] = _MISSING


def _import_helpers(code: Any) -> None:
    if not getattr(code, "_kafkalike_helpers", False):
        code.append("from kafkalike.protocol.wire import HELPERS as _H\nglobals().update(_H)\n")
        code._kafkalike_helpers = True


class KBool(Construct):  # type: ignore[misc]
    """Kafka's boolean: one byte, nonzero is true."""

    def _parse(self, stream: Any, context: Any, path: Any) -> bool:
        return read_bool(stream)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        stream.write(b"\x01" if obj else b"\x00")
        return obj

    def _emitparse(self, code: Any) -> str:
        _import_helpers(code)
        return "read_bool(io)"

    def _emitbuild(self, code: Any) -> str:
        return '(io.write(b"\\x01" if obj else b"\\x00"), obj)[1]'


class KUuid(Construct):  # type: ignore[misc]
    def _parse(self, stream: Any, context: Any, path: Any) -> uuid.UUID:
        return read_uuid(stream)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        write_uuid(stream, obj)
        return obj

    def _emitparse(self, code: Any) -> str:
        _import_helpers(code)
        return "read_uuid(io)"

    def _emitbuild(self, code: Any) -> str:
        _import_helpers(code)
        return "(write_uuid(io, obj), obj)[1]"


class KString(Construct):  # type: ignore[misc]
    """STRING / NULLABLE_STRING (int16 length) or COMPACT_(NULLABLE_)STRING (uvarint N+1)."""

    def __init__(self, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.compact, self.nullable = compact, nullable

    def _parse(self, stream: Any, context: Any, path: Any) -> str | None:
        return read_string(stream, self.compact, self.nullable)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        write_string(stream, obj, self.compact, self.nullable)
        return obj

    def _emitparse(self, code: Any) -> str:
        _import_helpers(code)
        return f"read_string(io, {self.compact}, {self.nullable})"

    def _emitbuild(self, code: Any) -> str:
        _import_helpers(code)
        return f"(write_string(io, obj, {self.compact}, {self.nullable}), obj)[1]"


class KBytes(Construct):  # type: ignore[misc]
    """BYTES / RECORDS (int32 length) or their compact forms; RECORDS (``records``) parse as views."""

    def __init__(self, compact: bool, nullable: bool, records: bool = False) -> None:
        super().__init__()
        self.compact, self.nullable, self.records = compact, nullable, records

    def _parse(self, stream: Any, context: Any, path: Any) -> bytes | memoryview | None:
        if self.records:
            return read_records(stream, self.compact, self.nullable)
        return read_blob(stream, self.compact, self.nullable, True)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        write_blob(stream, obj, self.compact, self.nullable, True)
        return obj

    def _emitparse(self, code: Any) -> str:
        _import_helpers(code)
        if self.records:
            return f"read_records(io, {self.compact}, {self.nullable})"
        return f"read_blob(io, {self.compact}, {self.nullable}, True)"

    def _emitbuild(self, code: Any) -> str:
        _import_helpers(code)
        return f"(write_blob(io, obj, {self.compact}, {self.nullable}, True), obj)[1]"


class KArray(Construct):  # type: ignore[misc]
    """ARRAY (int32 count, -1 null) or COMPACT_ARRAY (uvarint N+1, 0 null) of one element type."""

    def __init__(self, element: Construct, compact: bool, nullable: bool, min_size: int) -> None:
        super().__init__()
        self.element, self.compact, self.nullable, self.min_size = element, compact, nullable, min_size

    def _parse(self, stream: Any, context: Any, path: Any) -> list[Any] | None:
        n = read_count(stream, self.compact, self.nullable, self.min_size)
        if n < 0:
            return None
        return [self.element._parsereport(stream, context, path) for _ in range(n)]

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if obj is None:
            if not self.nullable:
                raise EncodeError("null for a non-nullable array")
            _write_length(stream, self.compact, _INT32, -1)
            return obj
        _write_length(stream, self.compact, _INT32, len(obj))
        for item in obj:
            self.element._build(item, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        _import_helpers(code)
        fname = f"parse_array_{code.allocateId()}"
        element = self.element._compileparse(code)
        code.append(
            f"def {fname}(io, this):\n"
            f"    n = read_count(io, {self.compact}, {self.nullable}, {self.min_size})\n"
            f"    if n < 0:\n"
            f"        return None\n"
            f"    return [{element} for _ in range(n)]\n"
        )
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        _import_helpers(code)
        fname = f"build_array_{code.allocateId()}"
        element = self.element._compilebuild(code)
        null = encode_uvarint(0) if self.compact else _INT32.pack(-1)
        count = "encode_uvarint(len(obj) + 1)" if self.compact else "_INT32_pack(len(obj))"
        code.append(
            f"_INT32_pack = struct.Struct('>i').pack\n"
            f"def {fname}_element(obj, io, this):\n"
            f"    return {element}\n"
            f"def {fname}(obj, io, this):\n"
            f"    if obj is None:\n"
            f"        if not {self.nullable}:\n"
            f"            raise EncodeError('null for a non-nullable array')\n"
            f"        io.write({null!r})\n"
            f"        return obj\n"
            f"    io.write({count})\n"
            f"    for item in obj:\n"
            f"        {fname}_element(item, io, this)\n"
            f"    return obj\n"
        )
        return f"{fname}(obj, io, this)"


_NULL_STRUCT, _PRESENT_STRUCT = b"\xff", b"\x01"


class KNullableStruct(Construct):  # type: ignore[misc]
    """A nullable struct field (KIP-893): int8 -1 for null, else 1 followed by the struct."""

    def __init__(self, struct: Construct) -> None:
        super().__init__()
        self.struct = struct

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        if read_exact(stream, 1)[0] & 0x80:
            return None
        return self.struct._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if obj is None:
            stream.write(_NULL_STRUCT)
            return obj
        stream.write(_PRESENT_STRUCT)
        return self.struct._build(obj, stream, context, path)

    def _emitparse(self, code: Any) -> str:
        _import_helpers(code)
        fname = f"parse_nullable_{code.allocateId()}"
        code.append(
            f"def {fname}(io, this):\n"
            f"    if read_exact(io, 1)[0] & 0x80:\n"
            f"        return None\n"
            f"    return {self.struct._compileparse(code)}\n"
        )
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        _import_helpers(code)
        fname = f"build_nullable_{code.allocateId()}"
        code.append(
            f"def {fname}(obj, io, this):\n"
            f"    if obj is None:\n"
            f"        io.write({_NULL_STRUCT!r})\n"
            f"        return obj\n"
            f"    io.write({_PRESENT_STRUCT!r})\n"
            f"    return {self.struct._compilebuild(code)}\n"
        )
        return f"{fname}(obj, io, this)"


class KStruct(Construct):  # type: ignore[misc]
    """A struct at one version: its fields in order, then (flexible versions) a tagged-field section.

    ``absent`` holds the fields this version does not carry, filled with their defaults on parse
    so that handlers can read every field at every version. Tagged fields equal to their default
    are not written, as Apache Kafka does.
    """

    def __init__(
        self,
        name: str,
        fields: list[tuple[str, Construct, str]],
        tagged: list[tuple[int, str, Construct, str]],
        absent: list[tuple[str, str]],
        flexible: bool,
    ) -> None:
        # Defaults are Python expressions (str), evaluated afresh for each parse.
        super().__init__()
        self.struct_name = name
        self.fields, self.tagged, self.absent, self.flexible = fields, tagged, absent, flexible
        self._default_exprs = {n: d for n, _, d in fields} | {n: d for _, n, _, d in tagged} | dict(absent)

    def default_object(self) -> Container:
        return Container({name: eval(expr, dict(HELPERS)) for name, expr in self._default_exprs.items()})

    def _parse(self, stream: Any, context: Any, path: Any) -> Container:
        obj = Container()
        for name, sub, _ in self.fields:
            obj[name] = sub._parsereport(stream, context, path)
        if self.flexible:
            by_tag = {tag: (name, sub) for tag, name, sub, _ in self.tagged}
            for tag, data in parse_tagged_section(stream):
                if tag in by_tag:
                    name, sub = by_tag[tag]
                    obj[name] = sub._parsereport(FrameReader(data), context, path)
        for name, expr in self._default_exprs.items():
            if name not in obj:
                obj[name] = eval(expr, dict(HELPERS))
        return obj

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        get = obj.get
        for name, sub, expr in self.fields:
            value = get(name, _MISSING)
            sub._build(eval(expr, dict(HELPERS)) if value is _MISSING else value, stream, context, path)
        if self.flexible:
            out = []
            for tag, name, sub, expr in self.tagged:
                value = get(name, _MISSING)
                if value is _MISSING or value == eval(expr, dict(HELPERS)):
                    continue
                buf = BytesIO()
                sub._build(value, buf, context, path)
                out.append((tag, buf.getvalue()))
            write_uvarint(stream, len(out))
            for tag, data in out:
                write_uvarint(stream, tag)
                write_uvarint(stream, len(data))
                stream.write(data)
        return obj

    def _emitparse(self, code: Any) -> str:
        _import_helpers(code)
        fid = code.allocateId()
        fname = f"parse_{self.struct_name}_{fid}"
        lines = [f"def {fname}(io, this):", "    obj = KContainer()"]
        for name, sub, _ in self.fields:
            lines.append(f"    obj[{name!r}] = {sub._compileparse(code)}")
        if self.flexible:
            lines.append("    for tag, data in parse_tagged_section(io):")
            for tag, name, sub, _ in self.tagged:
                tname = f"{fname}_tag{tag}"
                code.append(f"def {tname}(io, this):\n    return {sub._compileparse(code)}\n")
                lines.append(f"        if tag == {tag}:")
                lines.append(f"            obj[{name!r}] = {tname}(FrameReader(data), this)")
            lines.append("        pass")
            for _, name, _, expr in self.tagged:
                lines.append(f"    if {name!r} not in obj:")
                lines.append(f"        obj[{name!r}] = {expr}")
        for name, expr in self.absent:
            lines.append(f"    obj[{name!r}] = {expr}")
        lines.append("    return obj")
        code.append("\n".join(lines) + "\n")
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        _import_helpers(code)
        fid = code.allocateId()
        fname = f"build_{self.struct_name}_{fid}"
        lines = [f"def {fname}(obj, io, this):", "    get = obj.get"]
        for i, (name, sub, expr) in enumerate(self.fields):
            # Defaults are shared, read-only constants when building.
            code.append(
                f"{fname}_d{i} = {expr}\ndef {fname}_f{i}(obj, io, this):\n    return {sub._compilebuild(code)}\n"
            )
            lines.append(f"    {fname}_f{i}(get({name!r}, {fname}_d{i}), io, this)")
        if self.flexible:
            lines.append("    tagged = []")
            for tag, name, sub, expr in self.tagged:
                # A tagged field is left out when its bytes equal its default's, as Kafka does.
                default_bytes = BytesIO()
                sub._build(eval(expr, dict(HELPERS)), default_bytes, Container(), "(default)")
                code.append(
                    f"{fname}_t{tag}_default = {default_bytes.getvalue()!r}\n"
                    f"def {fname}_t{tag}(obj, io, this):\n    return {sub._compilebuild(code)}\n"
                )
                lines.append(f"    value = get({name!r}, _MISSING)")
                lines.append("    if value is not _MISSING:")
                lines.append("        buf = BytesIO()")
                lines.append(f"        {fname}_t{tag}(value, buf, this)")
                lines.append("        data = buf.getvalue()")
                lines.append(f"        if data != {fname}_t{tag}_default:")
                lines.append(f"            tagged.append(({tag}, data))")
            lines.append("    io.write(encode_uvarint(len(tagged)))")
            lines.append("    for tag, data in tagged:")
            lines.append("        io.write(encode_uvarint(tag) + encode_uvarint(len(data)))")
            lines.append("        io.write(data)")
        lines.append("    return obj")
        code.append("\n".join(lines) + "\n")
        return f"{fname}(obj, io, this)"
