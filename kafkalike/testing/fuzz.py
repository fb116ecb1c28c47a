"""Fuzz targets for everything that parses bytes a client sends, and a small engine to run them.

Each target takes one input (bytes) and returns normally when the code under test kept its
invariant; anything it raises is a finding. The invariants:

- protocol layer (``framing``, ``requests``, ``records``, ``compression``): decode or raise
  ``ProtocolError``, nothing else. The frame splitter must also split exactly as a reference
  splitter of the same bytes does, and an accepted request must re-encode to a stable form.
- the request path (``request_path``): a frame sent to a running broker gets an answer or a
  closed connection within a bound, and the broker logs no error or traceback. Only requests
  that may wait by design (Fetch up to its max wait, JoinGroup and SyncGroup for the rest of
  their group) are let off the bound.

Two engines run the same targets: atheris (coverage-guided, ``scripts/fuzz.py``), and
``mutation_run`` here, a seeded, deterministic mutator of the seed corpus that the test suite
runs for a bounded number of inputs. Seeds live in ``tests/fuzz/corpus/<target>/``;
``write_seeds`` regenerates them from this project's own encoders.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import random
import socket
import struct
import time
import traceback
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import crc32c

from kafkalike.group import GroupConfig, GroupCoordinator, LogGroupStore, consumer_records
from kafkalike.group import records as group_records
from kafkalike.group.classic import subscription_topics
from kafkalike.log import LogConfig, MemoryLogDirectory, PartitionLog
from kafkalike.log.coordinator_log import RecordError, encode_versioned
from kafkalike.protocol import compression
from kafkalike.protocol import records as rec
from kafkalike.protocol.api import RequestHeader, decode_request, encode_request
from kafkalike.protocol.codec import schema
from kafkalike.protocol.errors import FrameError, ProtocolError
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.protocol.spec import FieldSpec, MessageSpec, api_specs, load_specs
from kafkalike.server.registry import load_handlers
from kafkalike.testing.broker import InProcessBroker
from kafkalike.txn import TransactionCoordinator, TxnConfig
from kafkalike.txn import records as txn_records
from kafkalike.txn.store import LogTxnStore

# Decompression is bounded far below the broker's default so that bombs cost milliseconds here.
MAX_UNCOMPRESSED_BYTES = 1024 * 1024
# Small enough that a frame header announcing the maximum allocates little per input.
FRAMING_MAX_FRAME_BYTES = 1024 * 1024


class Finding(AssertionError):
    """An input that broke a target's invariant (other than by raising an unexpected exception)."""


@dataclass(frozen=True)
class Target:
    name: str
    check: Callable[[bytes], None]
    max_len: int = 4096
    doc: str = ""


def _allowed(fn: Callable[..., object], *args: Any, **kwargs: Any) -> object:
    """``fn(*args)``, where a ProtocolError is an allowed outcome (returned as None)."""
    try:
        return fn(*args, **kwargs)
    except ProtocolError:
        return None


# -- framing ---------------------------------------------------------------------------------------


