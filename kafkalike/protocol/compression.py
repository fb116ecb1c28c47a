"""Record batch compression codecs, as Kafka clients and brokers use them.

Codec ids are the low three bits of a batch's attributes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
Every decompressor is bounded by ``max_output`` so a tiny batch cannot expand into gigabytes, and
every failure (bad stream, truncated stream, too much output) surfaces as ``CorruptRecordError``.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Final

import cramjam
import lz4.frame
import zstandard

from kafkalike.protocol.errors import CorruptRecordError, InvalidRecordError

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
CODEC_NAMES: Final = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# Far above any sane batch (Kafka's default max.message.bytes is 1 MiB compressed), far below harm.
DEFAULT_MAX_OUTPUT: Final = 128 * 1024 * 1024

Buffer = bytes | bytearray | memoryview

# snappy-java's stream header ("xerial" framing): magic, then version and minimum compatible version.
XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")
_XERIAL_BLOCK: Final = 32 * 1024  # snappy-java's default, so our output chunks like the Java client's
_INT32: Final = struct.Struct(">i")

_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
# Output is pulled from the lz4 and zstd decoders in slices this big, checking the budget in between.
_SLICE: Final = 1024 * 1024
# zstd input the block headers do not account for is fed in slices this small: one slice can
# expand at most ~44000x (RLE blocks), which bounds the overshoot past max_output to a few tens of MiB.
_ZSTD_INPUT_SLICE: Final = 1024


def compress(codec: int, data: Buffer, *, level: int | None = None) -> bytes:
    """``data`` compressed the way Kafka's Java client does it for ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.compress(data, compresslevel=6 if level is None else level, mtime=0)
    if codec == SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == LZ4:
        # Java's reader (Lz4BlockInputStream) only takes independent blocks of at most 64 KiB.
        frame: bytes = lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return frame
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    raise _unknown_codec(codec)


def decompress(
    codec: int,
    data: Buffer,
    *,
    max_output: int = DEFAULT_MAX_OUTPUT,
    broken_lz4_checksum: bool = False,
) -> bytes:
    """``data`` decompressed; raises ``CorruptRecordError`` on bad or truncated input or past ``max_output`` bytes.

    ``broken_lz4_checksum`` accepts the wrong LZ4 header checksum that magic 0 messages carry (KAFKA-3160).
    """
    decoder = _DECODERS.get(codec)
    if decoder is None:
        raise _unknown_codec(codec)
    if codec == LZ4 and broken_lz4_checksum:
        data = _fix_lz4_header_checksum(bytes(data))
    return b"".join(decoder(data, max_output, _SLICE))


def decompress_stream(
    codec: int, data: Buffer, *, max_output: int = DEFAULT_MAX_OUTPUT, chunk_bytes: int = _SLICE
) -> Iterator[bytes]:
    """``data`` decompressed in pieces of about ``chunk_bytes`` (never empty), so a reader can stop
    early without inflating the rest. Raises ``CorruptRecordError`` as ``decompress`` does, at the
    point of the stream where the fault is (a truncated stream after everything before the cut)."""
    decoder = _DECODERS.get(codec)
    if decoder is None:
        raise _unknown_codec(codec)
    return decoder(data, max_output, chunk_bytes)


def _unknown_codec(codec: int) -> InvalidRecordError:
    return InvalidRecordError(f"unknown compression codec {codec}")


def _too_big(max_output: int) -> CorruptRecordError:
    return CorruptRecordError(f"record batch decompresses to more than {max_output} bytes")


def _none_decode(data: Buffer, max_output: int, chunk_bytes: int) -> Iterator[bytes]:
    if len(data) > max_output:
        raise _too_big(max_output)
    if data:
        yield bytes(data)


def _gzip_decode(data: Buffer, max_output: int, chunk_bytes: int) -> Iterator[bytes]:
    total = 0
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        feed = rest
        while not d.eof:
            try:
                chunk = d.decompress(feed, min(chunk_bytes, max_output - total + 1))
            except zlib.error as e:
                raise CorruptRecordError(f"bad gzip data: {e}") from None
            feed = d.unconsumed_tail
            total += len(chunk)
            if total > max_output:
                raise _too_big(max_output)
            if chunk:
                yield chunk
            elif not feed and not d.eof:
                raise CorruptRecordError("gzip data is truncated")
        rest = d.unused_data
        # Like Java's GZIPInputStream: read on into a following member, ignore anything else.
        if not rest.startswith(b"\x1f\x8b"):
            return


