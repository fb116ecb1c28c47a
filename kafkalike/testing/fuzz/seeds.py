"""Seed inputs for every target, written by this project's own encoders."""

from __future__ import annotations

import hashlib
import random
import struct
import uuid
import zlib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from kafkalike.log.coordinator_log import encode_versioned
from kafkalike.protocol import compression
from kafkalike.protocol import records as rec
from kafkalike.protocol.api import RequestHeader, encode_request
from kafkalike.protocol.codec import schema
from kafkalike.protocol.spec import FieldSpec, MessageSpec, api_specs, load_specs
from kafkalike.server.registry import load_handlers
from kafkalike.testing.fuzz.request_path import FUZZ_TOPIC
from kafkalike.testing.fuzz.targets import CONSUMER_PROTOCOL_SPECS

SEED_DIR_FOR = {"broken_decoder": "requests"}
_INT_WIDTHS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16, "uint32": 32}
_NAMES = [FUZZ_TOPIC, "topic-é", "g", ""]


def sample_message(message: MessageSpec, fields: tuple[FieldSpec, ...], version: int, rng: random.Random) -> Any:
    """A valid value for ``message`` at ``version``: every field present at that version set, nulls
    sprinkled in, records fields holding a seed batch. The fuzz seeds and the decoder's property
    tests (tests/property/test_decode_fuzz.py) both build their frames with it."""
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        if version in f.nullable and rng.random() < 0.2:
            out[f.name] = None
            continue
        items = [_sample_element(message, f, version, rng) for _ in range(rng.randint(1, 2))]
        out[f.name] = items if f.is_array else items[0]
    return out


def _sample_element(message: MessageSpec, f: FieldSpec, version: int, rng: random.Random) -> Any:
    type_ = f.element_type
    if f.is_struct:
        return sample_message(message, f.fields or message.structs[type_].fields, version, rng)
    if type_ in _INT_WIDTHS:
        bits = _INT_WIDTHS[type_]
        if rng.random() < 0.5:  # small values reach further: partition 0, a few records, short waits
            return rng.randrange(4)
        return rng.randrange(2**bits) if type_.startswith("u") else rng.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1))
    if type_ == "bool":
        return rng.random() < 0.5
    if type_ == "float64":
        return rng.random()
    if type_ == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if type_ == "string":
        return rng.choice(_NAMES)
    if type_ == "records":
        return rng.choice(record_seeds())
    return rng.randbytes(rng.randint(0, 12))


def request_seeds() -> list[bytes]:
    """One request frame (without size prefix) per API key and version the broker registers."""
    rng = random.Random(20261201)
    frames = []
    specs = api_specs()
    for handler in sorted(load_handlers().values(), key=lambda h: h.api_key):
        message = specs[handler.api_key].request
        for version in range(handler.min_version, handler.max_version + 1):
            body = sample_message(message, message.fields, version, rng)
            header = RequestHeader(handler.api_key, version, rng.randrange(2**31), rng.choice(["c", None]))
            frames.append(encode_request(header, body)[4:])
    return frames


def _legacy_message(magic: int, offset: int, attributes: int, key: bytes | None, value: bytes | None) -> bytes:
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", 1_700_000_000_000 + offset) if magic else b"")
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


@cache
def record_seeds() -> list[bytes]:
    """Batches of every codec, control batches, and legacy message sets plain and compressed."""
    rows = [rec.Record(key=b"k%d" % i, value=b"value %d " % i * 3, headers=[("h", b"v")]) for i in range(3)]
    rows.append(rec.Record(key=None, value=None))
    seeds = [rec.build_batch(rows, compression=codec, base_timestamp=1_700_000_000_000) for codec in range(5)]
    seeds.append(rec.build_batch(rows[:1], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True))
    seeds.append(
        rec.build_end_txn_marker(commit=True, producer_id=7, producer_epoch=0, coordinator_epoch=1, timestamp=1)
    )
    seeds.append(seeds[0] + seeds[1])
    for magic in (0, 1):
        plain = b"".join(_legacy_message(magic, i, 0, b"k", b"v%d" % i) for i in range(3))
        seeds.append(plain)
        for codec in (compression.GZIP, compression.SNAPPY, compression.LZ4):
            seeds.append(_legacy_message(magic, 2 if magic else 0, codec, None, compression.compress(codec, plain)))
    return seeds