def _reference_frames(stream: bytes, max_frame_bytes: int) -> tuple[list[bytes], bool]:
    """The whole frames in ``stream``, and whether a size prefix after them is out of range."""
    frames: list[bytes] = []
    pos = 0
    while len(stream) - pos >= 4:
        (size,) = struct.unpack_from(">i", stream, pos)
        if size < 0 or size > max_frame_bytes:
            return frames, True
        if len(stream) - pos - 4 < size:
            break
        frames.append(stream[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return frames, False


def check_framing(data: bytes, splitter_type: type[FrameSplitter] = FrameSplitter) -> None:
    """Bytes 0-1 scale the frame limit, byte 2 the chunk sizes and whether large frames are received
    through ``receive_view``; the rest is the stream, fed in those chunks."""
    if len(data) < 3:
        return
    max_frame_bytes = int.from_bytes(data[0:2], "big") * (FRAMING_MAX_FRAME_BYTES >> 16)
    step, direct = 1 + data[2] % 61, bool(data[2] & 0x80)
    stream = data[3:]
    expected, bad_size = _reference_frames(stream, max_frame_bytes)
    splitter = splitter_type(max_frame_bytes)
    got: list[bytes] = []
    consumed = 0
    try:
        pos = 0
        while pos < len(stream):
            chunk = stream[pos : pos + step]
            view = splitter.receive_view() if direct else None
            if view is not None:
                n = min(len(view), len(chunk))
                view[:n] = chunk[:n]
                splitter.received(n)
                pos += n
            else:
                splitter.feed(chunk)
                pos += len(chunk)
            step = step % 61 + 1
            while (frame := splitter.next_frame()) is not None:
                got.append(frame)
                consumed += 4 + len(frame)
            if splitter.wanted() < 1:
                raise Finding(f"wanted() is {splitter.wanted()}")
            if splitter.buffered() != pos - consumed:
                raise Finding(f"buffered() is {splitter.buffered()}, {pos - consumed} bytes are unconsumed")
    except FrameError:
        if not bad_size:
            raise Finding("FrameError for a stream whose sizes are all in range") from None
        if got != expected:
            raise Finding(f"{len(got)} frames before the bad size, the reference splits {len(expected)}") from None
        return
    if bad_size:
        raise Finding("no FrameError for a size prefix out of range")
    if got != expected:
        raise Finding(f"split into {len(got)} frames, the reference into {len(expected)}")


# -- request decoders ------------------------------------------------------------------------------


def check_request(frame: bytes) -> None:
    """One request frame (without its size prefix): decoded or refused, and re-encoded stably."""
    try:
        header, body = decode_request(frame)
    except ProtocolError:
        return
    canonical = encode_request(header, body)
    again = encode_request(*decode_request(canonical[4:]))
    if again != canonical:
        raise Finding(f"API {header.api_key} v{header.api_version}: re-encoding is not stable")


# -- records ---------------------------------------------------------------------------------------


def check_record_blob(blob: bytes) -> None:
    """Every parser of a records field, on one blob: the one place to point at a new validator."""
    _allowed(rec.validate_produce_records, blob)
    for partial_ok in (False, True):
        with contextlib.suppress(ProtocolError):
            for pos, header in rec.iter_batches(blob, allow_legacy=True, partial_ok=partial_ok):
                _check_one_batch(blob, pos, header)
    _allowed(rec.decode_legacy_message_set, blob, partial_ok=True, max_uncompressed=MAX_UNCOMPRESSED_BYTES)
    _allowed(rec.convert_legacy_to_v2, blob, max_uncompressed=MAX_UNCOMPRESSED_BYTES)


def _check_one_batch(blob: bytes, pos: int, header: rec.RecordBatchHeader) -> None:
    for from_client in (True, False):
        _allowed(rec.validate_batch, blob, pos, header, from_client=from_client)
    if header.magic == rec.CURRENT_MAGIC:
        # Past a bad CRC too: mutated CRCs rarely match, and the record parser must hold anyway.
        records = _allowed(rec.decode_records, blob, pos, header, max_uncompressed=MAX_UNCOMPRESSED_BYTES)
        if isinstance(records, list):
            for record in records:
                if header.is_control:
                    _allowed(rec.control_record_type, record)
                    _allowed(rec.parse_end_txn_marker, record)


def check_records(data: bytes) -> None:
    check_record_blob(data)


def check_record_bodies(data: bytes) -> None:
    """The records inside a batch whose header and CRC are right, compressed as byte 0 says.

    Byte 0: codec (bits 0-2, so 5-7 are unknown codecs) and attributes bits 3-6 (timestamp type,
    transactional, control, delete horizon); byte 1: the record count; byte 2: the last offset
    delta; the rest: the record bytes, which the codec compresses before the header goes on."""
    if len(data) < 3:
        return
    codec = data[0] & 0x07
    body = data[3:]
    if codec in compression.CODEC_NAMES:
        body = compression.compress(codec, body)
    check_record_blob(framed_batch(data[0] & 0x7F, data[1], data[2], body))


def framed_batch(attributes: int, records_count: int, last_offset_delta: int, body: bytes) -> bytes:
    """A v2 batch header with a correct length and CRC around ``body``, whatever the fields say."""
    header = bytearray(rec.BATCH_HEADER_SIZE)
    struct.pack_into(
        ">qiibIhiqqqhii",
        header,
        0,
        0,
        rec.BATCH_HEADER_SIZE - rec.LOG_OVERHEAD + len(body),
        -1,
        rec.CURRENT_MAGIC,
        0,
        attributes,
        last_offset_delta,
        1_700_000_000_000,
        1_700_000_000_000,
        -1,
        -1,
        -1,
        records_count,
    )
    batch = header + body
    struct.pack_into(">I", batch, rec.CRC_OFFSET, crc32c.crc32c(memoryview(batch)[rec.CRC_START :]))
    return bytes(batch)


# -- what clients put in group requests and the coordinator topics --------------------------------

CONSUMER_PROTOCOL_SPECS = ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment")


def check_consumer_protocol(data: bytes) -> None:
    """JoinGroup and SyncGroup carry these as opaque bytes; the broker reads a subscription's topics.

    ``subscription_topics`` never raises; the decoders raise ProtocolError or nothing."""
    topics = subscription_topics(data)
    if topics is not None and not all(isinstance(t, str) for t in topics):
        raise Finding(f"subscription topics {topics!r}")
    for name in CONSUMER_PROTOCOL_SPECS:
        versions = load_specs()[name].versions
        for version in range(versions.low, (versions.high or versions.low) + 1):
            _allowed(schema(name, "message", version).decode, data[2:])


def check_coordinator_records(data: bytes) -> None:
    """A key and value in ``__consumer_offsets`` or ``__transaction_state``, which a producer can write.

    Byte 0 bit 0: a null value; byte 1: the key length; then the key, then the value. Every
    loader's decoder returns a record, None, or raises RecordError (logged and skipped)."""
    if len(data) < 2:
        return
    key = data[2 : 2 + data[1]]
    value = None if data[0] & 1 else data[2 + data[1] :]
    for decode in (group_records.decode_record, consumer_records.decode_record, txn_records.decode_record):
        with contextlib.suppress(RecordError):
            decode(key, value)
    # And loaded as a broker loads it at start-up, into coordinators that then take over.
    groups = GroupCoordinator(GroupConfig(offsets_topic_partitions=1), LogGroupStore(_memory_log), random.Random(0))
    groups.replay(key, value, _LOAD_MS)
    groups.on_loaded(_LOAD_MS)
    groups.poll(_LOAD_MS + 3_600_000)
    txns = TransactionCoordinator(
        TxnConfig(state_log_partitions=1), LogTxnStore(_memory_log), itertools.count().__next__
    )
    txns.replay(key, value)
    txns.on_loaded(_LOAD_MS)
    txns.poll(_LOAD_MS + 3_600_000)


_LOAD_MS = 1_700_000_000_000


def _memory_log(partition: int) -> tuple[PartitionLog, int]:
    return PartitionLog.open(MemoryLogDirectory(f"fuzz-{partition}"), LogConfig(), _LOAD_MS), 0


# -- compression -----------------------------------------------------------------------------------


def check_compression(data: bytes) -> None:
    """Byte 0 picks the codec (0-7) and the magic 0 LZ4 quirk; the rest is the stream.

    Decoding may fail only with ProtocolError, and what we compress decodes to the same bytes."""
    if not data:
        return
    codec, payload = data[0] & 0x07, data[1:]
    _allowed(
        compression.decompress,
        codec,
        payload,
        max_output=MAX_UNCOMPRESSED_BYTES,
        broken_lz4_checksum=bool(data[0] & 0x08),
    )
    if codec in compression.CODEC_NAMES:
        packed = compression.compress(codec, payload)
        if compression.decompress(codec, packed, max_output=MAX_UNCOMPRESSED_BYTES) != payload:
            raise Finding(f"codec {codec} does not round-trip {len(payload)} bytes")


# -- the request path through a running broker -----------------------------------------------------

SENTINEL_CORRELATION_ID = 0x5E471E1
API_VERSIONS_V0 = encode_request(RequestHeader(18, 0, SENTINEL_CORRELATION_ID, "fuzz-sentinel"), {})
FETCH_KEY, JOIN_GROUP_KEY, SYNC_GROUP_KEY = 1, 11, 14
# Requests that may hold their answer by design: Fetch up to max_wait_ms, group joins and syncs
# until the rest of the group arrives (up to a rebalance or session timeout).
WAITING_APIS = frozenset({FETCH_KEY, JOIN_GROUP_KEY, SYNC_GROUP_KEY})
FUZZ_TOPIC = "t"  # one of the names the seed requests use


class RequestPath:
    """One in-process broker for the whole run, and one connection to it, reopened when closed.

    Each input is sent as one frame (the size prefix added here), followed by an ApiVersions
    request: the broker answers in order, so its answer arriving means the fuzzed frame was
    handled (answered, or not when it should not be, as Produce with acks=0)."""

    def __init__(self, bound_s: float = 5.0) -> None:
        self.bound_s = bound_s
        self.broker: InProcessBroker | None = None
        self.sock: socket.socket | None = None
        self.inputs = 0

    def start(self) -> InProcessBroker:
        if self.broker is None:
            self.broker = InProcessBroker(seed_topics={FUZZ_TOPIC: 2}).start()
        return self.broker

    def stop(self) -> None:
        self._disconnect()
        if self.broker is not None:
            self.broker.stop()
            self.broker = None

    def _disconnect(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def check(self, data: bytes) -> None:
        broker = self.start()
        errors_before = len(broker.logged_errors)
        self.inputs += 1
        if self.sock is None:
            self.sock = socket.create_connection((broker.host, broker.port), timeout=self.bound_s)
        deadline = time.monotonic() + self.bound_s
        try:
            self.sock.sendall(struct.pack(">i", len(data)) + data + API_VERSIONS_V0)
            answers = self._read_answers(deadline)
        except TimeoutError:
            self._disconnect()
            if _api_key(data) not in WAITING_APIS:
                raise Finding(f"no answer and no close within {self.bound_s} s") from None
            return
        except OSError:  # reset by the broker: a close
            self._disconnect()
            answers = None
        if answers is None:
            self._disconnect()
        elif len(answers) == 2 and answers[0][:4] != data[4:8]:
            raise Finding(f"answer carries correlation id {answers[0][:4].hex()}, the request {data[4:8].hex()}")
        if data[4:8] == struct.pack(">i", SENTINEL_CORRELATION_ID):
            self._disconnect()  # its answer may have been taken for the sentinel's
        new_errors = broker.logged_errors[errors_before:]
        if new_errors:
            raise Finding("the broker logged:\n" + "\n".join(new_errors))
        if not broker.running:
            raise Finding("the broker stopped")

    def _read_answers(self, deadline: float) -> list[bytes] | None:
        """The answers up to the sentinel's, or None when the broker closed the connection first."""
        assert self.sock is not None
        splitter = FrameSplitter()
        answers: list[bytes] = []
        while True:
            while (frame := splitter.next_frame()) is not None:
                answers.append(frame)
                if frame[:4] == struct.pack(">i", SENTINEL_CORRELATION_ID) and len(frame) > 6:
                    if len(answers) > 2:
                        raise Finding(f"{len(answers)} answers to 2 requests")
                    return answers
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
            data = self.sock.recv(1 << 16)
            if not data:
                return None
            splitter.feed(data)


def _api_key(frame: bytes) -> int | None:
    return struct.unpack_from(">h", frame)[0] if len(frame) >= 2 else None


_REQUEST_PATH = RequestPath()


def check_request_path(data: bytes) -> None:
    _REQUEST_PATH.check(data)


def stop_request_path() -> None:
    """Stop the broker ``check_request_path`` started, if it did."""
    _REQUEST_PATH.stop()


# -- the negative control --------------------------------------------------------------------------

BROKEN_PATTERN = b"\x7f\xff"


def check_broken_decoder(frame: bytes) -> None:
    """A decoder with a planted bug: a frame whose API key bytes are 7f ff raises KeyError."""
    if frame[:2] == BROKEN_PATTERN:
        raise KeyError("planted bug")
    check_request(frame)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("framing", check_framing, 4096, "FrameSplitter against a reference split"),
        Target("requests", check_request, 4096, "decode_request for every registered API and version"),
        Target("records", check_records, 8192, "batches, records, legacy message sets, control records"),
        Target("record_bodies", check_record_bodies, 8192, "records behind a right header and CRC, every codec"),
        Target("consumer_protocol", check_consumer_protocol, 2048, "subscriptions and assignments in group requests"),
        Target("coordinator_records", check_coordinator_records, 2048, "group and transaction records as loaded"),
        Target("compression", check_compression, 4096, "every codec's decoder, and round trips"),
        Target("request_path", check_request_path, 4096, "frames into a running broker over loopback"),
    )
}
# Not run by default: it exists to show that a run catches what it should.
NEGATIVE_CONTROL = Target("broken_decoder", check_broken_decoder, 4096, "a decoder with a planted KeyError")


def target(name: str) -> Target:
    if name == NEGATIVE_CONTROL.name:
        return NEGATIVE_CONTROL
    return TARGETS[name]


# -- seeds -----------------------------------------------------------------------------------------

SEED_DIR_FOR = {"broken_decoder": "requests"}
_INT_WIDTHS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16, "uint32": 32}
_NAMES = [FUZZ_TOPIC, "topic-é", "g", ""]


