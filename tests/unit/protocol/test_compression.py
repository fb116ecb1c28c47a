"""Compression codecs: round trips, the framings real clients send, and the bounds on bad input."""

from __future__ import annotations

import gzip
import os
import struct
import tracemalloc
import types
from collections.abc import Iterator

import cramjam
import kafka.codec
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalike.protocol import compression
from kafkalike.protocol.compression import GZIP, LZ4, NONE, SNAPPY, XERIAL_MAGIC, ZSTD, compress, decompress
from kafkalike.protocol.errors import CorruptRecordError, InvalidRecordError

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
# Compressible but not trivial: text-like runs with some noise.
SAMPLE = b"".join(b"record %d says %s\n" % (i, os.urandom(4).hex().encode()) for i in range(5000))


@pytest.fixture
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """kafka-python's snappy code wants python-snappy for the raw blocks; cramjam's raw codec is the same format."""
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)
    yield


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_each_codec(codec: int) -> None:
    assert decompress(codec, compress(codec, SAMPLE)) == SAMPLE
    assert decompress(codec, compress(codec, b"")) == b""


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=70_000))
def test_round_trip_any_bytes(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_accepts_memoryview_and_bytearray(codec: int) -> None:
    blob = compress(codec, memoryview(SAMPLE))
    assert decompress(codec, bytearray(blob)) == SAMPLE
    assert decompress(codec, memoryview(blob)) == SAMPLE


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(InvalidRecordError):
        decompress(codec, b"x")
    with pytest.raises(InvalidRecordError):
        compress(codec, b"x")


# -- snappy ---------------------------------------------------------------------------------------


def test_snappy_output_is_xerial_framed_like_the_java_client() -> None:
    blob = compress(SNAPPY, SAMPLE)
    magic, version, compat = struct.unpack_from(">8sii", blob)
    assert (magic, version, compat) == (XERIAL_MAGIC, 1, 1)
    # 32 KiB input chunks, each behind a big-endian length.
    pos, chunks = 16, []
    while pos < len(blob):
        (size,) = struct.unpack_from(">i", blob, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(blob[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert [len(c) for c in chunks[:-1]] == [32 * 1024] * (len(chunks) - 1)
    assert b"".join(chunks) == SAMPLE


def test_snappy_reads_raw_blocks_as_librdkafka_sends_them() -> None:
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(SAMPLE))) == SAMPLE


def test_snappy_matches_kafka_python_both_ways(kafka_python_snappy: None) -> None:
    assert decompress(SNAPPY, kafka.codec.snappy_encode(SAMPLE)) == SAMPLE
    assert kafka.codec.snappy_encode(SAMPLE) == compress(SNAPPY, SAMPLE)
    assert kafka.codec.snappy_decode(compress(SNAPPY, SAMPLE)) == SAMPLE


def test_snappy_raw_length_is_checked_before_allocating() -> None:
    # The preamble claims 4 GiB; nothing may try to allocate that.
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\x00" * 10, max_output=1 << 20)


def test_snappy_xerial_chunk_length_past_the_end() -> None:
    blob = struct.pack(">8sii", XERIAL_MAGIC, 1, 1) + struct.pack(">i", 1 << 30) + b"abc"
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, blob)
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, struct.pack(">8sii", XERIAL_MAGIC, 1, 1) + b"\x00\x00")


# -- lz4 ------------------------------------------------------------------------------------------


def test_lz4_output_suits_javas_reader() -> None:
    blob = compress(LZ4, SAMPLE)
    flg, bd = blob[4], blob[5]
    assert flg & 0x20, "independent blocks: Java's Lz4BlockInputStream rejects linked ones"
    assert not flg & 0x08, "no content size, like the Java client"
    assert (bd >> 4) & 0x7 == 4, "64 KiB blocks"
    assert lz4.frame.decompress(blob) == SAMPLE


def test_lz4_reads_linked_blocks_and_content_size_too() -> None:
    blob = lz4.frame.compress(SAMPLE, block_linked=True, store_size=True, content_checksum=True)
    assert decompress(LZ4, blob) == SAMPLE


def test_lz4_header_checksum_matches_lz4_library() -> None:
    for kwargs in ({"store_size": False}, {"store_size": True}, {"content_checksum": True}):
        frame = lz4.frame.compress(b"abc" * 50, **kwargs)
        end = 6 + (8 if frame[4] & 0x08 else 0)
        assert frame[end] == (compression._xxh32(frame[4:end]) >> 8) & 0xFF


def _with_broken_checksum(frame: bytes) -> bytes:
    """The frame as a magic 0 producer wrote it: the header checksum also hashed the 4 magic bytes (KAFKA-3160)."""
    end = 6 + (8 if frame[4] & 0x08 else 0)
    broken = (compression._xxh32(frame[:end]) >> 8) & 0xFF
    assert broken != frame[end]
    return frame[:end] + bytes([broken]) + frame[end + 1 :]


def test_lz4_broken_header_checksum_of_magic_0() -> None:
    blob = _with_broken_checksum(compress(LZ4, SAMPLE))
    with pytest.raises(CorruptRecordError):
        decompress(LZ4, blob)
    assert decompress(LZ4, blob, broken_lz4_checksum=True) == SAMPLE
    # A correct checksum still reads with the flag on.
    assert decompress(LZ4, compress(LZ4, SAMPLE), broken_lz4_checksum=True) == SAMPLE


# -- zstd and gzip --------------------------------------------------------------------------------


