"""Requests and responses with their headers, and how bad frames are rejected.

Each kind of bad input must raise one precise ProtocolError subclass, never something else,
and lengths read from the wire must be checked against the frame before anything is allocated.
"""

from __future__ import annotations

import struct
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafkalike.protocol.api import (
    RequestHeader,
    UnsupportedRequestError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from kafkalike.protocol.codec import request_schema, response_schema
from kafkalike.protocol.errors import DecodeError, ErrorCode, ProtocolError, UnsupportedVersionError

PRODUCE, METADATA, API_VERSIONS, CONTROLLED_SHUTDOWN = 0, 3, 18, 7
TOPIC_ID = uuid.UUID("0b6f1c2e-4a57-4c1e-9a0e-3f2d1c0b9a88")


def header_v1(api_key: int, version: int, correlation_id: int = 99, client_id: bytes = b"cli") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def header_v2(api_key: int, version: int, correlation_id: int = 99, client_id: bytes = b"cli") -> bytes:
    return header_v1(api_key, version, correlation_id, client_id) + b"\x00"


def metadata_v12_frame(**overrides: Any) -> bytes:
    body = {
        "topics": [{"topic_id": TOPIC_ID, "name": "orders"}],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    } | overrides
    return encode_request(RequestHeader(METADATA, 12, 99, "cli"), body)[4:]


def produce_v3_frame(records: bytes = b"batch") -> bytes:
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }
    return encode_request(RequestHeader(PRODUCE, 3, 99, "cli"), body)[4:]


def rejected(frame: bytes, decode: Callable[[bytes], object] = decode_request) -> ProtocolError:
    with pytest.raises(ProtocolError) as excinfo:
        decode(frame)
    return excinfo.value


# --- header versions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version", "request_v", "response_v"),
    [
        (METADATA, 8, 1, 0),
        (METADATA, 9, 2, 1),  # first flexible Metadata version
        (PRODUCE, 8, 1, 0),
        (PRODUCE, 9, 2, 1),
        (API_VERSIONS, 2, 1, 0),
        (API_VERSIONS, 3, 2, 0),  # flexible body, but the response header stays v0 (KIP-511)
        (API_VERSIONS, 4, 2, 0),
        (CONTROLLED_SHUTDOWN, 0, 0, 0),  # the one request without a client id
        (CONTROLLED_SHUTDOWN, 1, 1, 0),
    ],
)
def test_header_versions(api_key: int, version: int, request_v: int, response_v: int) -> None:
    assert request_header_version(api_key, version) == request_v
    assert response_header_version(api_key, version) == response_v


def test_api_versions_v3_response_has_no_header_tagged_fields() -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}
    payload = response_schema(API_VERSIONS, 3).encode(body)
    frame = encode_response(API_VERSIONS, 3, 1234, body)
    assert frame == struct.pack(">ii", 4 + len(payload), 1234) + payload
    correlation_id, decoded = decode_response(API_VERSIONS, 3, frame[4:])
    assert correlation_id == 1234
    assert decoded.api_keys[0].max_version == 4


def test_flexible_response_has_header_tagged_fields() -> None:
    body: dict[str, Any] = {"brokers": [], "cluster_id": "c", "controller_id": 1, "topics": []}
    payload = response_schema(METADATA, 9).encode(body)
    assert encode_response(METADATA, 9, 5, body) == struct.pack(">ii", 5 + len(payload), 5) + b"\x00" + payload
    payload8 = response_schema(METADATA, 8).encode(body)
    assert encode_response(METADATA, 8, 5, body) == struct.pack(">ii", 4 + len(payload8), 5) + payload8


def test_flexible_request_header_keeps_classic_client_id() -> None:
    frame = encode_request(RequestHeader(METADATA, 12, 7, "ü"), {"topics": None})
    payload = request_schema(METADATA, 12).encode({"topics": None})
    head = struct.pack(">hhih", METADATA, 12, 7, 2) + "ü".encode() + b"\x00"
    assert frame == struct.pack(">i", len(head) + len(payload)) + head + payload
    assert decode_request(frame[4:]) == (
        RequestHeader(METADATA, 12, 7, "ü"),
        request_schema(METADATA, 12).decode(payload),
    )


def test_null_client_id() -> None:
    frame = encode_request(RequestHeader(METADATA, 1, 7, None), {"topics": None})
    assert frame[4:14] == struct.pack(">hhih", METADATA, 1, 7, -1)
    assert decode_request(frame[4:])[0].client_id is None


