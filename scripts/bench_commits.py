"""Offset commits per second, and how long other requests wait meanwhile.

Run: ``python scripts/bench_commits.py [--seconds 10] [--committers 8] [--tree DIR]``. Starts
``kafkalike serve`` (one ``__consumer_offsets`` partition) with its data directory on the disk
this checkout lives on (under ``build/``), then for ``--seconds``:

- each committer, on its own connection and with a group of its own, sends OffsetCommit after
  OffsetCommit; every commit is fsynced before it is answered;
- a prober, on another connection, every 5 ms sends an ApiVersions request and records its round
  trip.

Prints the commits per second and the prober's p50 / p99 / max. With ``--tree`` the broker runs
from another checkout (``git worktree add /tmp/base <commit>``), to compare a change with what
came before it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from bench_lib.brokers import KafkalikeBroker  # noqa: E402

from kafkalike.testing.wire_client import WireClient  # noqa: E402

PROBE_INTERVAL_S = 0.005
VERSIONS = {"client_software_name": "bench", "client_software_version": "1"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def create_topic(client: WireClient, name: str) -> None:
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    answer = client.request(19, 7, {"topics": [topic], "timeout_ms": 30000, "validate_only": False})
    assert answer.topics[0].error_code == 0, answer


def commit_body(group: str, offset: int) -> dict[str, object]:
    partition = {
        "partition_index": 0,
        "committed_offset": offset,
        "committed_leader_epoch": -1,
        "committed_metadata": "",
    }
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": "events", "partitions": [partition]}],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--committers", type=int, default=8)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run the broker from")
    args = parser.parse_args()
    (ROOT / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-commits-", dir=ROOT / "build"))
    os.chdir(work)  # ``python -m kafkalike`` imports from the working directory first: not this checkout's
    tree = args.tree.resolve()
    broker = KafkalikeBroker(work / "broker", {"offsets.topic.num.partitions": "1"}, source=tree)
    broker.start()
    host, port = broker.host_port
    commits = [0] * args.committers
    latencies: list[float] = []
    try:
        with WireClient(host, port) as admin:
            create_topic(admin, "events")
            admin.request(8, 8, commit_body("warm-up", 0))  # __consumer_offsets made before the clock starts
        stop = threading.Event()

        def commit(index: int) -> None:
            with WireClient(host, port) as client:
                while not stop.is_set():
                    answer = client.request(8, 8, commit_body(f"group-{index}", commits[index]))
                    assert answer.topics[0].partitions[0].error_code == 0, answer
                    commits[index] += 1

        committers = [threading.Thread(target=commit, args=(i,)) for i in range(args.committers)]
        for thread in committers:
            thread.start()
        with WireClient(host, port) as prober:
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline:
                started = time.perf_counter()
                prober.request(18, 3, VERSIONS)
                latencies.append((time.perf_counter() - started) * 1000)
                time.sleep(PROBE_INTERVAL_S)
        stop.set()
        for thread in committers:
            thread.join()
    finally:
        broker.close()
        os.chdir(ROOT)
        shutil.rmtree(work, ignore_errors=True)
    print(f"broker from {tree}: {sum(commits) / args.seconds:.0f} commits/s from {args.committers} committer(s)")
    print(
        f"  ApiVersions n={len(latencies):5d}  p50 {statistics.median(latencies):7.2f} ms  "
        f"p99 {percentile(latencies, 0.99):7.2f} ms  max {max(latencies):7.2f} ms"
    )


if __name__ == "__main__":
    main()
