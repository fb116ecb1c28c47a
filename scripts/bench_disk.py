"""How long other requests wait while the broker syncs to disk.

Run: ``python scripts/bench_disk.py [--seconds 10] [--tree DIR]``. Starts ``kafkalike serve``
with its data directory on the disk this checkout lives on (under ``build/``), then for
``--seconds``:

- a writer produces 64 KiB batches back to back to a topic with ``flush.messages=1``, so every
  append is fsynced before it is answered;
- a prober, on its own connection, every 5 ms sends an ApiVersions request and a 100-byte produce
  to a topic without flushes, and records each round trip.

Prints the writer's appends per second and the prober's p50 / p99 / max per request. With
``--tree`` the broker runs from another checkout (``git worktree add /tmp/base <commit>``), to
compare a change with what came before it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.wire_client import WireClient

ROOT = Path(__file__).resolve().parent.parent
PROBE_INTERVAL_S = 0.005
VERSIONS = {"client_software_name": "bench", "client_software_version": "1"}


def produce_body(topic: str, records: bytes) -> dict[str, object]:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def create(client: WireClient, name: str, configs: dict[str, str]) -> None:
    topic = {
        "name": name,
        "num_partitions": 1,
        "replication_factor": 1,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in configs.items()],
    }
    answer = client.request(19, 7, {"topics": [topic], "timeout_ms": 30000, "validate_only": False})
    assert answer.topics[0].error_code == 0, answer


def start_broker(tree: Path, data_dir: Path) -> tuple[subprocess.Popen[str], int]:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalike", "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir)],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        found = re.search(r"ready on [\d.]+:(\d+)", line)
        if found:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep draining
            return proc, int(found.group(1))
    raise RuntimeError("the broker exited before it was ready")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run the broker from")
    args = parser.parse_args()
    (ROOT / "build").mkdir(exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="bench-disk-", dir=ROOT / "build"))
    proc, port = start_broker(args.tree.resolve(), data_dir)
    try:
        with WireClient("127.0.0.1", port) as admin:
            create(admin, "synced", {"flush.messages": "1"})
            create(admin, "plain", {})
        stop = threading.Event()
        appends = 0

        def write() -> None:
            nonlocal appends
            batch = build_batch([Record(value=b"w" * 1024) for _ in range(64)])
            with WireClient("127.0.0.1", port) as writer:
                while not stop.is_set():
                    answer = writer.request(0, 9, produce_body("synced", batch))
                    assert answer.responses[0].partition_responses[0].error_code == 0
                    appends += 1

        writer = threading.Thread(target=write)
        writer.start()
        latencies: dict[str, list[float]] = {"ApiVersions": [], "produce 100 B": []}
        small = build_batch([Record(value=b"p" * 100)])
        with WireClient("127.0.0.1", port) as prober:
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline:
                started = time.perf_counter()
                prober.request(18, 3, VERSIONS)
                latencies["ApiVersions"].append(time.perf_counter() - started)
                started = time.perf_counter()
                prober.request(0, 9, produce_body("plain", small))
                latencies["produce 100 B"].append(time.perf_counter() - started)
                time.sleep(PROBE_INTERVAL_S)
        stop.set()
        writer.join()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(f"broker from {args.tree}: {appends / args.seconds:.0f} fsynced 64 KiB appends/s meanwhile")
    for name, values in latencies.items():
        ms = [v * 1000 for v in values]
        print(
            f"  {name:14s} n={len(ms):5d}  p50 {statistics.median(ms):7.2f} ms  "
            f"p99 {percentile(ms, 0.99):7.2f} ms  max {max(ms):7.2f} ms"
        )


if __name__ == "__main__":
    main()