def test_request_header_tagged_fields_are_skipped() -> None:
    frame = bytearray(metadata_v12_frame())
    tags_at = len(header_v1(METADATA, 12))
    assert frame[tags_at] == 0
    frame[tags_at : tags_at + 1] = b"\x02" + b"\x05\x02ab" + b"\x2a\x00"  # tags 5 ("ab") and 42 (empty)
    header, body = decode_request(bytes(frame))
    assert header == RequestHeader(METADATA, 12, 99, "cli")
    assert body.topics[0].topic_id == TOPIC_ID


def test_response_header_tagged_fields_are_skipped() -> None:
    body: dict[str, Any] = {"brokers": [], "cluster_id": None, "controller_id": 1, "topics": []}
    frame = encode_response(METADATA, 12, 5, body)[4:]
    assert frame[4] == 0
    with_tags = frame[:4] + b"\x01\x00\x03xyz" + frame[5:]
    assert decode_response(METADATA, 12, with_tags) == decode_response(METADATA, 12, frame)


# --- requests we cannot serve -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (header_v1(1000, 0, 41), RequestHeader(1000, 0, 41, "cli")),  # unknown api key
        (header_v1(-1, 0, 42), RequestHeader(-1, 0, 42, "cli")),
        (header_v1(METADATA, 99, 43), RequestHeader(METADATA, 99, 43, "cli")),  # version beyond ours: header v2
        (header_v2(METADATA, 99, 43), RequestHeader(METADATA, 99, 43, "cli")),
        (header_v1(METADATA, -1, 44), RequestHeader(METADATA, -1, 44, "cli")),
        (header_v2(API_VERSIONS, 6, 45), RequestHeader(API_VERSIONS, 6, 45, "cli")),
        # ControlledShutdown v0 has a v0 header: no client id, the body follows the correlation id.
        (struct.pack(">hhii", CONTROLLED_SHUTDOWN, 0, 46, 3), RequestHeader(CONTROLLED_SHUTDOWN, 0, 46, None)),
    ],
)
def test_unsupported_request_carries_its_header(head: bytes, expected: RequestHeader) -> None:
    with pytest.raises(UnsupportedRequestError) as excinfo:
        decode_request(head + b"\x00\x00\x00\x00")
    assert excinfo.value.header == expected
    assert excinfo.value.header.correlation_id == expected.correlation_id
    assert (excinfo.value.api_key, excinfo.value.version) == (expected.api_key, expected.api_version)
    assert isinstance(excinfo.value, UnsupportedVersionError)
    assert excinfo.value.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_decode_errors_map_to_invalid_request() -> None:
    error = rejected(b"\x00\x03")
    assert type(error) is DecodeError
    assert error.error_code == ErrorCode.INVALID_REQUEST


# --- bad bytes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [metadata_v12_frame, produce_v3_frame], ids=["metadata-v12", "produce-v3"])
def test_every_truncation_is_a_decode_error(make: Callable[[], bytes]) -> None:
    frame = make()
    decode_request(frame)
    for cut in range(len(frame)):
        assert type(rejected(frame[:cut])) is DecodeError, cut


@pytest.mark.parametrize("make", [metadata_v12_frame, produce_v3_frame], ids=["metadata-v12", "produce-v3"])
@pytest.mark.parametrize("garbage", [b"\x00", b"\xff\xff\xff\xff", b"trailing"])
def test_trailing_bytes_after_a_request_are_ignored_like_kafka(make: Callable[[], bytes], garbage: bytes) -> None:
    # Apache Kafka does not check for bytes after a request body, and librdkafka sends some
    # (Metadata v13 for all topics); a standalone message decode still insists on an exact fit.
    header, body = decode_request(make())
    assert decode_request(make() + garbage) == (header, body)
    with pytest.raises(DecodeError, match=f"{len(garbage)} bytes left over"):
        request_schema(header.api_key, header.api_version).decode(
            request_schema(header.api_key, header.api_version).encode(body) + garbage
        )


@pytest.mark.parametrize(("version", "count"), [(1, -2), (1, -(2**31)), (0, -1)])
def test_negative_array_length(version: int, count: int) -> None:
    # Metadata topics: nullable (-1) from v1 only; nothing else negative is ever valid.
    frame = header_v1(METADATA, version) + struct.pack(">i", count)
    assert type(rejected(frame)) is DecodeError


def test_null_array_where_allowed() -> None:
    assert decode_request(header_v1(METADATA, 1) + struct.pack(">i", -1))[1].topics is None
    assert decode_request(header_v2(METADATA, 12) + b"\x00" + b"\x01\x00\x00")[1].topics is None


def test_compact_null_for_non_nullable_array() -> None:
    frame = header_v2(PRODUCE, 9) + b"\x00" + struct.pack(">hi", 1, 1000) + b"\x00" + b"\x00"
    assert type(rejected(frame)) is DecodeError


def _rejected_without_allocating(frame: bytes) -> ProtocolError:
    tracemalloc.start()
    try:
        error = rejected(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak} bytes allocated to reject a {len(frame)}-byte frame"
    return error


