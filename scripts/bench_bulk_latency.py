#!/usr/bin/env python3
"""Latency of small requests while another client does bulk work on the same broker.

    python scripts/bench_bulk_latency.py                          # kafkalike from this checkout
    python scripts/bench_bulk_latency.py --baseline-tree ../main  # and from another checkout
    python scripts/bench_bulk_latency.py --reference=kafka        # and Apache Kafka 4.x (jars)

One client (the probe) sends ApiVersions and a one-record produce (acks=1) in turn, one at a
time, and records each round trip; meanwhile another client runs one load, each on a fresh
broker and data directory:

- ``idle``: no load (the floor);
- ``create-1000``: one CreateTopics of 1,000 one-partition topics, then one DeleteTopics of them;
- ``create-1m``: CreateTopics of one topic with 1,000,000 partitions, again and again;
- ``fetch-100mb``: Fetch of 100 MB already in a partition, again and again;
- ``metadata-100k``: Metadata naming 100,000 unknown topics, auto-creation allowed, again and
  again (past one operation's bound: nothing is created, but the request is 3.9 MB to decode).

A phase lasts ``--seconds`` (and at least until the load's first request is answered or
``--load-timeout-s`` passed); a probe request unanswered after ``--probe-timeout-s`` counts as
lost and ends that probe. Prints p50/p99/max per request kind and phase (target: p99 < 50 ms),
and writes them to ``--json`` if given. Brokers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from bench_lib.brokers import ApacheKafkaBroker, Broker, KafkalikeBroker  # noqa: E402

from kafkalike.protocol.api import RequestHeader, encode_request  # noqa: E402
from kafkalike.protocol.records import Record, build_batch  # noqa: E402
from kafkalike.testing.wire_client import WireClient  # noqa: E402

PHASES = ("idle", "create-1000", "create-1m", "fetch-100mb", "metadata-100k")
PROBE_TOPIC = "probe"
FETCH_TOPIC = "fetched"
FETCH_BYTES = 100 * 1024 * 1024
ZERO_UUID = uuid.UUID(int=0)
API_VERSIONS = {"client_software_name": "bench", "client_software_version": "1"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, of {', '.join(PHASES)}")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--load-timeout-s", type=float, default=60.0)
    parser.add_argument("--probe-timeout-s", type=float, default=10.0)
    parser.add_argument("--baseline-tree", type=Path, help="also measure kafkalike from this checkout")
    parser.add_argument("--reference", choices=["kafka"], help="also measure Apache Kafka (KAFKALIKE_AK_LIB jars)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    return parser.parse_args(argv)


# -- requests --------------------------------------------------------------------------------------


def topic_spec(name: str, partitions: int) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}


def create_topics(client: WireClient, topics: list[dict[str, Any]]) -> Any:
    return client.request(19, 7, {"topics": topics, "timeout_ms": 600_000, "validate_only": False})


def produce_body(topic: str, records: bytes, acks: int) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def fetch_body(topic: str) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": FETCH_BYTES + (1 << 20),
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": FETCH_BYTES + (1 << 20),
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def wait_topic_ready(client: WireClient, topic: str, deadline: float) -> None:
    """Until a produce to the topic succeeds (Kafka makes the leader a moment after creation)."""
    batch = build_batch([Record(value=b"ready")])
    while client.request(0, 9, produce_body(topic, batch, 1)).responses[0].partition_responses[0].error_code:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} never became ready")
        time.sleep(0.05)


class RawFetcher:
    """Sends one Fetch and reads its answer without decoding it (100 MB is the point)."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.buffer = bytearray(4 << 20)
        self.correlation_id = 0

    def fetch(self, topic: str) -> int:
        self.correlation_id += 1
        header = RequestHeader(1, 12, self.correlation_id, "bench-fetch")
        self.sock.sendall(encode_request(header, fetch_body(topic)))
        size = struct.unpack(">i", self._read(4))[0]
        left = size
        with memoryview(self.buffer) as view:
            while left:
                n = self.sock.recv_into(view[: min(left, len(self.buffer))])
                if not n:
                    raise ConnectionError("closed")
                left -= n
        return size

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


