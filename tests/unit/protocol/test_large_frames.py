"""Large frames without copies: direct receive in FrameSplitter, ViewReader, records as views,
and responses encoded in parts around bytes the caller sends itself."""

from __future__ import annotations

import struct

import pytest

from kafkalike.protocol.api import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
)
from kafkalike.protocol.errors import DecodeError
from kafkalike.protocol.framing import CHUNK_BYTES, DIRECT_BYTES, FULL_AT, FrameSplitter
from kafkalike.protocol.records import Record, build_batch
from kafkalike.protocol.wire import ExternalBytes, FrameReader, ViewReader, frame_reader


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_large_frame_is_received_into_its_own_buffer() -> None:
    payload = bytes(range(256)) * (DIRECT_BYTES // 256 + 3)
    splitter = FrameSplitter()
    splitter.feed(framed(payload)[:1000])
    assert splitter.take_frame() is None
    view = splitter.receive_view()
    assert view is not None and 0 < len(view) <= len(payload) - 996
    rest = framed(payload)[1000:] + framed(b"next")
    # Part of it straight into the view, the rest (and the next frame) fed as usual.
    with view:
        view[:5000] = rest[:5000]
    splitter.received(5000)
    assert splitter.wanted() == len(payload) - 996 - 5000
    splitter.feed(rest[5000:])
    assert splitter.receive_view() is None
    frame = splitter.take_frame()
    assert isinstance(frame, bytearray) and frame == payload
    assert splitter.next_frame() == b"next"
    assert splitter.next_frame() is None
    assert splitter.buffered() == 0


def test_large_frame_received_only_through_views_ends_in_one_buffer() -> None:
    payload = bytes(range(251)) * 4000  # ~1 MB: chunks first, then its full buffer
    splitter = FrameSplitter()
    splitter.feed(framed(payload)[:10])
    assert splitter.take_frame() is None  # the size is known: the frame gets its buffer
    pos, views = 6, 0
    while (view := splitter.receive_view()) is not None:
        with view:
            assert 0 < len(view) <= len(payload) - pos
            n = min(len(view), 100_000)  # a receive that got less than the view holds
            view[:n] = payload[pos : pos + n]
        splitter.received(n)
        pos += n
        views += 1
    frame = splitter.take_frame()
    assert frame == payload and isinstance(frame, bytearray)
    assert views >= len(payload) // 100_000
    assert splitter.allocated_bytes() <= 1


def test_a_view_still_held_does_not_stop_the_frame() -> None:
    payload = bytes(range(256)) * 1000
    splitter = FrameSplitter()
    splitter.feed(framed(payload)[:100])
    assert splitter.take_frame() is None
    held = splitter.receive_view()  # never released
    assert held is not None
    splitter.feed(framed(payload)[100:])
    assert splitter.take_frame() == payload


def test_a_view_asked_for_and_not_used_loses_no_bytes() -> None:
    # Found by tests/property/test_frame_splitter.py: a chunk made for a view, then bytes fed.
    payload = b"\x01" * 85826
    stream = framed(b"") + framed(payload)
    splitter = FrameSplitter()
    splitter.feed(stream[:8])
    assert splitter.next_frame() == b""
    assert splitter.next_frame() is None
    for start, end in ((8, 89), (89, 45264), (45264, len(stream))):
        view = splitter.receive_view()
        assert view is not None
        view.release()
        splitter.feed(stream[start:end])
    assert splitter.next_frame() == payload


def test_announced_size_costs_nothing_until_its_bytes_arrive() -> None:
    size = 100 * 1024 * 1024
    splitter = FrameSplitter()
    splitter.feed(struct.pack(">i", size) + b"0123456789")
    assert splitter.take_frame() is None
    assert splitter.announced_bytes() == size
    assert splitter.allocated_bytes() <= CHUNK_BYTES + 100
    view = splitter.receive_view()
    assert view is not None and len(view) == CHUNK_BYTES - 10
    view.release()
    # As bytes arrive the memory follows them: chunks, then the full buffer once a share is here.
    while splitter.wanted() > 1_000_000:
        splitter.feed(b"x" * 1_000_000)
        arrived = splitter.buffered() - 4
        assert splitter.allocated_bytes() <= max(arrived + CHUNK_BYTES, FULL_AT * arrived) + 100
    assert splitter.allocated_bytes() >= size


def test_large_frame_fed_byte_by_byte_chunks() -> None:
    payloads = [b"a" * (DIRECT_BYTES + 1), b"small", b"b" * (3 * DIRECT_BYTES)]
    stream = b"".join(framed(p) for p in payloads)
    splitter = FrameSplitter()
    out = []
    for start in range(0, len(stream), 4093):
        splitter.feed(stream[start : start + 4093])
        while (frame := splitter.next_frame()) is not None:
            out.append(frame)
    assert out == payloads
    assert splitter.buffered() == 0


def test_large_frame_already_complete_is_not_moved() -> None:
    payload = b"z" * (DIRECT_BYTES * 2)
    splitter = FrameSplitter()
    splitter.feed(framed(payload))
    assert splitter.receive_view() is None
    assert splitter.take_frame() == payload


def test_view_reader_reads_like_frame_reader() -> None:
    data = bytearray(range(200)) * 400
    a, b = FrameReader(bytes(data)), ViewReader(data)
    for n in (1, 4, 0, 1000, -1):
        assert a.read(n) == b.read(n)
        assert a.tell() == b.tell()
    assert b.remaining() == 0
    assert b.seek(10) == 10 and b.read(2) == bytes(data[10:12])
    assert b.seek(-3, 2) == len(data) - 3
    assert isinstance(frame_reader(data), ViewReader)
    assert isinstance(frame_reader(bytes(data)), FrameReader)
    assert isinstance(frame_reader(bytearray(10)), FrameReader)


def produce_frame(records: bytes) -> bytes:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }
    return encode_request(RequestHeader(0, 9, 7, "c"), body)[4:]


