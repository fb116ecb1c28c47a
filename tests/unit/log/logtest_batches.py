"""Builds small valid v2 record batches for the log tests, independent of the protocol encoder."""

from __future__ import annotations

import struct

import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")
    body += _varint(timestamp_delta) + _varint(offset_delta)
    body += _varint(-1) if key is None else _varint(len(key)) + key
    body += _varint(-1) if value is None else _varint(len(value)) + value
    body += _varint(0)
    return _varint(len(body)) + bytes(body)


def make_batch(
    values: list[bytes],
    *,
    timestamps: list[int] | None = None,
    base_timestamp: int = 1_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    keys: list[bytes | None] | None = None,
    base_offset: int = 0,
    leader_epoch: int = -1,
) -> bytearray:
    """A v2 batch of uncompressed records; ``timestamps`` default to ``base_timestamp`` + i."""
    if timestamps is None:
        timestamps = [base_timestamp + i for i in range(len(values))]
    base_ts = min(timestamps)
    keys = keys or [None] * len(values)
    records = b"".join(
        _record(i, ts - base_ts, k, v) for i, (ts, k, v) in enumerate(zip(timestamps, keys, values, strict=True))
    )
    attributes = (0x10 if transactional else 0) | (0x20 if control else 0)
    out = bytearray(61)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        49 + len(records),
        leader_epoch,
        2,
        0,
        attributes,
        len(values) - 1,
        base_ts,
        max(timestamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(values),
    )
    out += records
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return out


def make_marker(
    *, commit: bool, producer_id: int, producer_epoch: int, coordinator_epoch: int = 0, timestamp: int = 1_000
) -> bytearray:
    """A transaction end marker: one control record, key (version 0, type), value (version 0, epoch)."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    batch = make_batch(
        [value],
        keys=[key],
        timestamps=[timestamp],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )
    return batch


def batch_values(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in whole uncompressed batches, for checking reads."""
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(data):
        header = _HEADER.unpack_from(data, pos)
        base, length, count = header[0], header[1], header[12]
        p = pos + 61
        for _ in range(count):
            _, p = _read_varint(data, p)  # record length
            p += 1
            _, p = _read_varint(data, p)
            delta, p = _read_varint(data, p)
            key_len, p = _read_varint(data, p)
            p += max(key_len, 0)
            value_len, p = _read_varint(data, p)
            out.append((base + delta, bytes(data[p : p + value_len])))
            p += value_len
            _, p = _read_varint(data, p)  # header count (always 0 here)
        pos += 12 + length
    return out


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
