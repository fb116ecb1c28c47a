"""A seeded, deterministic mutation engine for the targets, and what a run finds."""

from __future__ import annotations

import hashlib
import random
import time
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafkalike.testing.fuzz.targets import Target

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
    crashes: list[Crash] = field(default_factory=list)

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
    stats = RunStats()
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
