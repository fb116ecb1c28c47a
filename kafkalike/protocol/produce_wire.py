"""Produce's request body and response written out by hand, for the versions clients send (v3-12).

A producer sends thousands of requests a second, each of one or a few partitions, and the
generic schema path (``codec``) costs about as much per request as validating a 64 KiB batch.
These two functions do the same work straight on the buffer, for the requests and responses
they fully understand, and return None for anything else (a tagged field, a null where one is
not allowed, bytes that do not add up, a value that does not fit): the caller then takes the
generic path, which gives the same answer or the same error. What they return is exactly what
the generic path returns for the same input (tests/unit/protocol/test_produce_wire.py holds them
equal on generated messages of every version).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from construct import Container

PRODUCE_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 12
FIRST_FLEXIBLE = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I16_I32 = struct.Struct(">hi")  # acks, timeout_ms
_INDEX_SIZE = struct.Struct(">ii")  # a partition's index and its records' size
_HEAD = struct.Struct(">ii")  # the response's size prefix and correlation id
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... log_start_offset
_PARTITION_KEYS = frozenset(
    {"index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset", "record_errors", "error_message"}
)
_RESPONSE_KEYS = frozenset({"responses", "throttle_time_ms"})


class _Irregular(Exception):
    """Something the hand-written path leaves to the generic one."""


def _uvarint(view: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    for shift in (0, 7, 14, 21, 28):
        byte = view[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
    raise _Irregular


def decode_produce_request(frame: bytes | bytearray | memoryview, pos: int, version: int) -> Any | None:
    """The body of a Produce request that starts at ``pos`` of ``frame`` (after its header), as
    ``codec`` decodes it (records as views of ``frame``); None to leave it to the generic path."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        return None
    view = memoryview(frame)
    try:
        if version >= FIRST_FLEXIBLE:
            return _decode_flexible(frame, view, pos)
        return _decode_classic(frame, view, pos)
    except (_Irregular, IndexError, struct.error, UnicodeDecodeError):
        return None


def _decode_classic(frame: Any, view: memoryview, pos: int) -> Any:
    end = len(view)
    (n,) = _I16.unpack_from(view, pos)
    pos += 2
    if n == -1:
        transactional_id = None
    elif 0 <= n <= end - pos:
        transactional_id = str(view[pos : pos + n], "utf-8")
        pos += n
    else:
        raise _Irregular
    acks, timeout_ms = _I16_I32.unpack_from(view, pos)
    pos += 6
    (topic_count,) = _I32.unpack_from(view, pos)
    pos += 4
    if not 0 <= topic_count <= (end - pos) // 6:
        raise _Irregular
    topics = []
    for _ in range(topic_count):
        (n,) = _I16.unpack_from(view, pos)
        pos += 2
        if not 0 <= n <= end - pos:
            raise _Irregular
        name = str(view[pos : pos + n], "utf-8")
        pos += n
        (partition_count,) = _I32.unpack_from(view, pos)
        pos += 4
        if not 0 <= partition_count <= (end - pos) // 8:
            raise _Irregular
        partitions = []
        for _ in range(partition_count):
            index, size = _INDEX_SIZE.unpack_from(view, pos)
            pos += 8
            if size == -1:
                records = None
            elif 0 <= size <= end - pos:
                records = memoryview(frame)[pos : pos + size]
                pos += size
            else:
                raise _Irregular
            partitions.append(Container(index=index, records=records))
        topics.append(Container(name=name, partition_data=partitions))
    return Container(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=topics)


def _decode_flexible(frame: Any, view: memoryview, pos: int) -> Any:
    end = len(view)
    n, pos = _uvarint(view, pos)
    if n == 0:
        transactional_id = None
    elif n - 1 <= end - pos:
        transactional_id = str(view[pos : pos + n - 1], "utf-8")
        pos += n - 1
    else:
        raise _Irregular
    acks, timeout_ms = _I16_I32.unpack_from(view, pos)
    pos += 6
    topic_count, pos = _uvarint(view, pos)
    topic_count -= 1
    if not 0 <= topic_count <= (end - pos) // 3:
        raise _Irregular
    topics = []
    for _ in range(topic_count):
        n, pos = _uvarint(view, pos)
        if not 1 <= n <= end - pos + 1:
            raise _Irregular
        name = str(view[pos : pos + n - 1], "utf-8")
        pos += n - 1
        partition_count, pos = _uvarint(view, pos)
        partition_count -= 1
        if not 0 <= partition_count <= (end - pos) // 6:
            raise _Irregular
        partitions = []
        for _ in range(partition_count):
            (index,) = _I32.unpack_from(view, pos)
            size, pos = _uvarint(view, pos + 4)
            if size == 0:
                records = None
            elif size - 1 <= end - pos:
                records = memoryview(frame)[pos : pos + size - 1]
                pos += size - 1
            else:
                raise _Irregular
            if view[pos] != 0:  # the partition's tagged fields: none defined
                raise _Irregular
            pos += 1
            partitions.append(Container(index=index, records=records))
        if view[pos] != 0:
            raise _Irregular
        pos += 1
        topics.append(Container(name=name, partition_data=partitions))
    if view[pos] != 0:
        raise _Irregular
    return Container(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=topics)