def _snappy_xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decode(data: Buffer, max_output: int, chunk_bytes: int) -> Iterator[bytes]:
    raw = bytes(data)
    # snappy-java reads a stream without its header as one raw block, and librdkafka sends exactly that.
    if not raw.startswith(XERIAL_MAGIC):
        yield _snappy_raw_block(raw, max_output)
        return
    if len(raw) < _XERIAL_HEADER.size:
        raise CorruptRecordError("snappy stream header is truncated")
    total = 0
    pos = _XERIAL_HEADER.size
    while pos < len(raw):
        if len(raw) - pos < 4:
            raise CorruptRecordError("snappy chunk length is truncated")
        (size,) = _INT32.unpack_from(raw, pos)
        pos += 4
        if size < 0 or size > len(raw) - pos:
            raise CorruptRecordError(f"snappy chunk length {size} runs past the data")
        block = _snappy_raw_block(raw[pos : pos + size], max_output - total)
        pos += size
        total += len(block)
        if block:
            yield block


def _snappy_raw_block(block: bytes, max_output: int) -> bytes:
    # A raw block starts with its decoded length; check it before anything allocates that much.
    try:
        length = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"bad snappy data: {e}") from None
    if length > max_output:
        raise _too_big(max_output)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"bad snappy data: {e}") from None


def _lz4_decode(data: Buffer, max_output: int, chunk_bytes: int) -> Iterator[bytes]:
    # One frame, as Kafka's KafkaLZ4BlockInputStream reads it: bytes after its end mark are ignored.
    total = 0
    d = lz4.frame.LZ4FrameDecompressor()
    feed: bytes = bytes(data)
    while not d.eof:
        try:
            chunk = d.decompress(feed, max_length=min(chunk_bytes, max_output - total + 1))
        except RuntimeError as e:
            raise CorruptRecordError(f"bad lz4 data: {e}") from None
        feed = b""
        total += len(chunk)
        if total > max_output:
            raise _too_big(max_output)
        if chunk:
            yield chunk
        if not d.eof and d.needs_input:
            raise CorruptRecordError("lz4 data is truncated")


def _fix_lz4_header_checksum(data: bytes) -> bytes:
    """The frame with its header checksum recomputed the standard way (magic 0 hashed the magic number too)."""
    if len(data) < 7 or not data.startswith(_LZ4_MAGIC):
        return data  # the decoder reports it
    end = 6 + (8 if data[4] & 0x08 else 0) + (4 if data[4] & 0x01 else 0)
    if len(data) <= end:
        return data
    checksum = (_xxh32(data[4:end]) >> 8) & 0xFF
    return data[:end] + bytes([checksum]) + data[end + 1 :]


