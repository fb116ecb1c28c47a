"""``scripts/bench.py --profile``: where a kafkalike broker spends its time under load.

Starts a broker, then for each load (1 KiB acks=all produce to 6 partitions, and consuming what
that wrote) attaches ``py-spy record`` for the duration of the load and writes a flame graph
(``profile-LOAD.svg``), the collapsed stacks (``profile-LOAD.txt``) and the top functions by own
and by total time (``profile-LOAD-top.txt``).
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_lib.brokers import KafkalikeBroker, create_topic, end_offsets
from bench_lib.scenarios import run_worker

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")


def top_functions(collapsed: Path, n: int = 30) -> str:
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        samples += count
        frames = stack.split(";")
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    out = [f"{samples} samples", "", "own time:"]
    out += [f"{c / samples:6.1%}  {f}" for f, c in own.most_common(n)]
    out += ["", "total time (incl. callees):"]
    out += [f"{c / samples:6.1%}  {f}" for f, c in total.most_common(n)]
    return "\n".join(out) + "\n"


def _record(pid: int, out: Path, name: str, seconds: float, load: Any) -> None:
    """Two samplers at once: collapsed stacks (for the top lists) and a flame graph."""
    svg, raw = out / f"profile-{name}.svg", out / f"profile-{name}.txt"
    common = [PY_SPY, "record", "--pid", str(pid), "--rate", "200", "--duration", str(int(seconds)), "--nonblocking"]
    samplers = [
        subprocess.Popen(
            [*common, "--format", fmt, "--output", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for fmt, path in (("raw", raw), ("flamegraph", svg))
    ]
    time.sleep(1.0)
    try:
        load()
    finally:
        for sampler in samplers:
            try:
                sampler.wait(seconds + 30)
            except subprocess.TimeoutExpired:
                sampler.kill()
    if raw.exists():
        (out / f"profile-{name}-top.txt").write_text(top_functions(raw))


def profile(out: Path, work: Path, seconds: float, say: Any) -> int:
    if not Path(PY_SPY).exists():
        say("py-spy is not installed (pip install -e '.[bench]')")
        return 2
    broker = KafkalikeBroker(work / "kafkalike-profile")
    broker.start()
    assert broker.pid is not None
    try:
        topic = "profile-1k"
        create_topic(broker, topic, 6)
        produce = {
            "bootstrap": broker.bootstrap,
            "topic": topic,
            "count": 10_000_000,
            "seconds": seconds,
            "value_size": 1024,
            "acks": "all",
            "compression": "none",
        }
        say(f"profiling produce for {seconds:.0f} s")
        _record(
            broker.pid, out, "produce", seconds + 2, lambda: say(str(run_worker("produce", produce, seconds + 120)))
        )
        total = sum(end_offsets(broker, topic, 6))
        consume = {"bootstrap": broker.bootstrap, "topic": topic, "count": total, "seconds": seconds}
        say(f"profiling consume of {total:,} messages (at most {seconds:.0f} s)")

        def consume_repeatedly() -> None:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline - 1:
                say(
                    str(run_worker("consume", consume | {"seconds": max(deadline - time.monotonic(), 1)}, seconds + 60))
                )

        _record(broker.pid, out, "consume", seconds + 2, consume_repeatedly)
    finally:
        broker.close()
    for name in ("produce", "consume"):
        top = out / f"profile-{name}-top.txt"
        if top.exists():
            say(f"{name}: {top}\n" + "\n".join(top.read_text().splitlines()[:25]))
    return 0