def sample_message(message: MessageSpec, fields: tuple[FieldSpec, ...], version: int, rng: random.Random) -> Any:
    """A valid value for ``message`` at ``version``, nulls sprinkled in."""
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


SEEDS: dict[str, Callable[[], list[bytes]]] = {
    "framing": framing_seeds,
    "requests": request_seeds,
    "records": record_seeds,
    "record_bodies": record_body_seeds,
    "consumer_protocol": consumer_protocol_seeds,
    "coordinator_records": coordinator_record_seeds,
    "compression": compression_seeds,
    "request_path": request_path_seeds,
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


# -- the mutation engine ---------------------------------------------------------------------------

_BOUNDARY = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\xff\xff", b"\x7f\xff\xff\xff", b"\x80" * 6, b"\x80\x00\x00\x00"]


def mutate(data: bytes, rng: random.Random, others: list[bytes], max_len: int) -> bytes:
    """``data`` with 1-4 random edits: bit flips, bytes set, boundary values, inserts, deletes,
    truncation, or a splice with another input."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(0, len(out))
        op = rng.randrange(7)
        if op == 0 and pos < len(out):
            out[pos] ^= 1 << rng.randrange(8)
        elif op == 1 and pos < len(out):
            out[pos] = rng.randrange(256)
        elif op == 2:
            value = rng.choice(_BOUNDARY)
            out[pos : pos + len(value)] = value
        elif op == 3:
            out[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op == 4:
            del out[pos : pos + rng.randint(1, 8)]
        elif op == 5 and rng.random() < 0.3:
            del out[pos:]
        elif op == 6 and others:
            other = rng.choice(others)
            cut = rng.randint(0, len(other))
            out[pos:] = other[cut:]
    return bytes(out[:max_len])


@dataclass(frozen=True)
class Crash:
    target: str
    data: bytes
    error: str

    @property
    def digest(self) -> str:
        return hashlib.sha1(self.data).hexdigest()


@dataclass
class RunStats:
    executions: int = 0
    seconds: float = 0.0
    crashes: list[Crash] | None = None

    @property
    def per_second(self) -> float:
        return self.executions / self.seconds if self.seconds else 0.0


def run_one(t: Target, data: bytes) -> Crash | None:
    """The target on one input: None when its invariant held."""
    try:
        t.check(data)
    except Exception:
        return Crash(t.name, data, traceback.format_exc())
    return None


def mutation_run(
    t: Target, seeds: Iterable[bytes], *, inputs: int, rng_seed: int = 0, max_crashes: int = 5
) -> RunStats:
    """The seeds, then ``inputs`` mutations of the seeds and of what came before; deterministic per ``rng_seed``."""
    rng = random.Random(rng_seed)
    pool = list(seeds)
    stats = RunStats(crashes=[])
    assert stats.crashes is not None
    start = time.perf_counter()
    for data in _inputs(pool, rng, inputs, t.max_len):
        stats.executions += 1
        crash = run_one(t, data)
        if crash is not None:
            stats.crashes.append(crash)
            if len(stats.crashes) >= max_crashes:
                break
    stats.seconds = time.perf_counter() - start
    return stats


def _inputs(pool: list[bytes], rng: random.Random, count: int, max_len: int) -> Iterator[bytes]:
    yield from pool
    for _ in range(count):
        data = mutate(rng.choice(pool), rng, pool, max_len)
        if len(pool) < 10_000 and rng.random() < 0.1:
            pool.append(data)  # mutations of mutations reach further than mutations of seeds
        yield data


def save_crash(crash: Crash, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{crash.target}-{crash.digest}"
    path.write_bytes(crash.data)
    return path


def replay_command(target_name: str, path: Path) -> str:
    return f"scripts/fuzz.py --target {target_name} --replay {path}"
