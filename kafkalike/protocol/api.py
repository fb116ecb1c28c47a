"""Requests and responses with their headers: what the server and test clients call.

Header versions follow the body: a flexible body version uses request header v2 and
response header v1, except ApiVersions responses, which always use header v0 so that a
client can read them before it knows which versions the broker has (KIP-511).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkalike.protocol import produce_wire
from kafkalike.protocol.codec import Message, request_schema, response_schema
from kafkalike.protocol.errors import DecodeError, UnsupportedVersionError
from kafkalike.protocol.spec import api_specs
from kafkalike.protocol.wire import (
    ExternalBytes,
    FrameReader,
    PartsWriter,
    ViewReader,
    frame_reader,
    read_string,
    read_uvarint,
    write_string,
)

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7
_FIXED_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">ii")  # a response's size prefix and correlation id


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class UnsupportedRequestError(UnsupportedVersionError):
    """A request whose key or version we cannot decode; carries the header to answer it."""

    def __init__(self, header: RequestHeader) -> None:
        super().__init__(header.api_key, header.api_version)
        self.header = header


def is_flexible(api_key: int, version: int) -> bool:
    spec = api_specs().get(api_key)
    return spec is not None and version in spec.flexible


def request_header_version(api_key: int, version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and version == 0:
        return 0
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(api_key, version) else 0


def decode_request_header(reader: FrameReader | ViewReader) -> RequestHeader:
    fixed = reader.read(_FIXED_HEADER.size)
    if len(fixed) != _FIXED_HEADER.size:
        raise DecodeError("request header truncated")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack(fixed)
    header_version = request_header_version(api_key, api_version)
    client_id = read_string(reader, False, True) if header_version >= 1 else None
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if header_version >= 2:
        # Header tagged fields: none are defined for requests; skip them.
        for _ in range(read_uvarint(reader)):
            read_uvarint(reader)
            size = read_uvarint(reader)
            if size > reader.remaining():
                raise DecodeError("request header tagged field exceeds the frame")
            reader.read(size)
    return header


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Message]:
    """Header and body of one request frame (without its size prefix).

    RECORDS fields (Produce's batches) are views of ``frame``, not copies: writable when the
    frame is a bytearray."""
    fast = _decode_produce(frame)
    if fast is not None:
        return fast
    reader = frame_reader(frame, share_records=True)
    header = decode_request_header(reader)
    try:
        schema = request_schema(header.api_key, header.api_version)
    except UnsupportedVersionError:
        raise UnsupportedRequestError(header) from None
    # Bytes after the body are ignored, as Apache Kafka ignores them: some clients send them
    # (librdkafka's Metadata v13 request for all topics carries three).
    return header, schema.decode_from(reader)


_PRODUCE_PREFIX = struct.Struct(">hhih")  # api key, version, correlation id, client id length


def _decode_produce(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Message] | None:
    """A Produce request read by ``produce_wire``, header and body, as the generic path reads it;
    None for anything else, and for anything that path leaves to the generic one."""
    if len(frame) < _PRODUCE_PREFIX.size:
        return None
    api_key, version, correlation_id, n = _PRODUCE_PREFIX.unpack_from(frame, 0)
    if api_key != produce_wire.PRODUCE_KEY or not produce_wire.MIN_VERSION <= version <= produce_wire.MAX_VERSION:
        return None
    pos = _PRODUCE_PREFIX.size
    client_id = None
    if n >= 0:
        if n > len(frame) - pos:
            return None
        try:
            client_id = str(memoryview(frame)[pos : pos + n], "utf-8")
        except UnicodeDecodeError:
            return None
        pos += n
    elif n != -1:
        return None
    if is_flexible(api_key, version):  # request header v2: its tagged fields, none expected
        if pos >= len(frame) or frame[pos] != 0:
            return None
        pos += 1
    body = produce_wire.decode_produce_request(frame, pos, version)
    if body is None:
        return None
    return RequestHeader(api_key, version, correlation_id, client_id), body


def encode_request(header: RequestHeader, body: Mapping[str, Any]) -> bytes:
    """A whole request frame, size prefix included."""
    head = bytearray(_FIXED_HEADER.pack(header.api_key, header.api_version, header.correlation_id))
    header_version = request_header_version(header.api_key, header.api_version)
    if header_version >= 1:
        out = _ByteSink(head)
        write_string(out, header.client_id, False, True)
    if header_version >= 2:
        head.append(0)
    payload = request_schema(header.api_key, header.api_version).encode(body)
    return _SIZE.pack(len(head) + len(payload)) + bytes(head) + payload


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    """A whole response frame, size prefix included."""
    parts = encode_response_parts(api_key, api_version, correlation_id, body)
    if len(parts) == 1:
        return parts[0]  # type: ignore[return-value]
    return b"".join(p if isinstance(p, bytes) else p.to_bytes() for p in parts)


def encode_response_parts(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> list[bytes | ExternalBytes]:
    """A whole response frame, size prefix included, as bytes and the ``ExternalBytes`` values
    of the body left uncopied, in order (one bytes part when the body has none)."""
    if api_key == produce_wire.PRODUCE_KEY:
        frame = produce_wire.encode_produce_response(api_version, correlation_id, body)
        if frame is not None:
            return [frame]
    flexible_header = response_header_version(api_key, api_version) >= 1
    writer = _ResponseWriter(correlation_id, flexible_header)
    response_schema(api_key, api_version).encode_into(body, writer)
    return writer.frame()


class _ResponseWriter(PartsWriter):
    """Collects a response after room for its size prefix and header, filled in at the end."""

    def __init__(self, correlation_id: int, flexible_header: bool) -> None:
        super().__init__()
        self._buffer += _HEAD.pack(0, correlation_id)
        if flexible_header:
            self._buffer.append(0)  # no tagged fields in the response header

    def frame(self) -> list[bytes | ExternalBytes]:
        first = self.parts[0] if self.parts else None
        if first is None:  # no external parts: patch the size in place, one copy out
            _SIZE.pack_into(self._buffer, 0, len(self._buffer) - 4)
            return [bytes(self._buffer)]
        parts = self.finish()
        assert isinstance(first, bytes)
        head = bytearray(first)
        _SIZE.pack_into(head, 0, self.size - 4)
        parts[0] = bytes(head)
        return parts


def decode_response(api_key: int, api_version: int, frame: bytes | bytearray | memoryview) -> tuple[int, Message]:
    """Correlation id and body of one response frame (without its size prefix)."""
    reader = FrameReader(frame)
    fixed = reader.read(4)
    if len(fixed) != 4:
        raise DecodeError("response header truncated")
    (correlation_id,) = _SIZE.unpack(fixed)
    if response_header_version(api_key, api_version) >= 1:
        for _ in range(read_uvarint(reader)):
            read_uvarint(reader)
            reader.read(read_uvarint(reader))
    schema = response_schema(api_key, api_version)
    body = schema.decode_from(reader)
    if reader.remaining():
        raise DecodeError(f"{schema.name} v{api_version}: {reader.remaining()} bytes left over")
    return correlation_id, body


class _ByteSink:
    """The one method write_string needs, appending to a bytearray."""

    def __init__(self, buffer: bytearray) -> None:
        self.buffer = buffer

    def write(self, data: bytes) -> int:
        self.buffer += data
        return len(data)