@pytest.mark.parametrize("size", [100, 200_000])
def test_produce_records_are_writable_views_of_a_bytearray_frame(size: int) -> None:
    batch = build_batch([Record(value=b"v" * size)], base_timestamp=1)
    frame = bytearray(produce_frame(batch))
    header, body = decode_request(frame)
    records = body.topic_data[0].partition_data[0].records
    assert header.correlation_id == 7
    assert isinstance(records, memoryview) and not records.readonly
    assert records == batch
    records[0:8] = b"\x00" * 7 + b"\x05"  # stamping an offset changes the frame itself
    assert frame.find(b"\x00" * 7 + b"\x05") >= 0


def test_produce_records_from_bytes_are_read_only() -> None:
    batch = build_batch([Record(value=b"v")], base_timestamp=1)
    _, body = decode_request(produce_frame(batch))
    records = body.topic_data[0].partition_data[0].records
    assert records == batch and records.readonly


def test_truncated_records_field_is_a_decode_error() -> None:
    frame = bytearray(produce_frame(build_batch([Record(value=b"v" * 100_000)], base_timestamp=1)))
    with pytest.raises(DecodeError):
        decode_request(frame[:-10])


class Outside(ExternalBytes):
    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def to_bytes(self) -> bytes:
        return self.data


def fetch_response(records: object) -> dict[str, object]:
    part = {"partition_index": 0, "high_watermark": 1, "records": records}
    return {"responses": [{"topic": "t", "partitions": [part, dict(part, partition_index=1)]}]}


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_response_parts_leave_external_bytes_in_place(version: int) -> None:
    batch = build_batch([Record(value=b"x" * 500)], base_timestamp=1)
    outside = Outside(batch)
    parts = encode_response_parts(1, version, 42, fetch_response(outside))
    assert [p is outside for p in parts][:4] == [False, True, False, True]
    assert all(isinstance(p, bytes) for p in parts if p is not outside)
    joined = b"".join(p if isinstance(p, bytes) else p.to_bytes() for p in parts)
    assert joined == encode_response(1, version, 42, fetch_response(batch))
    assert struct.unpack(">i", joined[:4])[0] == len(joined) - 4
    correlation_id, body = decode_response(1, version, joined[4:])
    assert correlation_id == 42 and body.responses[0].partitions[1].records == batch
    assert encode_response(1, version, 42, fetch_response(outside)) == joined


def test_response_without_external_bytes_is_one_part() -> None:
    parts = encode_response_parts(18, 3, 9, {"error_code": 0, "api_keys": []})
    assert len(parts) == 1 and isinstance(parts[0], bytes)
    assert parts[0] == encode_response(18, 3, 9, {"error_code": 0, "api_keys": []})
