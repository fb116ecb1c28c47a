#!/usr/bin/env python3
"""Broker memory per idle connection:

    python scripts/bench_connections.py                       # 1,000 and 10,000 connections
    python scripts/bench_connections.py --counts 100,1000
    python scripts/bench_connections.py --tree /path/to/other/checkout   # that checkout's broker
    python scripts/bench_connections.py --announce-mib 100 --counts 1000  # hostile size prefixes

For each count, starts ``kafkalike serve`` on 127.0.0.1 with a fresh data directory, reads its
resident memory (VmRSS), opens that many connections, sends one ApiVersions request on each (as
every client does first) and waits for every answer, so each connection is accepted, served and
idle; then reads VmRSS again and reports the difference per connection. With ``--announce-mib``
each connection instead sends a size prefix announcing that many MiB and then 10 bytes, and
stays there (a slow or hostile client). RLIMIT_NOFILE is raised to its hard limit for this
process and the broker (loopback only; every wait has a deadline).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from bench_lib.procstat import rss_bytes  # noqa: E402

from kafkalike.protocol.api import RequestHeader, encode_request  # noqa: E402
from kafkalike.protocol.framing import FrameSplitter  # noqa: E402
from kafkalike.testing.process import BrokerProcess  # noqa: E402

API_VERSIONS = encode_request(
    RequestHeader(18, 3, 1, "bench-connections"),
    {"client_software_name": "bench", "client_software_version": "1"},
)
CONCURRENT_OPENS = 200  # connections being opened at once (the listen backlog is small)


def raise_descriptor_limit(needed: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


async def open_idle(
    host: str, port: int, count: int, deadline_s: float, announce_bytes: int = 0
) -> list[trio.SocketStream]:
    """``count`` connections, each with its ApiVersions answered (or, with ``announce_bytes``,
    each having sent a size prefix announcing that much and 10 bytes of it)."""
    streams: list[trio.SocketStream] = []
    limiter = trio.CapacityLimiter(CONCURRENT_OPENS)

    async def one() -> None:
        async with limiter:
            stream = await trio.open_tcp_stream(host, port)
            streams.append(stream)
            if announce_bytes:
                await stream.send_all(announce_bytes.to_bytes(4, "big") + b"0123456789")
                return
            await stream.send_all(API_VERSIONS)
            splitter = FrameSplitter()
            while splitter.next_frame() is None:
                data = await stream.receive_some(65536)
                if not data:
                    raise ConnectionError("the broker closed a connection")
                splitter.feed(data)

    with trio.fail_after(deadline_s):
        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(one)
    return streams


async def measure(
    broker_pid: int, host: str, port: int, count: int, deadline_s: float, announce_bytes: int
) -> dict[str, float]:
    before = rss_bytes(broker_pid) or 0
    started = time.monotonic()
    streams = await open_idle(host, port, count, deadline_s, announce_bytes)
    opened_s = time.monotonic() - started
    # Every answer is in; give the broker's tasks a moment to reach their idle wait (bounded:
    # the RSS is read a few times and the largest value kept).
    after = 0
    for _ in range(5):
        await trio.sleep(0.2)
        after = max(after, rss_bytes(broker_pid) or 0)
    for stream in streams:
        stream.socket.close()
    return {
        "connections": count,
        "rss_before_mib": before / 2**20,
        "rss_after_mib": after / 2**20,
        "per_connection_kib": (after - before) / count / 1024,
        "open_seconds": opened_s,
    }


def run_one(count: int, tree: Path | None, deadline_s: float, announce_bytes: int = 0) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="bench-connections-"))
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree or ROOT)
    cwd = os.getcwd()
    os.chdir(work)  # ``python -m`` imports from its working directory first: not from a checkout there
    try:
        proc = BrokerProcess(work / "data", ["auto.create.topics.enable=false"])
        proc.start()
    finally:
        os.chdir(cwd)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        assert proc.proc is not None
        return trio.run(measure, proc.proc.pid, proc.host, proc.port, count, deadline_s, announce_bytes)
    finally:
        try:
            proc.stop(60)
        except Exception:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", default="1000,10000", help="comma-separated connection counts")
    parser.add_argument("--tree", type=Path, help="run the kafkalike package of this checkout")
    parser.add_argument("--deadline-s", type=float, default=300.0, help="longest time to open one count's connections")
    parser.add_argument(
        "--announce-mib", type=int, default=0, help="each connection announces a frame this large and sends 10 bytes"
    )
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",") if c.strip()]
    limit = raise_descriptor_limit(max(counts) + 100)
    if max(counts) + 100 > limit:
        print(f"RLIMIT_NOFILE hard limit {limit} is too low for {max(counts)} connections", file=sys.stderr)
        return 2
    tree = args.tree.resolve() if args.tree else None
    announce_bytes = args.announce_mib * 2**20
    what = f"each sent a size prefix of {args.announce_mib} MiB and 10 bytes" if announce_bytes else "idle"
    print(f"broker from {tree or ROOT}; connections {what}")
    print("connections  RSS before (MiB)  RSS after (MiB)  per connection (KiB)  open (s)")
    for count in counts:
        row = run_one(count, tree, args.deadline_s, announce_bytes)
        print(
            f"{row['connections']:>11,.0f}  {row['rss_before_mib']:>16.1f}  {row['rss_after_mib']:>15.1f}"
            f"  {row['per_connection_kib']:>20.1f}  {row['open_seconds']:>8.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
