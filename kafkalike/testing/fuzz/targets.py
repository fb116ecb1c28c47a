"""The fuzz targets that need no broker: the protocol layer's decoders and the coordinator records.

Each decodes or raises ``ProtocolError`` (``RecordError`` for coordinator records), nothing else.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import crc32c

from kafkalike.group import GroupConfig, GroupCoordinator, LogGroupStore, consumer_records
from kafkalike.group import records as group_records
from kafkalike.group.classic import subscription_topics
from kafkalike.log import LogConfig, MemoryLogDirectory, PartitionLog
from kafkalike.log.coordinator_log import RecordError
from kafkalike.protocol import compression, validation
from kafkalike.protocol import records as rec
from kafkalike.protocol.api import decode_request, encode_request
from kafkalike.protocol.codec import schema
from kafkalike.protocol.errors import FrameError, ProtocolError
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.protocol.spec import load_specs
from kafkalike.txn import TransactionCoordinator, TxnConfig
from kafkalike.txn import records as txn_records
from kafkalike.txn.store import LogTxnStore

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


def reference_frames(stream: bytes, max_frame_bytes: int) -> tuple[list[bytes], bool]:
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
    expected, bad_size = reference_frames(stream, max_frame_bytes)
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
    for partial_ok in (False, True):
        with contextlib.suppress(ProtocolError):
            for pos, header in rec.iter_batches(blob, allow_legacy=True, partial_ok=partial_ok):
                _check_one_batch(blob, pos, header)
    _allowed(rec.decode_legacy_message_set, blob, partial_ok=True, max_uncompressed=MAX_UNCOMPRESSED_BYTES)
    _allowed(rec.convert_legacy_to_v2, blob, max_uncompressed=MAX_UNCOMPRESSED_BYTES)
    check_produce_validation(blob)


# Topic settings the produce validator is fuzzed under: the default, and the ones that take
# other paths (compacted keys, LogAppendTime, a recompressing topic, a narrow timestamp window).
_VALIDATION_SETTINGS = (
    validation.TopicSettings(max_uncompressed_bytes=MAX_UNCOMPRESSED_BYTES),
    validation.TopicSettings(
        compacted=True, log_append_time=True, compression_type="lz4", max_uncompressed_bytes=MAX_UNCOMPRESSED_BYTES
    ),
    validation.TopicSettings(
        timestamp_before_max_ms=1000, timestamp_after_max_ms=1000, max_uncompressed_bytes=MAX_UNCOMPRESSED_BYTES
    ),
)


def check_produce_validation(blob: bytes) -> None:
    """The produce path's record validator: a valid batch or RecordsRefused, nothing else."""
    for api_version in (3, 8, 12):
        if validation.request_fault(blob, api_version=api_version, topic_exists=True) is not None:
            continue
        for settings in _VALIDATION_SETTINGS:
            with contextlib.suppress(validation.RecordsRefused):
                validation.validate_produce_records(
                    bytearray(blob), settings, now_ms=1_700_000_000_000, api_version=api_version, topic_partition="t-0"
                )


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


# -- the negative control --------------------------------------------------------------------------

BROKEN_PATTERN = b"\x7f\xff"


def check_broken_decoder(frame: bytes) -> None:
    """A decoder with a planted bug: a frame whose API key bytes are 7f ff raises KeyError."""
    if frame[:2] == BROKEN_PATTERN:
        raise KeyError("planted bug")
    check_request(frame)
