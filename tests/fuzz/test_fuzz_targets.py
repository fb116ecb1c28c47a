"""A short run of every fuzz target from the committed seed corpus, and the harness's negative controls.

Long, coverage-guided runs are ``scripts/fuzz.py --minutes N``; here each target gets a bounded
number of seeded, deterministic mutations, so that a change that breaks a parser's contract
(decode or raise ProtocolError; answer or close) fails the suite.
"""

from __future__ import annotations

import platform
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalike.protocol.api import decode_request_header
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.protocol.wire import frame_reader
from kafkalike.server.registry import load_handlers
from kafkalike.testing import fuzz

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
# Inputs per target: a few seconds in all on a shared machine (the request path goes through sockets).
SHORT_RUN_INPUTS = {
    "framing": 3000,
    "requests": 3000,
    "records": 3000,
    "record_bodies": 2000,
    "consumer_protocol": 1000,
    "coordinator_records": 2000,
    "compression": 2000,
    "request_path": 400,
    "request_stream": 200,
}


@pytest.fixture(autouse=True)
def _stop_request_path_broker() -> Iterator[None]:
    yield
    fuzz.stop_request_path()


def seeds(name: str) -> list[bytes]:
    return fuzz.read_corpus(CORPUS / fuzz.SEED_DIR_FOR.get(name, name))


def report(stats: fuzz.RunStats, tmp_path: Path) -> str:
    lines = []
    for crash in stats.crashes:
        path = fuzz.save_crash(crash, tmp_path)
        lines.append(f"{crash.error}replay: {fuzz.replay_command(crash.target, path)}")
    return "\n".join(lines)


@pytest.mark.parametrize("name", sorted(fuzz.TARGETS))
def test_short_run_finds_nothing(name: str, tmp_path: Path) -> None:
    corpus = seeds(name)
    assert corpus, f"no committed seeds for {name}"
    stats = fuzz.mutation_run(fuzz.TARGETS[name], corpus, inputs=SHORT_RUN_INPUTS[name], rng_seed=13)
    assert stats.executions == len(corpus) + SHORT_RUN_INPUTS[name]
    assert not stats.crashes, report(stats, tmp_path)


def test_request_seeds_cover_every_registered_api_version() -> None:
    registered = {(h.api_key, v) for h in load_handlers().values() for v in range(h.min_version, h.max_version + 1)}
    covered = set()
    for frame in seeds("requests"):
        header = decode_request_header(frame_reader(frame))
        covered.add((header.api_key, header.api_version))
    assert registered <= covered, sorted(registered - covered)


# -- negative controls: each checker catches what it exists to catch -------------------------------


def test_a_planted_decoder_bug_is_found_saved_and_replayed(tmp_path: Path) -> None:
    control = fuzz.NEGATIVE_CONTROL
    corpus = seeds("broken_decoder")
    assert all(fuzz.run_one(control, data) is None for data in corpus), "the seeds alone must not trip it"
    stats = fuzz.mutation_run(control, corpus, inputs=3000, rng_seed=13, max_crashes=1)
    assert stats.crashes, "3000 mutations did not find the planted KeyError"
    (crash,) = stats.crashes
    assert crash.data.startswith(fuzz.BROKEN_PATTERN)
    assert "KeyError: 'planted bug'" in crash.error
    path = fuzz.save_crash(crash, tmp_path)
    replayed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fuzz.py"), "--target", control.name, "--replay", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert replayed.returncode == 1
    assert "KeyError: 'planted bug'" in replayed.stdout


@pytest.mark.slow
def test_atheris_finds_the_planted_bug(tmp_path: Path) -> None:
    if not (sys.platform == "linux" and platform.machine() == "x86_64"):
        pytest.skip("atheris (a test extra) has wheels for Linux x86_64 only")
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "fuzz.py"),
            *("--target", "broken_decoder", "--runs", "30000", "--seed", "1", "--max-crashes", "1"),
            *("--work-dir", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout[-3000:]
    assert "KeyError: 'planted bug'" in run.stdout
    (saved,) = (tmp_path / "crashes").iterdir()
    assert saved.read_bytes().startswith(fuzz.BROKEN_PATTERN)
    assert f"--replay {saved}" in run.stdout


class _SplitterThatLosesAByte(FrameSplitter):
    """Drops the last byte of frames of 100 bytes or more."""

    def next_frame(self) -> bytes | None:
        frame = super().next_frame()
        return frame[:-1] if frame is not None and len(frame) >= 100 else frame


class _SplitterThatMiscounts(FrameSplitter):
    def buffered(self) -> int:
        return super().buffered() + 1


@pytest.mark.parametrize("broken", [_SplitterThatLosesAByte, _SplitterThatMiscounts])
def test_the_framing_check_catches_a_broken_splitter(broken: type[FrameSplitter]) -> None:
    stream = b"".join(struct.pack(">i", n) + bytes(n) for n in (3, 150, 0))
    data = b"\x00\x10\x07" + stream
    fuzz.check_framing(data)
    with pytest.raises(fuzz.Finding):
        fuzz.check_framing(data, broken)


def test_the_framing_check_catches_a_missed_bad_size() -> None:
    class Lenient(FrameSplitter):
        def take_frame(self) -> bytearray | None:
            self.max_frame_bytes = 1 << 30
            return super().take_frame()

    data = b"\x00\x01" + b"\x07" + struct.pack(">i", 100_000) + bytes(10)  # limit 16 KiB
    fuzz.check_framing(data)  # the real splitter refuses the size: no finding
    with pytest.raises(fuzz.Finding, match="no FrameError"):
        fuzz.check_framing(data, Lenient)


def _metadata_frame() -> bytes:
    return next(f for f in seeds("request_path") if f[:4] == struct.pack(">hh", 3, 12))


def test_the_request_path_check_catches_a_handler_that_raises() -> None:
    path = fuzz.RequestPath(bound_s=5.0)
    try:
        broker = path.start()
        path.check(_metadata_frame())

        def fail(header: object, body: object) -> None:
            raise RuntimeError("handler bug")

        broker.faults.intercept(3, fail, times=1)
        with pytest.raises(fuzz.Finding, match="the broker logged"):
            path.check(_metadata_frame())
        path.check(_metadata_frame())  # the next connection is answered again
    finally:
        path.stop()


def test_the_request_path_check_catches_a_request_left_unanswered() -> None:
    path = fuzz.RequestPath(bound_s=0.5)
    try:
        broker = path.start()
        broker.faults.delay(3, 30.0, times=1)
        with pytest.raises(fuzz.Finding, match="no answer and no close"):
            path.check(_metadata_frame())
    finally:
        path.stop()