def encode_produce_response(version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes | None:
    """The whole response frame, size prefix included, as ``api.encode_response_parts`` writes it;
    None to leave it to the generic path."""
    if not MIN_VERSION <= version <= MAX_VERSION or not body.keys() <= _RESPONSE_KEYS:
        return None
    try:
        if version >= FIRST_FLEXIBLE:
            out = _encode_flexible(version, correlation_id, body)
        else:
            out = _encode_classic(version, correlation_id, body)
    except (_Irregular, struct.error, KeyError, TypeError, AttributeError, UnicodeEncodeError):
        return None
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _encode_classic(version: int, correlation_id: int, body: Mapping[str, Any]) -> bytearray:
    out = bytearray(_HEAD.pack(0, correlation_id))
    responses = body["responses"]
    out += _I32.pack(len(responses))
    with_log_start = version >= 5
    with_errors = version >= 8
    for topic in responses:
        if topic.keys() != {"name", "partition_responses"}:
            raise _Irregular
        name = topic["name"].encode("utf-8")
        out += _I16.pack(len(name))
        out += name
        partitions = topic["partition_responses"]
        out += _I32.pack(len(partitions))
        for p in partitions:
            if not p.keys() <= _PARTITION_KEYS:
                raise _Irregular
            get = p.get
            if with_log_start:
                out += _PARTITION_V5.pack(
                    p["index"],
                    p["error_code"],
                    p["base_offset"],
                    get("log_append_time_ms", -1),
                    get("log_start_offset", -1),
                )
            else:
                out += _PARTITION_V3.pack(p["index"], p["error_code"], p["base_offset"], get("log_append_time_ms", -1))
            if with_errors:
                errors = get("record_errors", [])
                out += _I32.pack(len(errors))
                for e in errors:
                    out += _I32.pack(e["batch_index"])
                    _string_classic(out, e.get("batch_index_error_message"))
                _string_classic(out, get("error_message"))
    out += _I32.pack(body.get("throttle_time_ms", 0))
    return out


def _string_classic(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    data = value.encode("utf-8")
    out += _I16.pack(len(data))
    out += data


def _encode_flexible(version: int, correlation_id: int, body: Mapping[str, Any]) -> bytearray:
    out = bytearray(_HEAD.pack(0, correlation_id))
    out.append(0)  # the response header's tagged fields
    responses = body["responses"]
    _put_uvarint(out, len(responses) + 1)
    for topic in responses:
        if topic.keys() != {"name", "partition_responses"}:
            raise _Irregular
        name = topic["name"].encode("utf-8")
        _put_uvarint(out, len(name) + 1)
        out += name
        partitions = topic["partition_responses"]
        _put_uvarint(out, len(partitions) + 1)
        for p in partitions:
            if not p.keys() <= _PARTITION_KEYS:
                raise _Irregular  # current_leader (v10+) among them: the generic path writes it
            get = p.get
            out += _PARTITION_V5.pack(
                p["index"],
                p["error_code"],
                p["base_offset"],
                get("log_append_time_ms", -1),
                get("log_start_offset", -1),
            )
            errors = get("record_errors", [])
            _put_uvarint(out, len(errors) + 1)
            for e in errors:
                out += _I32.pack(e["batch_index"])
                _string_compact(out, e.get("batch_index_error_message"))
                out.append(0)
            _string_compact(out, get("error_message"))
            out.append(0)
        out.append(0)
    out += _I32.pack(body.get("throttle_time_ms", 0))
    out.append(0)  # node_endpoints (v10+) absent
    return out


def _string_compact(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode("utf-8")
    _put_uvarint(out, len(data) + 1)
    out += data


def _put_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
