"""The hand-written Produce request decoder and response encoder against the generic schema path.

Whatever the hand-written path returns must be what the generic one returns for the same input,
and whatever it leaves (returns None for) still decodes or fails exactly as before: both are
checked on generated messages of every version, on every truncation of a request, and on bytes
flipped at random.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalike.protocol import api, produce_wire
from kafkalike.protocol.api import (
    RequestHeader,
    decode_request,
    decode_request_header,
    encode_request,
    encode_response_parts,
)
from kafkalike.protocol.codec import request_schema, response_schema
from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.wire import frame_reader

VERSIONS = range(produce_wire.MIN_VERSION, produce_wire.MAX_VERSION + 1)
INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
NAMES = st.text(max_size=20)

REQUESTS = st.fixed_dictionaries(
    {
        "transactional_id": st.none() | NAMES,
        "acks": INT16,
        "timeout_ms": INT32,
        "topic_data": st.lists(
            st.fixed_dictionaries(
                {
                    "name": NAMES,
                    "partition_data": st.lists(
                        st.fixed_dictionaries({"index": INT32, "records": st.none() | st.binary(max_size=300)}),
                        max_size=4,
                    ),
                }
            ),
            max_size=4,
        ),
    }
)

PARTITION_RESPONSES = st.fixed_dictionaries(
    {"index": INT32, "error_code": INT16, "base_offset": INT64},
    optional={
        "log_append_time_ms": INT64,
        "log_start_offset": INT64,
        "record_errors": st.lists(
            st.fixed_dictionaries(
                {"batch_index": INT32}, optional={"batch_index_error_message": st.none() | st.text(max_size=40)}
            ),
            max_size=3,
        ),
        "error_message": st.none() | st.text(max_size=40),
    },
)
RESPONSES = st.fixed_dictionaries(
    {
        "responses": st.lists(
            st.fixed_dictionaries({"name": NAMES, "partition_responses": st.lists(PARTITION_RESPONSES, max_size=4)}),
            max_size=4,
        )
    },
    optional={"throttle_time_ms": INT32},
)


def request_frame(version: int, body: dict[str, Any]) -> bytearray:
    return bytearray(encode_request(RequestHeader(0, version, 5, "client"), body)[4:])


def generic_decode(frame: bytes | bytearray) -> Any:
    reader = frame_reader(frame, share_records=True)
    header = decode_request_header(reader)
    return request_schema(0, header.api_version).decode_from(reader)


def generic_encode(version: int, body: dict[str, Any]) -> bytes:
    """The response frame as the schema path writes it: size, correlation id 9, header, body."""
    payload = response_schema(0, version).encode(body)
    head = struct.pack(">ii", 4 + len(payload) + (version >= 9), 9) + (b"\x00" if version >= 9 else b"")
    return head + payload


def outcome(decode: Any, frame: bytes | bytearray) -> Any:
    try:
        return ("ok", decode(frame))
    except ProtocolError as exc:
        return ("error", type(exc), str(exc))


def header_end(frame: bytes | bytearray) -> int:
    reader = frame_reader(frame, share_records=True)
    decode_request_header(reader)
    return reader.tell()


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), body=REQUESTS)
def test_requests_decode_as_the_generic_path_decodes_them(version: int, body: dict[str, Any]) -> None:
    frame = request_frame(version, body)
    fast = produce_wire.decode_produce_request(frame, header_end(frame), version)
    assert fast is not None  # every well-formed request without tagged fields takes the fast path
    assert fast == generic_decode(frame)
    for topic in fast.topic_data:
        for part in topic.partition_data:
            if part.records is not None:  # a writable view of the frame, not a copy
                assert isinstance(part.records, memoryview) and not part.records.readonly
                assert part.records.obj is frame


@settings(max_examples=100, deadline=None)
@given(version=st.sampled_from(VERSIONS), body=REQUESTS, data=st.data())
def test_damaged_requests_decode_or_fail_as_before(version: int, body: dict[str, Any], data: st.DataObject) -> None:
    frame = request_frame(version, body)
    cut = data.draw(st.integers(0, len(frame)))
    truncated = frame[:cut]
    assert outcome(decode_request, truncated) == outcome(generic_request, truncated)
    if frame:
        flipped = bytearray(frame)
        at = data.draw(st.integers(0, len(frame) - 1))
        flipped[at] ^= data.draw(st.integers(1, 255))
        assert outcome(decode_request, flipped) == outcome(generic_request, flipped)


def generic_request(frame: bytes | bytearray) -> Any:
    """``decode_request`` with the hand-written path switched off: what it returned before."""
    real = api._decode_produce
    api._decode_produce = lambda frame: None  # type: ignore[assignment]
    try:
        return decode_request(frame)
    finally:
        api._decode_produce = real


@pytest.mark.parametrize("level", ["partition", "topic", "request"])
def test_tagged_fields_are_left_to_the_generic_path(level: str) -> None:
    """A request carrying a tagged field the fast path does not read: it steps aside, and the
    generic path skips the field as before (the negative control of the equality tests)."""
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 100, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}
    ]}  # fmt: skip
    frame = request_frame(9, body)
    at = {"partition": -3, "topic": -2, "request": -1}[level]
    assert frame[at] == 0  # an empty tagged section
    tagged = bytearray(frame)
    tagged[at : len(frame) + at + 1] = bytes([1, 7, 2, 0xAB, 0xCD])  # one unknown tagged field, 2 bytes
    assert produce_wire.decode_produce_request(tagged, header_end(tagged), 9) is None
    assert decode_request(tagged)[1] == generic_decode(frame)


def test_versions_outside_the_fast_range_are_left_alone() -> None:
    body: dict[str, Any] = {"transactional_id": None, "acks": 1, "timeout_ms": 100, "topic_data": []}
    frame = request_frame(2, body)
    assert produce_wire.decode_produce_request(frame, header_end(frame), 2) is None
    assert produce_wire.encode_produce_response(2, 1, {"responses": []}) is None


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), body=RESPONSES)
def test_responses_encode_as_the_generic_path_encodes_them(version: int, body: dict[str, Any]) -> None:
    fast = produce_wire.encode_produce_response(version, 9, body)
    assert fast is not None
    assert fast == generic_encode(version, body)
    assert encode_response_parts(0, version, 9, body) == [fast]


@pytest.mark.parametrize("version", [9, 10, 12])
def test_responses_with_a_leader_hint_take_the_generic_path(version: int) -> None:
    partition: dict[str, Any] = {
        "index": 0,
        "error_code": 6,
        "base_offset": -1,
        "current_leader": {"leader_id": 1, "leader_epoch": 3},
    }
    body: dict[str, Any] = {"responses": [{"name": "t", "partition_responses": [partition]}]}
    assert produce_wire.encode_produce_response(version, 9, body) is None
    assert encode_response_parts(0, version, 9, body) == [generic_encode(version, body)]


def test_values_that_do_not_fit_fail_as_before() -> None:
    body = {
        "responses": [{"name": "t", "partition_responses": [{"index": 1 << 40, "error_code": 0, "base_offset": 0}]}]
    }
    assert produce_wire.encode_produce_response(11, 9, body) is None
    with pytest.raises(Exception) as fast_error:
        encode_response_parts(0, 11, 9, body)
    with pytest.raises(Exception) as generic_error:
        generic_encode(11, body)
    assert type(fast_error.value) is type(generic_error.value)


def test_a_java_producer_request_takes_the_fast_path() -> None:
    """The shape kafka-producer-perf-test sends: one topic, one partition, one batch."""
    records = struct.pack(">qi", 0, 100) + bytes(100)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "bench", "partition_data": [{"index": 0, "records": records}]}
    ]}  # fmt: skip
    frame = request_frame(11, body)
    header, decoded = decode_request(frame)
    assert (header, decoded) == generic_request(frame)
    assert header.client_id == "client"
    assert bytes(decoded.topic_data[0].partition_data[0].records) == records
    assert produce_wire.decode_produce_request(frame, header_end(frame), 11) == decoded