# -- one phase -------------------------------------------------------------------------------------


@dataclass
class Probe:
    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: {"ApiVersions": [], "Produce": []})
    lost: int = 0
    errors: int = 0


def run_probe(host: str, port: int, stop: threading.Event, probe: Probe, timeout_s: float) -> None:
    client = WireClient(host, port, timeout_s=timeout_s)
    batch = build_batch([Record(value=b"x" * 100)])
    try:
        while not stop.is_set():
            for kind in ("ApiVersions", "Produce"):
                started = time.perf_counter()
                try:
                    if kind == "ApiVersions":
                        failed = client.request(18, 3, API_VERSIONS).error_code != 0
                    else:
                        answer = client.request(0, 9, produce_body(PROBE_TOPIC, batch, 1))
                        failed = answer.responses[0].partition_responses[0].error_code != 0
                except (OSError, ConnectionError):
                    probe.lost += 1
                    return
                probe.latencies_ms[kind].append((time.perf_counter() - started) * 1000)
                probe.errors += failed
    finally:
        client.close()


def run_load(phase: str, host: str, port: int, stop: threading.Event, timeout_s: float, log: dict[str, Any]) -> None:
    """The bulk client; records how long each of its requests took and what came back."""
    if phase == "idle":
        stop.wait()
        return
    try:
        if phase == "fetch-100mb":
            fetcher = RawFetcher(host, port, timeout_s)
            try:
                while not stop.is_set():
                    started = time.perf_counter()
                    size = fetcher.fetch(FETCH_TOPIC)
                    log.setdefault("request_s", []).append(time.perf_counter() - started)
                    log["response_bytes"] = size
            finally:
                fetcher.close()
            return
        client = WireClient(host, port, timeout_s=timeout_s)
        try:
            while not stop.is_set():
                started = time.perf_counter()
                if phase == "create-1000":
                    names = [f"bulk-{uuid.uuid4().hex[:8]}-{i}" for i in range(1000)]
                    answer = create_topics(client, [topic_spec(n, 1) for n in names])
                    log.setdefault("request_s", []).append(time.perf_counter() - started)
                    log["errors"] = sorted({t.error_code for t in answer.topics})
                    started = time.perf_counter()
                    client.request(
                        20, 6, {"topics": [{"name": n, "topic_id": ZERO_UUID} for n in names], "timeout_ms": 600_000}
                    )
                    log.setdefault("delete_s", []).append(time.perf_counter() - started)
                elif phase == "metadata-100k":
                    names = [f"unknown-{uuid.uuid4().hex[:8]}-{i}" for i in range(100_000)]
                    body = {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": True}
                    answer = client.request(3, 12, body)
                    log.setdefault("request_s", []).append(time.perf_counter() - started)
                    log["errors"] = sorted({t.error_code for t in answer.topics})
                else:  # create-1m
                    answer = create_topics(client, [topic_spec(f"huge-{uuid.uuid4().hex[:8]}", 1_000_000)])
                    log.setdefault("request_s", []).append(time.perf_counter() - started)
                    log["errors"] = sorted({t.error_code for t in answer.topics})
        finally:
            client.close()
    except (OSError, ConnectionError) as exc:
        log["failed"] = repr(exc)


def prepare(broker: Broker, phase: str) -> None:
    host, port = broker.host_port
    with WireClient(host, port, timeout_s=120) as client:
        topics = [topic_spec(PROBE_TOPIC, 1)] + ([topic_spec(FETCH_TOPIC, 1)] if phase == "fetch-100mb" else [])
        create_topics(client, topics)
        deadline = time.monotonic() + 60
        for topic in topics:
            wait_topic_ready(client, topic["name"], deadline)
        if phase == "fetch-100mb":
            batch = build_batch([Record(value=os.urandom(1000)) for _ in range(1000)])  # ~1 MB
            for _ in range(FETCH_BYTES // len(batch) + 1):
                client.request(0, 9, produce_body(FETCH_TOPIC, batch, 1))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_phase(broker: Broker, phase: str, args: argparse.Namespace) -> dict[str, Any]:
    broker.start()
    try:
        prepare(broker, phase)
        host, port = broker.host_port
        stop_probe, stop_load = threading.Event(), threading.Event()
        probe, load_log = Probe(), {}
        probe_thread = threading.Thread(target=run_probe, args=(host, port, stop_probe, probe, args.probe_timeout_s))
        load_thread = threading.Thread(
            target=run_load, args=(phase, host, port, stop_load, args.load_timeout_s, load_log)
        )
        probe_thread.start()
        load_thread.start()
        load_thread.join(args.seconds)
        stop_load.set()
        load_thread.join(args.load_timeout_s)
        stop_probe.set()
        probe_thread.join(args.probe_timeout_s * 2 + 5)
        figures: dict[str, Any] = {"lost": probe.lost, "errors": probe.errors, "load": load_log}
        if load_thread.is_alive():
            figures["load"]["unfinished"] = True
        for kind, values in probe.latencies_ms.items():
            if values:
                figures[kind] = {
                    "count": len(values),
                    "p50_ms": round(statistics.median(values), 2),
                    "p99_ms": round(percentile(values, 0.99), 2),
                    "max_ms": round(max(values), 2),
                }
        return figures
    finally:
        broker.close()


def print_row(broker_name: str, phase: str, figures: dict[str, Any]) -> None:
    cells = []
    for kind in ("ApiVersions", "Produce"):
        f = figures.get(kind)
        cells.append(
            f"{kind} p50 {f['p50_ms']:7.2f} p99 {f['p99_ms']:8.2f} max {f['max_ms']:8.2f} ms (n={f['count']})"
            if f
            else f"{kind}: none"
        )
    load = figures["load"]
    took = ", ".join(f"{s:.2f}" for s in load.get("request_s", [])[:5])
    extra = f"load requests {took} s"
    if "response_bytes" in load:
        extra += f" ({load['response_bytes'] / 1e6:.0f} MB each)"
    if "errors" in load:
        extra += f" answered {load['errors']}"
    if load.get("unfinished"):
        extra += " UNFINISHED"
    if "failed" in load:
        extra += f" {load['failed']}"
    print(f"{broker_name:12} {phase:12} | {' | '.join(cells)} | lost {figures['lost']} | {extra}", flush=True)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    phases = [p for p in args.phases.split(",") if p]
    work = Path(tempfile.mkdtemp(prefix="bench-bulk-"))
    # Brokers are started as ``python -m kafkalike``, which puts the working directory first on
    # their path: from a checkout it would shadow --baseline-tree.
    os.chdir(work)
    makers: list[tuple[str, Any]] = [("kafkalike", lambda p: KafkalikeBroker(work / f"kl-{p}"))]
    if args.baseline_tree is not None:
        tree = args.baseline_tree.resolve()
        makers.append(("baseline", lambda p: KafkalikeBroker(work / f"base-{p}", source=tree, name="baseline")))
    if args.reference == "kafka":
        lib = Path(os.environ.get("KAFKALIKE_AK_LIB", ROOT / "compat_tests/.work/ak-4.0.2/lib"))
        makers.append(("apache-kafka", lambda p: ApacheKafkaBroker(lib, work / f"ak-{p}", "4.0.2")))
    results: dict[str, dict[str, Any]] = {}
    try:
        for broker_name, make in makers:
            for phase in phases:
                figures = run_phase(make(phase), phase, args)
                results.setdefault(broker_name, {})[phase] = figures
                print_row(broker_name, phase, figures)
    finally:
        os.chdir(ROOT)
        shutil.rmtree(work, ignore_errors=True)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