_PRODUCE_V3_HEAD = header_v1(PRODUCE, 3, client_id=b"") + b"\xff\xff" + struct.pack(">hi", 1, 1000)

# name -> (frame, the bogus length the error must report)
ABSURD: dict[str, tuple[bytes, int | None]] = {
    # non-flexible array counts
    "produce-topics-2^31-1": (_PRODUCE_V3_HEAD + struct.pack(">i", 2**31 - 1), 2**31 - 1),
    "metadata-topics-2^31-1": (header_v1(METADATA, 1) + struct.pack(">i", 2**31 - 1), 2**31 - 1),
    "metadata-topics-1M": (header_v1(METADATA, 1) + struct.pack(">i", 1 << 20) + b"\x00\x01a", 1 << 20),
    # compact array count: uvarint 2^31, so 2^31 - 1 elements
    "metadata-v12-topics": (header_v2(METADATA, 12) + b"\x80\x80\x80\x80\x08", 2**31 - 1),
    # int16 string length beyond the frame
    "string-32767": (header_v1(METADATA, 1) + struct.pack(">ih", 1, 32767) + b"abc", 32767),
    # compact string: uvarint 2^32 - 1, so 2^32 - 2 bytes
    "compact-string": (header_v2(METADATA, 12) + b"\x02" + bytes(16) + b"\xff\xff\xff\xff\x0f" + b"abc", 2**32 - 2),
    # int32 records length of 2^31 - 1
    "records-2^31-1": (
        _PRODUCE_V3_HEAD + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">iii", 1, 0, 2**31 - 1) + b"rec",
        2**31 - 1,
    ),
    # client id length beyond the frame
    "client-id": (struct.pack(">hhih", METADATA, 1, 1, 30000) + b"abc", 30000),
    # request header tagged field of 65535 bytes
    "header-tag": (header_v1(METADATA, 12) + b"\x01\x00\xff\xff\x03", None),
}


@pytest.mark.parametrize(("frame", "length"), list(ABSURD.values()), ids=list(ABSURD))
def test_absurd_length_is_rejected_without_allocating(frame: bytes, length: int | None) -> None:
    assert len(frame) < 48
    error = _rejected_without_allocating(frame)
    assert type(error) is DecodeError
    if length is not None:
        assert str(length) in str(error)


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"ok\x80"])
def test_string_that_is_not_utf8(bad: bytes) -> None:
    topic = header_v1(METADATA, 1) + struct.pack(">ih", 1, len(bad)) + bad
    error = rejected(topic)
    assert type(error) is DecodeError
    assert "UTF-8" in str(error)
    client_id = struct.pack(">hhih", METADATA, 1, 1, len(bad)) + bad + struct.pack(">i", 0)
    assert type(rejected(client_id)) is DecodeError
    compact = header_v2(METADATA, 12) + b"\x02" + bytes(16) + bytes([len(bad) + 1]) + bad + b"\x00\x01\x00\x00"
    assert type(rejected(compact)) is DecodeError


@pytest.mark.parametrize("where", ["array-count", "header-tags", "body-tags", "tag-size"])
@pytest.mark.parametrize("continuation", [6, 10, 100])
def test_varint_that_never_ends(where: str, continuation: int) -> None:
    endless = b"\x80" * continuation + b"\x01"
    frame = {
        "array-count": header_v2(METADATA, 12) + endless,
        "header-tags": header_v1(METADATA, 12) + endless,
        "body-tags": header_v2(METADATA, 12) + b"\x01\x00\x00" + endless,
        "tag-size": header_v2(METADATA, 12) + b"\x01\x00\x00" + b"\x01\x07" + endless,
    }[where]
    error = rejected(frame)
    assert type(error) is DecodeError
    assert "varint" in str(error)


def test_five_byte_varint_is_accepted() -> None:
    # A padded (non-minimal) 5-byte varint is still a valid length.
    frame = header_v2(METADATA, 12) + b"\x81\x80\x80\x80\x00" + b"\x01\x00\x00"
    assert decode_request(frame)[1].topics == []


def test_truncated_response_header() -> None:
    assert type(rejected(b"\x00\x00\x01", lambda f: decode_response(METADATA, 1, f))) is DecodeError
    assert type(rejected(b"\x00\x00\x00\x01", lambda f: decode_response(METADATA, 9, f))) is DecodeError


def test_boolean_nonzero_is_true() -> None:
    frame = header_v1(METADATA, 8) + struct.pack(">i", 0) + b"\x07\x00\x02"
    body = decode_request(frame)[1]
    assert (
        body.allow_auto_topic_creation,
        body.include_cluster_authorized_operations,
        body.include_topic_authorized_operations,
    ) == (True, False, True)
