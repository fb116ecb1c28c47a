"""The compiled record walk (_recordwalk.c) against its reference (record_walk.walk_py): the same
answer, field for field, for valid record bytes and for mutated ones, in every mode, with and
without more bytes to come, under any topic settings and clock."""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalike.protocol import record_walk
from kafkalike.protocol.records import Record, encode_record

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
REQUIRED = os.environ.get("KAFKALIKE_REQUIRE_NATIVE") == "1"


def _check_built(module: ModuleType, *, required: bool) -> None:
    # scripts/test requires the extension, so a CI machine without a compiler fails here instead
    # of testing the fallback only.
    if required:
        assert module.NATIVE, "kafkalike.protocol._recordwalk did not build (is a C compiler installed?)"
    assert (module.walk is module.walk_py) == (not module.NATIVE)


def test_the_compiled_walk_is_built_where_required() -> None:
    _check_built(record_walk, required=REQUIRED)


def test_without_the_extension_the_reference_walks_and_the_requirement_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control of the check above: record_walk loaded where the extension cannot be imported."""
    monkeypatch.setitem(sys.modules, "kafkalike.protocol._recordwalk", None)  # its import raises ImportError
    spec = importlib.util.spec_from_file_location("record_walk_without_extension", record_walk.__file__)
    assert spec is not None and spec.loader is not None
    fallback = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fallback)
    assert not fallback.NATIVE and fallback.walk is fallback.walk_py
    _check_built(fallback, required=False)
    with pytest.raises(AssertionError, match="did not build"):
        _check_built(fallback, required=True)


def _native() -> object:
    if not record_walk.NATIVE:
        if REQUIRED:
            pytest.fail("kafkalike.protocol._recordwalk did not build")
        pytest.skip("the compiled walk is not built here (KAFKALIKE_REQUIRE_NATIVE=1 makes this a failure)")
    return record_walk.walk


timestamps = st.one_of(st.integers(LONG_MIN, LONG_MAX), st.sampled_from([-1, 0, LONG_MAX, LONG_MIN]))
records = st.builds(
    Record,
    attributes=st.integers(0, 255),
    timestamp_delta=st.integers(LONG_MIN, LONG_MAX) | st.integers(-5, 5),
    offset_delta=st.integers(-(1 << 31), (1 << 31) - 1) | st.integers(0, 5),
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=40),
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3),
)
edits = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=4)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(records, max_size=8),
    edits=edits,
    cut=st.integers(0, 12),
    extra=st.binary(max_size=6),
    count_change=st.integers(-2, 2),
    mode=st.sampled_from([record_walk.MODE_BUFFER, record_walk.MODE_STREAM, record_walk.MODE_STREAM_PARTIAL]),
    final=st.booleans(),
    start=st.integers(0, 3),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    clock=st.tuples(timestamps, timestamps, timestamps, timestamps, timestamps),
)
def test_the_compiled_walk_answers_as_the_reference(
    batch: list[Record],
    edits: list[tuple[int, int]],
    cut: int,
    extra: bytes,
    count_change: int,
    mode: int,
    final: bool,
    start: int,
    flags: tuple[bool, bool, bool],
    clock: tuple[int, int, int, int, int],
) -> None:
    native = _native()
    data = bytearray(b"".join(encode_record(r) for r in batch)) + extra
    for where, byte in edits:
        if data:
            data[where % len(data)] = byte
    data = data[: max(len(data) - cut, 0)]
    count = max(len(batch) + count_change, 0)
    pos = min(start, len(data))
    args = (bytes(data), pos, count, mode, final, start, *flags, *clock)
    assert native(*args) == record_walk.walk_py(*args)  # type: ignore[operator]


def test_varint_limits_as_kafka_reads_them() -> None:
    """Kafka's ByteUtils: a 5-byte varint's high bits are dropped, a sixth byte is too long."""
    walks = [record_walk.walk_py] + ([record_walk.walk] if record_walk.NATIVE else [])
    body = b"\x00\x00\x00\x01\x01\x00"  # attributes, timestamp and offset deltas 0, null key and value, no headers
    five_bytes_length = b"\x8c\x80\x80\x80\x70" + body  # 12 with bits past 32 set: read as 6
    six_bytes_length = b"\x8c\x80\x80\x80\x80\x00" + body
    args = (0, 1, record_walk.MODE_BUFFER, True, 0, False, True, False, 0, -1, 0, LONG_MAX, LONG_MAX)
    for walk in walks:
        assert walk(five_bytes_length, *args)[:3] == (record_walk.STATUS_OK, len(five_bytes_length), 1)
        assert walk(six_bytes_length, *args)[0] == record_walk.STATUS_UNKNOWN


def test_the_comparison_catches_a_walk_that_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a reference that answers one rare fault (a record length varint too long)
    with the wrong status is caught."""
    _native()
    real = record_walk.walk_py

    def mistaken(*args: object) -> record_walk.WalkResult:
        result = real(*args)  # type: ignore[arg-type]
        return (record_walk.STATUS_INVALID, *result[1:]) if result[0] == record_walk.STATUS_UNKNOWN else result

    monkeypatch.setattr(record_walk, "walk_py", mistaken)
    with pytest.raises(AssertionError):
        test_the_compiled_walk_answers_as_the_reference()
