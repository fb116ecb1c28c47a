"""Start-up cost of a test broker: time to the first Metadata answer, and idle memory.

Run: ``python scripts/bench_startup.py [--runs 5]``. Measures
- in-process: ``InProcessBroker().start()`` to a Metadata response (the interpreter and the
  package already imported, as in a test session);
- subprocess: ``python -m kafkalike serve --ephemeral --listen 127.0.0.1:0`` from exec to a
  Metadata response, and that process's resident memory (VmRSS) once idle.
Prints medians and the spread.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kafkalike.testing.broker import InProcessBroker
from kafkalike.testing.wire_client import WireClient

METADATA = {"topics": None, "allow_auto_topic_creation": False}


def in_process_once() -> float:
    started = time.perf_counter()
    broker = InProcessBroker().start()
    with WireClient(broker.host, broker.port) as client:
        client.request(3, 12, METADATA)
    elapsed = time.perf_counter() - started
    broker.stop()
    return elapsed


def rss_kib(pid: int) -> int:
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) if match else -1


def subprocess_once() -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalike", "serve", "--ephemeral", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    port = 0
    for line in proc.stdout:
        found = re.search(r"ready on [\d.]+:(\d+)", line)
        if found:
            port = int(found.group(1))
            break
    with WireClient("127.0.0.1", port) as client:
        client.request(3, 12, METADATA)
    elapsed = time.perf_counter() - started
    rss = rss_kib(proc.pid)
    proc.terminate()
    proc.wait(30)
    proc.stdout.close()
    return elapsed, rss


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f}  min {min(values):.3f}  max {max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    in_process_once()  # warm: compile the schemas ApiVersions/Metadata use, as a session would once
    inproc = [in_process_once() for _ in range(args.runs)]
    subs = [subprocess_once() for _ in range(args.runs)]
    print(f"in-process start to first Metadata answer (s): {spread(inproc)}")
    print(f"subprocess start to first Metadata answer (s): {spread([s for s, _ in subs])}")
    print(f"subprocess idle RSS (MiB): {spread([r / 1024 for _, r in subs])}")


if __name__ == "__main__":
    main()
