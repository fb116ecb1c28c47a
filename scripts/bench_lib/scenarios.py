"""What ``scripts/bench.py`` measures, one function per scenario; every one takes a ``Ctx`` (plan,
results, progress) and one started broker, and records its runs under ``ctx.results``.

Load comes from worker processes (``workers.py``, librdkafka) and, when Java is present, from
Apache Kafka's perf tools (``javaperf.py``). Every loop is bounded by a count and a deadline.
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_lib.brokers import Broker, create_topic, delete_topic, end_offsets
from bench_lib.javaperf import JavaTools
from bench_lib.procstat import Meter, cached_bytes, evict_page_cache, rss_bytes

from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.wire_client import WireClient

WORKERS = Path(__file__).resolve().parent / "workers.py"


@dataclass
class Plan:
    """Sizes and counts; ``quick()`` is the smoke-test variant."""

    runs: int = 3
    sizes: tuple[int, ...] = (100, 1024)
    acks: tuple[str, ...] = ("1", "all")
    partitions: tuple[int, ...] = (1, 6)
    compressions: tuple[str, ...] = ("none", "lz4", "zstd")
    produce_seconds: float = 5.0
    produce_cap: dict[int, int] = field(default_factory=lambda: {100: 3_000_000, 1024: 1_000_000})
    java_configs: tuple[tuple[int, str, int, str], ...] = (
        (100, "1", 6, "none"),
        (100, "all", 6, "none"),
        (1024, "1", 1, "none"),
        (1024, "all", 1, "none"),
        (1024, "1", 6, "none"),
        (1024, "all", 6, "none"),
        (1024, "all", 6, "lz4"),
        (1024, "all", 6, "zstd"),
    )
    java_seconds: float = 6.0
    consume_bytes: int = 512 * 1024 * 1024  # the 1 KiB topic; the 100 B topic gets a fifth of it
    consume_seconds: float = 60.0
    cold: bool = True
    rates: tuple[int, ...] = (1_000, 10_000, 50_000)
    latency_seconds: float = 10.0
    latency_size: int = 1024
    latency_partitions: int = 1
    scale_partitions: tuple[int, ...] = (1, 6, 24, 96)
    scale_connections: tuple[int, ...] = (1, 2, 4)
    retained_bytes: int = 1024 * 1024 * 1024
    probes: int = 500
    startup_runs: int = 3
    warmup_seconds: float = 5.0
    latency_warmup: float = 2.0

    @classmethod
    def quick(cls) -> Plan:
        return cls(
            runs=1,
            acks=("all",),
            partitions=(6,),
            compressions=("none", "zstd"),
            produce_seconds=2.0,
            produce_cap={100: 200_000, 1024: 60_000},
            java_configs=((1024, "all", 6, "none"),),
            java_seconds=2.0,
            consume_bytes=40 * 1024 * 1024,
            consume_seconds=20.0,
            cold=True,
            rates=(1_000, 10_000),
            latency_seconds=3.0,
            scale_partitions=(1, 24),
            scale_connections=(1, 2),
            retained_bytes=32 * 1024 * 1024,
            probes=100,
            startup_runs=1,
            warmup_seconds=2.0,
            latency_warmup=1.0,
        )


class Ctx:
    def __init__(self, plan: Plan, work: Path, java: JavaTools | None, only: set[str]) -> None:
        self.plan = plan
        self.work = work
        self.java = java
        self.only = only
        self.results: dict[str, Any] = {}
        self.rss_load: dict[str, int] = {}
        self.brokers: list[Broker] = []  # all running brokers: the others are kept quiet during a measurement
        self.notes: list[str] = []

    def wants(self, scenario: str) -> bool:
        return scenario in self.only

    def say(self, message: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    def record(
        self, broker: Broker, section: str, key: str, run: dict[str, Any], config: dict[str, Any] | None = None
    ) -> None:
        entry = self.results.setdefault(broker.name, {}).setdefault(section, {}).setdefault(key, {"runs": []})
        if config is not None:
            entry["config"] = config
        entry["runs"].append(run)


# ---- workers ---------------------------------------------------------------------------------------


def _worker_command(mode: str, args: dict[str, Any]) -> list[str]:
    return [sys.executable, str(WORKERS), mode, json.dumps(args)]


def _parse(mode: str, out: str, err: str, code: int | None) -> dict[str, Any]:
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if code != 0 or not lines:
        raise RuntimeError(f"{mode} worker exited {code}: {(err or out)[-800:]}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def run_worker(mode: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    try:
        ran = subprocess.run(
            _worker_command(mode, args), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{mode} worker still running after {timeout_s:.0f} s") from exc
    return _parse(mode, ran.stdout, ran.stderr, ran.returncode)


def run_workers(mode: str, many: list[dict[str, Any]], timeout_s: float) -> list[dict[str, Any]]:
    procs = [
        subprocess.Popen(_worker_command(mode, a), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for a in many
    ]
    out = []
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise RuntimeError(f"{mode} workers still running after {timeout_s:.0f} s") from None
        out.append(_parse(mode, stdout, stderr, proc.returncode))
    return out


def _topic(tag: str) -> str:
    return f"bench-{tag}-{uuid.uuid4().hex[:6]}"


def _fmt_rate(run: dict[str, Any]) -> str:
    text = f"{run['msgs_per_s']:,.0f} msg/s, {run['mb_per_s']:.1f} MB/s"
    share = run.get("foreign_cpu_share")
    return text + (f" (other load {share:.0%})" if share is not None else "")


@contextlib.contextmanager
def _others_paused(ctx: Ctx, broker: Broker) -> Iterator[None]:
    others = [b for b in ctx.brokers if b is not broker and b.pid is not None]
    try:
        for other in others:
            other.quiet()
        yield
    finally:
        for other in others:
            other.resume()


def _measure(ctx: Ctx, broker: Broker, fn: Any) -> dict[str, Any]:
    """``fn()``'s result dict, with the broker's CPU and peak RSS and the machine's other load; the
    other brokers are kept quiet meanwhile (``Broker.quiet``)."""
    with _others_paused(ctx, broker), Meter(broker.pid) as meter:
        result: dict[str, Any] = fn()
    if meter.max_rss is not None:
        ctx.rss_load[broker.name] = max(ctx.rss_load.get(broker.name, 0), meter.max_rss)
    return meter.annotate(result)  # type: ignore[arg-type,return-value]


# ---- start-up and idle memory -----------------------------------------------------------------------


def startup(ctx: Ctx, makers: list[tuple[str, Any]]) -> None:
    """Fresh brokers, alternating: exec to first Metadata answer, and RSS once idle for 3 s.

    The first start of each broker is recorded apart ("first start"): for kafkalike it is the one
    that compiles the Python modules to bytecode (bench.py points PYTHONPYCACHEPREFIX at its work
    directory, as an installed package has its bytecode compiled at install time), for Apache
    Kafka the one that reads its jars from disk for the first time.
    """
    for n in range(-1, ctx.plan.startup_runs):
        for name, make in makers:
            broker: Broker = make(f"startup-{n + 1}")
            try:
                seconds = broker.start()
                time.sleep(3.0)
                rss = rss_bytes(broker.pid)
                if seconds is None:
                    continue
                key = "first start" if n < 0 else "fresh"
                ctx.record(broker, "startup", key, {"seconds": seconds, "idle_rss": rss})
                which = "first start" if n < 0 else f"start-up {n + 1}/{ctx.plan.startup_runs}"
                ctx.say(f"{name} {which}: {seconds:.3f} s, idle RSS {(rss or 0) / 2**20:.0f} MiB")
            finally:
                broker.close()


def warm_up(ctx: Ctx, brokers: list[Broker]) -> None:
    """A few seconds of produce and consume on each broker before anything is recorded (a JVM
    compiles its hot paths; every broker gets the same)."""
    for broker in brokers:
        topic = _topic("warmup")
        create_topic(broker, topic, 6)
        args = {
            "bootstrap": broker.bootstrap,
            "topic": topic,
            "count": 200_000,
            "seconds": ctx.plan.warmup_seconds,
            "value_size": 1024,
            "acks": "1",
            "compression": "none",
        }
        run_worker("produce", args, ctx.plan.warmup_seconds + 60)
        total = sum(end_offsets(broker, topic, 6))
        run_worker("consume", {"bootstrap": broker.bootstrap, "topic": topic, "count": total, "seconds": 30}, 90)
        delete_topic(broker, topic)
        ctx.say(f"{broker.name} warmed up")


# ---- produce -------------------------------------------------------------------------------------------


def produce_matrix(ctx: Ctx, brokers: list[Broker]) -> None:
    p = ctx.plan
    configs = [(s, a, n, c) for s in p.sizes for a in p.acks for n in p.partitions for c in p.compressions]
    for i, (size, acks, parts, comp) in enumerate(configs, 1):
        topics = {b.name: _topic(f"produce-{size}-{parts}") for b in brokers}
        for b in brokers:
            create_topic(b, topics[b.name], parts)
        key = f"{size}B acks={acks} p={parts} {comp}"
        config = {"value_size": size, "acks": acks, "partitions": parts, "compression": comp, "client": "librdkafka"}
        for run in range(p.runs):
            for b in brokers:
                args = {
                    "bootstrap": b.bootstrap,
                    "topic": topics[b.name],
                    "count": p.produce_cap[size],
                    "seconds": p.produce_seconds,
                    "value_size": size,
                    "acks": acks,
                    "compression": comp,
                }
                result = _measure(ctx, b, lambda a=args: run_worker("produce", a, p.produce_seconds + 90))
                result["bytes"] = result["acked"] * size
                ctx.record(b, "produce", key, result, config)
                ctx.say(f"{b.name} produce [{i}/{len(configs)}] {key} run {run + 1}/{p.runs}: {_fmt_rate(result)}")
        for b in brokers:
            delete_topic(b, topics[b.name])


def produce_java(ctx: Ctx, brokers: list[Broker]) -> None:
    java = ctx.java
    if java is None:
        return
    p = ctx.plan
    for i, (size, acks, parts, comp) in enumerate(p.java_configs, 1):
        topics = {b.name: _topic(f"jproduce-{size}-{parts}") for b in brokers}
        records = {}
        key = f"{size}B acks={acks} p={parts} {comp}"
        for b in brokers:
            create_topic(b, topics[b.name], parts)
            # About java_seconds of this broker's librdkafka rate for the same case (bounded either way).
            seen = ctx.results.get(b.name, {}).get("produce", {}).get(key)
            rate = sorted(r["msgs_per_s"] for r in seen["runs"])[len(seen["runs"]) // 2] if seen else 20_000
            records[b.name] = int(min(max(rate * p.java_seconds, 10_000), p.produce_cap[size]))
        config = {"value_size": size, "acks": acks, "partitions": parts, "compression": comp, "client": "java"}
        for run in range(p.runs):
            for b in brokers:
                job = (b.bootstrap, topics[b.name], records[b.name], size, acks, comp)
                result = _measure(ctx, b, lambda job=job: java.producer_perf(*job, timeout_s=240))
                result["bytes"] = result["records"] * size
                ctx.record(b, "produce_java", key, result, config)
                ctx.say(
                    f"{b.name} producer-perf-test [{i}/{len(p.java_configs)}] {key} run {run + 1}/{p.runs}: "
                    f"{_fmt_rate(result)}, ack p99 {result['p99']:.0f} ms"
                )
        for b in brokers:
            delete_topic(b, topics[b.name])


# ---- consume ---------------------------------------------------------------------------------------------


def _fill(
    ctx: Ctx,
    broker: Broker,
    topic: str,
    parts: int,
    size: int,
    total_bytes: int,
    seconds: float,
    extra: dict[str, Any] | None = None,
) -> int:
    count = max(total_bytes // size, 1000)
    args: dict[str, Any] = {
        "extra": extra or {},
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "count": count,
        "seconds": seconds,
        "value_size": size,
        "acks": "1",
        "compression": "none",
    }
    result = run_worker("produce", args, seconds + 120)
    total = sum(end_offsets(broker, topic, parts))
    ctx.say(f"{broker.name} filled {topic}: {total:,} messages of {size} B ({_fmt_rate(result)})")
    return total


def consume(ctx: Ctx, brokers: list[Broker]) -> None:
    p = ctx.plan
    parts = 6
    java = ctx.java
    for size, share in ((1024, 1.0), (100, 0.2)):
        topics = {b.name: _topic(f"consume-{size}") for b in brokers}
        totals = {}
        for b in brokers:
            create_topic(b, topics[b.name], parts)
            totals[b.name] = _fill(ctx, b, topics[b.name], parts, size, int(p.consume_bytes * share), p.consume_seconds)

        def load(
            b: Broker, mode: str, topics: dict[str, str] = topics, totals: dict[str, int] = totals, size: int = size
        ) -> dict[str, Any]:
            args = {
                "bootstrap": b.bootstrap,
                "topic": topics[b.name],
                "count": totals[b.name],
                "seconds": p.consume_seconds,
                "value_size": size,
            }
            return run_worker(mode, args, p.consume_seconds + 60)

        clients = [("librdkafka", "consume"), ("raw fetch", "fetchloop")]
        for client, mode in clients:
            for run in range(p.runs):
                for b in brokers:
                    config = {"value_size": size, "partitions": parts, "messages": totals[b.name], "client": client}
                    result = _measure(ctx, b, lambda b=b, mode=mode: load(b, mode))
                    ctx.record(b, "consume", f"warm {size}B {client}", result, config)
                    ctx.say(f"{b.name} consume warm {size} B {client} run {run + 1}/{p.runs}: {_fmt_rate(result)}")
        if java is not None:
            for run in range(p.runs):
                for b in brokers:
                    group = f"bench-{uuid.uuid4().hex[:8]}"
                    job = (b.bootstrap, topics[b.name], totals[b.name], group, p.consume_seconds)
                    result = _measure(ctx, b, lambda job=job: java.consumer_perf(*job))
                    result["bytes"] = result["mb"] * 1e6
                    config = {"value_size": size, "partitions": parts, "messages": totals[b.name], "client": "java"}
                    ctx.record(b, "consume", f"warm {size}B consumer-perf-test", result, config)
                    ctx.say(f"{b.name} consumer-perf-test warm {size} B run {run + 1}/{p.runs}: {_fmt_rate(result)}")
        if size == 1024 and p.cold:
            # Each run restarts the broker with its files out of the page cache, then reads it all once.
            for run in range(p.runs):
                for client, mode in clients:
                    for b in brokers:
                        if b.pid is None:
                            continue
                        b.stop()
                        files = b.data_files()
                        evicted = evict_page_cache(files)
                        left = cached_bytes(files)
                        restart_s = b.start()
                        result = _measure(ctx, b, lambda b=b, mode=mode: load(b, mode))
                        result.update(restart_s=restart_s, evicted_bytes=evicted[1], cached_after_evict=left)
                        config = {"value_size": size, "partitions": parts, "messages": totals[b.name], "client": client}
                        ctx.record(b, "consume", f"cold {size}B {client}", result, config)
                        ctx.say(
                            f"{b.name} consume cold {size} B {client} run {run + 1}/{p.runs} (restart {restart_s:.2f} s, "
                            f"{evicted[1] / 1e6:.0f} MB evicted, {(left or 0) / 1e6:.1f} MB still cached): {_fmt_rate(result)}"
                        )
        for b in brokers:
            delete_topic(b, topics[b.name])


# ---- latency at fixed rates --------------------------------------------------------------------------------


def _wait_ready(proc: subprocess.Popen[str], timeout_s: float) -> list[str]:
    """Until the e2e consumer says ``ready`` on stderr; the rest of its stderr keeps draining."""
    lines: list[str] = []
    ready = threading.Event()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if line.strip() == "ready":
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(timeout_s) or proc.poll() is not None:
        raise RuntimeError("e2e consumer not ready: " + "".join(lines)[-800:])
    return lines


def _latency_run(ctx: Ctx, broker: Broker, topic: str, rate: int) -> dict[str, Any]:
    p = ctx.plan
    count = int(rate * p.latency_seconds)
    consumer = subprocess.Popen(
        _worker_command(
            "e2e",
            {
                "bootstrap": broker.bootstrap,
                "topic": topic,
                "count": count,
                "seconds": p.latency_warmup + p.latency_seconds + 40,
            },
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        errors = _wait_ready(consumer, 30)
        args = {
            "bootstrap": broker.bootstrap,
            "topic": topic,
            "rate": rate,
            "seconds": p.latency_seconds,
            "warmup_s": p.latency_warmup,
            "value_size": p.latency_size,
            "acks": "all",
            "linger_ms": 1,
        }
        ack = _measure(ctx, broker, lambda: run_worker("paced", args, p.latency_warmup + p.latency_seconds + 90))
        stdout, _ = consumer.communicate(timeout=p.latency_warmup + p.latency_seconds + 60)
        return {"ack": ack, "e2e": _parse("e2e", stdout, "".join(errors), consumer.returncode)}
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()


def latency(ctx: Ctx, brokers: list[Broker]) -> None:
    p = ctx.plan
    topics = {b.name: _topic("latency") for b in brokers}
    for b in brokers:
        create_topic(b, topics[b.name], p.latency_partitions)
    config = {"value_size": p.latency_size, "partitions": p.latency_partitions, "acks": "all", "linger_ms": 1}
    for rate in p.rates:
        for run in range(p.runs):
            for b in brokers:
                result = _latency_run(ctx, b, topics[b.name], rate)
                ctx.record(b, "latency", str(rate), result, config | {"rate": rate})
                ack, e2e_result = result["ack"], result["e2e"]
                ctx.say(
                    f"{b.name} latency {rate:,} msg/s run {run + 1}/{p.runs}: achieved {ack['achieved_rate']:,.0f}/s; "
                    f"ack p50/p99/p99.9 {ack.get('p50', 0):.2f}/{ack.get('p99', 0):.2f}/{ack.get('p99.9', 0):.2f} ms; "
                    f"e2e {e2e_result.get('p50', 0):.2f}/{e2e_result.get('p99', 0):.2f}/{e2e_result.get('p99.9', 0):.2f} ms "
                    f"({e2e_result.get('count', 0):,} received; other load {ack.get('foreign_cpu_share') or 0:.0%})"
                )
    for b in brokers:
        delete_topic(b, topics[b.name])


# ---- scaling -------------------------------------------------------------------------------------------------


def scaling(ctx: Ctx, brokers: list[Broker]) -> None:
    p = ctx.plan
    size = 1024
    for parts in p.scale_partitions:
        topics = {b.name: _topic(f"scale-p{parts}") for b in brokers}
        for b in brokers:
            create_topic(b, topics[b.name], parts)
        for run in range(p.runs):
            for b in brokers:
                args = {
                    "bootstrap": b.bootstrap,
                    "topic": topics[b.name],
                    "count": p.produce_cap[size],
                    "seconds": p.produce_seconds,
                    "value_size": size,
                    "acks": "1",
                    "compression": "none",
                }
                result = _measure(ctx, b, lambda a=args: run_worker("produce", a, p.produce_seconds + 90))
                ctx.record(b, "scale_partitions", str(parts), result, {"value_size": size, "acks": "1"})
                ctx.say(f"{b.name} scaling {parts} partitions run {run + 1}/{p.runs}: {_fmt_rate(result)}")
        for b in brokers:
            delete_topic(b, topics[b.name])
    topics = {b.name: _topic("scale-conn") for b in brokers}
    for b in brokers:
        create_topic(b, topics[b.name], 6)
    for conns in p.scale_connections:
        for run in range(p.runs):
            for b in brokers:
                args = {
                    "bootstrap": b.bootstrap,
                    "topic": topics[b.name],
                    "count": p.produce_cap[size] // conns,
                    "seconds": p.produce_seconds,
                    "value_size": size,
                    "acks": "1",
                    "compression": "none",
                }

                def many(a: dict[str, Any] = args, n: int = conns) -> dict[str, Any]:
                    results = run_workers("produce", [a] * n, p.produce_seconds + 120)
                    elapsed = max(r["seconds"] for r in results)
                    acked = sum(r["acked"] for r in results)
                    return {
                        "acked": acked,
                        "seconds": elapsed,
                        "msgs_per_s": acked / elapsed,
                        "mb_per_s": acked * size / elapsed / 1e6,
                    }

                total = _measure(ctx, b, many)
                ctx.record(
                    b, "scale_connections", str(conns), total, {"value_size": size, "acks": "1", "partitions": 6}
                )
                ctx.say(f"{b.name} scaling {conns} producer connections run {run + 1}/{p.runs}: {_fmt_rate(total)}")
    for b in brokers:
        delete_topic(b, topics[b.name])


# ---- append / fetch latency with a large retained log ----------------------------------------------------------


def _probe(broker: Broker, topic: str, n: int, high: int, seed: int) -> dict[str, Any]:
    """``n`` single-batch Produce round trips (acks=all, one 1 KiB record) and ``n`` Fetch round trips
    at random offsets below ``high`` (at most 64 KiB each), each timed alone on one connection."""
    from bench_lib.workers import quantiles

    host, port = broker.host_port
    batch = build_batch([Record(value=b"x" * 1024)], base_timestamp=int(time.time() * 1000))
    produce = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    rng = random.Random(seed)
    appends, fetches = [], []
    with WireClient(host, port, timeout_s=30) as client:
        for _ in range(n):
            t0 = time.perf_counter()
            answer = client.request(0, 9, produce)
            appends.append((time.perf_counter() - t0) * 1000)
            assert answer.responses[0].partition_responses[0].error_code == 0
        top = max(high, 1)
        for _ in range(n):
            fetch = {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
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
                                "fetch_offset": rng.randrange(top),
                                "log_start_offset": -1,
                                "partition_max_bytes": 65536,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            t0 = time.perf_counter()
            answer = client.request(1, 12, fetch)
            fetches.append((time.perf_counter() - t0) * 1000)
            assert answer.responses[0].partitions[0].error_code == 0
    return {"append": quantiles(appends), "fetch": quantiles(fetches)}


def retained(ctx: Ctx, brokers: list[Broker]) -> None:
    p = ctx.plan
    topics = {b.name: _topic("retained") for b in brokers}
    totals = {}
    for b in brokers:
        create_topic(b, topics[b.name], 1)
        with _others_paused(ctx, b):
            empty = _probe(b, topics[b.name], p.probes, p.probes, 1)
        ctx.record(b, "retained", "empty", empty)
        ctx.say(f"{b.name} empty log: {_probe_text(empty)}")
    for b in brokers:
        # 16 KiB batches, like the probes' reads (64 KiB): a fetch never returns one whole 1 MB batch.
        totals[b.name] = _fill(ctx, b, topics[b.name], 1, 1024, p.retained_bytes, 240.0, {"batch.size": 16384})
    for b in brokers:
        with _others_paused(ctx, b):
            full = _probe(b, topics[b.name], p.probes, totals[b.name], 2)
        full["retained_messages"] = totals[b.name]
        ctx.record(b, "retained", f"{p.retained_bytes / 2**30:g} GiB retained", full)
        ctx.say(f"{b.name} {totals[b.name] * 1024 / 2**30:.2f} GiB retained: {_probe_text(full)}")
    for b in brokers:
        delete_topic(b, topics[b.name])


def _probe_text(r: dict[str, Any]) -> str:
    a, f = r["append"], r["fetch"]
    return f"append p50/p99 {a['p50']:.2f}/{a['p99']:.2f} ms, fetch p50/p99 {f['p50']:.2f}/{f['p99']:.2f} ms"