def test_zstd_frames_without_content_size() -> None:
    # librdkafka and zstd-jni stream their output, so the frame header has no content size.
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    blob = cobj.compress(SAMPLE) + cobj.flush()
    assert zstandard.get_frame_parameters(blob).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(ZSTD, blob) == SAMPLE


def test_zstd_and_gzip_read_concatenated_frames() -> None:
    assert decompress(ZSTD, compress(ZSTD, b"one ") + compress(ZSTD, b"two")) == b"one two"
    assert decompress(GZIP, gzip.compress(b"one ") + gzip.compress(b"two")) == b"one two"
    # Kafka's Lz4BlockInputStream stops at the first frame's end mark and ignores what follows.
    assert decompress(LZ4, compress(LZ4, b"one ") + compress(LZ4, b"two")) == b"one "


def test_gzip_matches_kafka_python() -> None:
    assert decompress(GZIP, kafka.codec.gzip_encode(SAMPLE)) == SAMPLE
    assert kafka.codec.gzip_decode(compress(GZIP, SAMPLE)) == SAMPLE
    assert decompress(LZ4, kafka.codec.lz4_encode(SAMPLE)) == SAMPLE
    assert kafka.codec.lz4_decode(compress(LZ4, SAMPLE)) == SAMPLE
    assert decompress(ZSTD, kafka.codec.zstd_encode(SAMPLE)) == SAMPLE
    assert kafka.codec.zstd_decode(compress(ZSTD, SAMPLE)) == SAMPLE


def _rle_frame(blocks: int, *, checksum: bool = False) -> bytes:
    """A zstd frame of ``blocks`` RLE blocks of 128 KiB of zeros each (4 bytes per block), made by hand."""
    descriptor = 0x04 if checksum else 0x00  # no content size, a window descriptor
    header = b"\x28\xb5\x2f\xfd" + bytes([descriptor, 0x58])  # window 2 MiB
    block = (128 * 1024) << 3 | 1 << 1  # RLE
    body = b"".join((block | (i == blocks - 1)).to_bytes(3, "little") + b"\x00" for i in range(blocks))
    digest = (zstandard.ZstdCompressor(write_checksum=True).compress(bytes(blocks * 128 * 1024)))[-4:]
    return header + body + (digest if checksum else b"")


def test_zstd_frames_fed_by_blocks_decode_as_the_library_does() -> None:
    # Several blocks of each kind, a checksum, and two frames back to back.
    noisy = os.urandom(300_000)  # raw blocks
    blob = (
        zstandard.ZstdCompressor(write_checksum=True).compress(SAMPLE * 3)
        + zstandard.ZstdCompressor(level=1).compress(noisy)
        + _rle_frame(5, checksum=True)
    )
    assert decompress(ZSTD, blob) == SAMPLE * 3 + noisy + bytes(5 * 128 * 1024)
    for chunk_bytes in (1, 100_000, 1 << 20):
        pieces = list(compression.decompress_stream(ZSTD, blob, chunk_bytes=chunk_bytes))
        assert b"".join(pieces) == SAMPLE * 3 + noisy + bytes(5 * 128 * 1024)


def test_zstd_refuses_a_frame_cut_at_any_block_boundary() -> None:
    blob = _rle_frame(8, checksum=True)
    assert decompress(ZSTD, blob) == bytes(8 * 128 * 1024)
    for cut in range(6, len(blob), 4):  # after the header, after each block, inside the checksum
        with pytest.raises(CorruptRecordError, match="truncated"):
            decompress(ZSTD, blob[:cut])
    with pytest.raises(CorruptRecordError, match="truncated"):
        decompress(ZSTD, blob[:-1])


def test_zstd_inflates_little_past_the_bound_even_from_rle_blocks() -> None:
    # 1 GiB from 32 KiB: 1 KiB of it alone holds 32 MiB. Memory at its peak shows what was inflated.
    bomb = _rle_frame(8192)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="more than"):
            decompress(ZSTD, bomb, max_output=8 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12 << 20
    # Negative control: the same frame under a bound it fits in comes out whole.
    assert len(decompress(ZSTD, _rle_frame(64), max_output=8 << 20)) == 8 << 20


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_truncated_streams_are_corrupt(codec: int) -> None:
    blob = compress(codec, SAMPLE)
    for cut in (1, 5, len(blob) // 2, len(blob) - 1):
        with pytest.raises(CorruptRecordError):
            decompress(codec, blob[:cut])


@pytest.mark.parametrize("codec", CODECS)
def test_output_is_bounded(codec: int) -> None:
    bomb = compress(codec, bytes(8 << 20))
    assert len(bomb) < (8 << 20) or codec == NONE
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(codec, bomb, max_output=1 << 20)
    assert len(decompress(codec, bomb, max_output=8 << 20)) == 8 << 20


def test_snappy_bound_spans_xerial_chunks() -> None:
    blob = compress(SNAPPY, bytes(100_000))
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, blob, max_output=99_999)
    assert decompress(SNAPPY, blob, max_output=100_000) == bytes(100_000)


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from([GZIP, SNAPPY, LZ4, ZSTD]), junk=st.binary(max_size=300), cut=st.integers(0, 40))
def test_garbage_only_ever_raises_corrupt_record(codec: int, junk: bytes, cut: int) -> None:
    # Both pure junk and a valid stream's prefix followed by junk.
    for blob in (junk, compress(codec, SAMPLE[:2000])[:cut] + junk):
        try:
            out = decompress(codec, blob, max_output=1 << 20)
        except CorruptRecordError:
            continue
        assert len(out) <= 1 << 20