_P1: Final = 2654435761
_P2: Final = 2246822519
_P3: Final = 3266489917
_P4: Final = 668265263
_P5: Final = 374761393
_M32: Final = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32(data: bytes) -> int:
    """XXH32 with seed 0 for inputs under 16 bytes: all an LZ4 frame descriptor needs, and no library exposes it."""
    if len(data) >= 16:
        raise ValueError("only short inputs are supported")
    h = (_P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        h = (h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32
        h = (_rotl32(h, 17) * _P4) & _M32
        pos += 4
    for b in data[pos:]:
        h = (h + b * _P5) & _M32
        h = (_rotl32(h, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def _zstd_decode(data: Buffer, max_output: int, chunk_bytes: int) -> Iterator[bytes]:
    try:
        dctx = _ZSTD_CONTEXTS.pop()
    except IndexError:
        dctx = zstandard.ZstdDecompressor()
    total = 0
    pending: list[bytes] = []
    pending_bytes = 0
    rest = memoryview(bytes(data))
    budget = min(chunk_bytes, _SLICE)
    # One decompression object per frame: it reports a frame that ended early, and frames without a
    # content size (librdkafka's streaming output) decode the same way.
    while rest:
        d = dctx.decompressobj()
        pos = 0
        try:
            for end in _zstd_feeds(rest, budget):
                if d.eof:
                    break
                chunk = d.decompress(rest[pos:end])
                pos = end
                total += len(chunk)
                if total > max_output:
                    raise _too_big(max_output)
                if chunk:
                    pending.append(chunk)
                    pending_bytes += len(chunk)
                if pending_bytes >= chunk_bytes:
                    yield b"".join(pending)
                    pending, pending_bytes = [], 0
        except zstandard.ZstdError as e:
            raise CorruptRecordError(f"bad zstd data: {e}") from None
        if not d.eof:
            if pending:  # what decoded before the cut, as a stream reader would hand it out
                yield b"".join(pending)
            raise CorruptRecordError("zstd data is truncated")
        unused = d.unused_data
        rest = memoryview(unused) if pos >= len(rest) else memoryview(unused + bytes(rest[pos:]))
    if pending:
        yield b"".join(pending)
    # Only a context that finished cleanly is reused (a new decompressobj resets it anyway).
    _ZSTD_CONTEXTS.append(dctx)


def _zstd_feeds(frame: memoryview, budget: int) -> Iterator[int]:
    """Where the successive input slices of the zstd frame at the start of ``frame`` end.

    Whole blocks, as many at once as can inflate to ``budget`` bytes together: a block header
    says how much its block can give (raw and RLE blocks their size, a compressed block at most
    128 KiB), so even a frame of RLE blocks stays bounded, and a usual batch is one slice. What
    the headers cannot vouch for (a cut block, an unknown frame or block type) goes in slices
    of ``_ZSTD_INPUT_SLICE``, to the end of the data."""
    end = len(frame)
    pos, checksum_bytes = _zstd_first_block(frame)
    fed = 0
    if pos:
        room = budget
        while pos + 3 <= end:
            header = frame[pos] | frame[pos + 1] << 8 | frame[pos + 2] << 16
            kind = header >> 1 & 3
            size = header >> 3
            if kind == _ZSTD_RESERVED_BLOCK:
                break
            after = pos + 3 + (1 if kind == _ZSTD_RLE_BLOCK else size)
            if after > end:
                break
            grows = _ZSTD_BLOCK_MAX if kind == _ZSTD_COMPRESSED_BLOCK else size
            if grows > room and pos > fed:
                yield pos
                fed, room = pos, budget
            room -= grows
            pos = after
            if header & 1:  # the last block, then the frame's checksum
                pos = min(pos + checksum_bytes, end)
                break
        if pos > fed:
            yield pos
            fed = pos
    for cut in range(fed + _ZSTD_INPUT_SLICE, end + _ZSTD_INPUT_SLICE, _ZSTD_INPUT_SLICE):
        yield min(cut, end)


def _zstd_first_block(frame: memoryview) -> tuple[int, int]:
    """(where the first block starts, bytes of checksum after the last), or (0, 0) when ``frame``
    does not start with a zstd frame header this reads (a skippable frame, reserved bits)."""
    if len(frame) < 6 or frame[:4].tobytes() != _ZSTD_MAGIC:
        return 0, 0
    descriptor = frame[4]
    if descriptor & 0x08:
        return 0, 0
    single_segment = bool(descriptor & 0x20)
    content_size_bytes = ((1 if single_segment else 0), 2, 4, 8)[descriptor >> 6]
    dictionary_id_bytes = (0, 1, 2, 4)[descriptor & 3]
    window_bytes = 0 if single_segment else 1
    return 5 + window_bytes + dictionary_id_bytes + content_size_bytes, 4 if descriptor & 0x04 else 0


# Decompression contexts to reuse (making one costs about as much as decoding a small batch); a
# decode takes one for itself, so interleaved streams and threads never share one.
_ZSTD_CONTEXTS: list[zstandard.ZstdDecompressor] = []
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_ZSTD_RLE_BLOCK: Final = 1
_ZSTD_COMPRESSED_BLOCK: Final = 2
_ZSTD_RESERVED_BLOCK: Final = 3
_ZSTD_BLOCK_MAX: Final = 128 * 1024  # the format's largest block, decoded


_DECODERS: Final[dict[int, Callable[[Buffer, int, int], Iterator[bytes]]]] = {
    NONE: _none_decode,
    GZIP: _gzip_decode,
    SNAPPY: _snappy_decode,
    LZ4: _lz4_decode,
    ZSTD: _zstd_decode,
}

__all__ = [
    "CODEC_NAMES",
    "DEFAULT_MAX_OUTPUT",
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "XERIAL_MAGIC",
    "ZSTD",
    "compress",
    "decompress",
    "decompress_stream",
]