def record_body_seeds() -> list[bytes]:
    """The records of the seed batches, uncompressed, for every codec."""
    out = []
    for batch in record_seeds()[:7]:
        ((pos, header),) = rec.iter_batches(batch)
        body = rec.batch_payload(batch, pos, header)
        flags = header.attributes & 0x78
        out += [bytes([codec | flags, header.records_count, header.last_offset_delta]) + body for codec in range(5)]
    return out


def _sample_of(name: str, version: int, rng: random.Random) -> bytes:
    message = load_specs()[name].messages["message"]
    return schema(name, "message", version).encode(sample_message(message, message.fields, version, rng))


def consumer_protocol_seeds() -> list[bytes]:
    rng = random.Random(20261202)
    out = []
    for name in CONSUMER_PROTOCOL_SPECS:
        versions = load_specs()[name].versions
        for version in range(versions.low, (versions.high or versions.low) + 1):
            out.append(struct.pack(">h", version) + _sample_of(name, version, rng))
    return out


def coordinator_record_seeds() -> list[bytes]:
    """Every key and value type of the coordinator topics, at each value version."""
    rng = random.Random(20261203)
    specs = load_specs()
    out = []
    for name in sorted(n for n in specs if n.endswith("Key") and n[:-3] + "Value" in specs):
        key_spec, value_spec = specs[name], specs[name[:-3] + "Value"]
        key_version = key_spec.versions.low  # a key's version says which record it is
        key = encode_versioned(
            name,
            key_version,
            sample_message(key_spec.messages["message"], key_spec.messages["message"].fields, key_version, rng),
        )
        high = value_spec.versions.high if value_spec.versions.high is not None else value_spec.versions.low
        for version in range(value_spec.versions.low, high + 1):
            value = struct.pack(">h", version) + _sample_of(value_spec.name, version, rng)
            out.append(bytes([0, len(key)]) + key + value)
        out.append(bytes([1, len(key)]) + key)
    return out


def compression_seeds() -> list[bytes]:
    payload = rec.build_batch([rec.Record(value=b"x" * 40)])[rec.BATCH_HEADER_SIZE :] * 3
    return [bytes([codec]) + compression.compress(codec, payload) for codec in range(5)] + [
        b"\x0b" + b"\x04\x22\x4d\x18"
    ]


def framing_seeds() -> list[bytes]:
    frames = b"".join(struct.pack(">i", len(f)) + f for f in request_seeds()[:6])
    return [b"\x00\x10\x05" + frames, b"\x00\x01\x85" + frames + b"\x00\x01\x00\x00", b"\xff\xff\x3c" + frames[:50]]


def request_path_seeds() -> list[bytes]:
    """The registered requests, and a Produce of a valid batch to the fuzz topic at each version."""
    produce = []
    for version in range(3, 12):
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [{"name": FUZZ_TOPIC, "partition_data": [{"index": 0, "records": record_seeds()[0]}]}],
        }
        produce.append(encode_request(RequestHeader(0, version, 1, "c"), body)[4:])
    return produce + request_seeds()


def request_stream_seeds() -> list[bytes]:
    """Requests back to back, whole, cut short, and behind a large or negative size prefix."""
    frames = [struct.pack(">i", len(f)) + f for f in request_path_seeds()[:4]]
    stream = b"".join(frames)
    return [
        b"\xff" + stream,
        b"\x00" + stream[:-3],
        b"\x07" + frames[0] + struct.pack(">i", 200_000) + bytes(100),
        b"\x10" + frames[1] + struct.pack(">i", -1) + frames[2],
    ]


SEEDS: dict[str, Callable[[], list[bytes]]] = {
    "framing": framing_seeds,
    "requests": request_seeds,
    "records": record_seeds,
    "record_bodies": record_body_seeds,
    "consumer_protocol": consumer_protocol_seeds,
    "coordinator_records": coordinator_record_seeds,
    "compression": compression_seeds,
    "request_path": request_path_seeds,
    "request_stream": request_stream_seeds,
}


def write_seeds(corpus_root: Path) -> dict[str, int]:
    """Write every target's generated seeds to ``corpus_root/<target>/``, named by content."""
    counts = {}
    for name, make in SEEDS.items():
        directory = corpus_root / name
        directory.mkdir(parents=True, exist_ok=True)
        seeds = make()
        for data in seeds:
            (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)
        counts[name] = len(seeds)
    return counts


def read_corpus(directory: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()]
