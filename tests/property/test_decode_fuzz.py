"""Whatever bytes arrive, decoding either succeeds or raises a ProtocolError: nothing else escapes.

The inputs are random bytes, random bodies behind a valid header, and valid frames of every
request (and response) version with bytes flipped, inserted, deleted or overwritten with
boundary values (0x00, 0x7f, 0x80, 0xff runs that make lengths negative, huge or endless).
The valid frames come from the fuzz seeds' sampler (``kafkalike.testing.fuzz.seeds.sample_message``).
Accepted requests must re-encode to a stable canonical form.

``KAFKALIKE_HYPOTHESIS_PROFILE=thorough`` runs 20,000 examples per test.
"""

from __future__ import annotations

import contextlib
import os
import random
import struct
from functools import cache

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkalike.protocol.api import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.spec import api_specs
from kafkalike.testing.fuzz.seeds import sample_message

settings.register_profile("fuzz-fast", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz-thorough", settings.get_profile("fuzz-fast"), max_examples=20_000)
PROFILE = settings.get_profile("fuzz-" + os.environ.get("KAFKALIKE_HYPOTHESIS_PROFILE", "fast"))


@cache
def request_corpus() -> list[bytes]:
    rng = random.Random(20240501)
    frames = []
    for spec in api_specs().values():
        message = spec.request
        for version in range(spec.versions.low, (spec.versions.high or 0) + 1):
            body = sample_message(message, message.fields, version, rng)
            header = RequestHeader(spec.key or 0, version, rng.randrange(2**31), rng.choice(["c", None, "клиент"]))
            frames.append(encode_request(header, body)[4:])
    return frames


@cache
def response_corpus() -> list[tuple[int, int, bytes]]:
    rng = random.Random(20240502)
    frames = []
    for spec in api_specs().values():
        message = spec.response
        for version in range(spec.versions.low, (spec.versions.high or 0) + 1):
            body = sample_message(message, message.fields, version, rng)
            frames.append((spec.key or 0, version, encode_response(spec.key or 0, version, 7, body)[4:]))
    return frames


BOUNDARY = st.sampled_from(
    [
        b"\x00",
        b"\xff",
        b"\x7f",
        b"\x80",
        b"\xff\xff",
        b"\x7f\xff\xff\xff",
        b"\x80" * 6,
        b"\xff\xff\xff\xff\x0f",
        b"\x80\x00\x00\x00",
    ]
)


@st.composite
def mutated(draw: st.DrawFn, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "set", "boundary", "insert", "delete", "truncate"]))
        if op == "flip" and pos < len(data):
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and pos < len(data):
            data[pos] = draw(st.integers(0, 255))
        elif op == "boundary":
            value = draw(BOUNDARY)
            data[pos : pos + len(value)] = value
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


def decodes_or_rejects(frame: bytes) -> None:
    try:
        header, body = decode_request(frame)
    except ProtocolError:
        return
    # Whatever was accepted re-encodes, and the re-encoded form is stable.
    canonical = encode_request(header, body)
    assert encode_request(*decode_request(canonical[4:])) == canonical


def test_corpus_is_valid() -> None:
    corpus = request_corpus()
    assert len(corpus) > 250
    for frame in corpus:
        decode_request(frame)
    for key, version, frame in response_corpus():
        assert decode_response(key, version, frame)[0] == 7


@PROFILE
@given(st.binary(max_size=256))
def test_random_bytes(data: bytes) -> None:
    decodes_or_rejects(data)


@PROFILE
@given(st.data())
def test_random_body_behind_a_valid_header(data: st.DataObject) -> None:
    frame = data.draw(st.sampled_from(request_corpus()))
    header_size = 8 + 2 + max(0, struct.unpack(">h", frame[8:10])[0])
    body = data.draw(st.binary(max_size=128) | st.binary(max_size=16).map(lambda b: b * 8))
    decodes_or_rejects(frame[: header_size + 1] + body)


@PROFILE
@given(st.data())
def test_mutated_request_frames(data: st.DataObject) -> None:
    frame = data.draw(st.sampled_from(request_corpus()))
    changed = data.draw(mutated(frame))
    assume(changed != frame)
    decodes_or_rejects(changed)


@PROFILE
@given(st.data())
def test_mutated_response_frames(data: st.DataObject) -> None:
    key, version, frame = data.draw(st.sampled_from(response_corpus()))
    changed = data.draw(mutated(frame))
    with contextlib.suppress(ProtocolError):
        decode_response(key, version, changed)
