#!/usr/bin/env python3
"""Broker benchmark, one command:

    python scripts/bench.py                      # kafkalike alone, full plan (~25 min)
    python scripts/bench.py --reference=kafka    # side by side with Apache Kafka 4.x (~50 min)
    python scripts/bench.py --bootstrap HOST:PORT  # side by side with any running broker
    python scripts/bench.py --baseline-tree DIR  # side by side with kafkalike from another checkout
    python scripts/bench.py --quick              # smoke test: small sizes, one run (~2 min)
    python scripts/bench.py --cluster-brokers 1,2,3  # produce/consume throughput per cluster size
    python scripts/bench.py --replicated --runs 2   # 3-node kafkalike vs 3-node Apache Kafka, RF=3 (~15 min)
    python scripts/bench.py --many-partitions 1000,10000 --reference=kafka  # partition count alone, 3 nodes

Starts ``kafkalike serve`` (and, with ``--reference=kafka``, Apache Kafka in KRaft mode from the
Maven Central jars the compatibility suite resolves) on 127.0.0.1 with a fresh data directory, and
measures, each scenario ``--runs`` times (medians and min-max reported):

- produce throughput (msg/s, MB/s): 100 B and 1 KiB values, acks=1 and acks=all, 1 and 6
  partitions, none/lz4/zstd, with librdkafka (confluent-kafka in its own process) and with
  ``kafka-producer-perf-test`` (org.apache.kafka.tools.ProducerPerformance) when Java is present;
- consume throughput from the page cache (librdkafka and ``kafka-consumer-perf-test``) and from a
  cold start: the broker restarted and its data files evicted from the page cache with
  POSIX_FADV_DONTNEED (only the broker's own files; nothing machine-wide);
- end-to-end latency p50/p99/p99.9 and produce-to-ack latency at fixed rates (1k, 10k, 50k msg/s);
- start-up (exec to first Metadata answer), RSS idle and under load, broker CPU seconds per GB
  moved (from /proc/PID/stat);
- scaling: produce throughput vs partitions (1, 6, 24, 96) and vs producer connections; append and
  fetch round trips on an empty log vs one with 1 GiB retained (deleted afterwards).

Writes ``results.json``, ``report.md`` (with ratios to the reference) and PNG plots to
``bench_results/<date-time>/`` (``--results DIR``); progress goes to stderr. ``--only`` picks
scenarios (startup, produce, java, consume, latency, scaling, retained). ``--profile`` instead
records the kafkalike broker with py-spy under produce and consume load (flame graphs);
``--render DIR`` redoes a results directory's report and plots from its results.json.
``--cluster-brokers 1,2,3`` instead measures produce and consume throughput of kafkalike clusters
of those sizes (bench_lib/cluster.py; ``cluster.md`` and ``cluster.json`` in the results directory).
``--replicated`` instead measures replicated produce (bench_lib/replicated.py): a 3-node kafkalike
cluster, then a 3-node Apache Kafka cluster (4.4.0 unless ``--ak-version``; ``--reference none``
leaves it out), topics of 6 partitions, RF=3, min.insync.replicas=2: 1 KiB acks=all throughput
(librdkafka, kafka-producer-perf-test), produce-to-ack and end-to-end latency at 10k msg/s, and the
failover time when a partition leader is SIGKILLed under 1k msg/s (``--seconds`` per produce and
latency run; ``replicated.md`` and ``replicated.json`` in the results directory).
``--many-partitions 1000,10000`` instead measures what partition count alone costs a 3-node cluster
(bench_lib/partitions.py; ``partitions.md`` and ``partitions.json``).
Needs ``pip install -e '.[test,bench]'`` (confluent-kafka, matplotlib, py-spy).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from bench_lib import report, scenarios  # noqa: E402
from bench_lib.brokers import ApacheKafkaBroker, Broker, ExternalBroker, KafkalikeBroker  # noqa: E402
from bench_lib.javaperf import JavaTools, have_java, resolve_lib  # noqa: E402

SCENARIOS = ("startup", "produce", "java", "consume", "latency", "scaling", "retained")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, one run (a smoke test, ~2 min)")
    parser.add_argument(
        "--reference", choices=("none", "kafka"), help="also run Apache Kafka (default: none; kafka with --replicated)"
    )
    parser.add_argument("--bootstrap", help="also measure the broker at HOST:PORT (as the reference)")
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        metavar="DIR",
        help="the reference is kafkalike run from another checkout (a before/after comparison)",
    )
    parser.add_argument(
        "--ak-version",
        help="Apache Kafka version for --reference=kafka and the tools (default 4.0.2; 4.4.0 with --replicated)",
    )
    parser.add_argument(
        "--kafka-lib",
        type=Path,
        metavar="DIR",
        help="Apache Kafka's jars (and its tools') from DIR, instead of resolving",
    )
    parser.add_argument("--runs", type=int, help="runs per measurement (default 3, quick 1)")
    parser.add_argument(
        "--cluster-brokers",
        metavar="N,N,...",
        help="only measure produce/consume throughput of kafkalike clusters of these sizes (e.g. 1,2,3)",
    )
    parser.add_argument(
        "--many-partitions",
        metavar="N,N,...",
        help="only measure 3-node clusters holding N partitions (RF=3): creation, memory per replica, Metadata, "
        "controller failover, restart (bench_lib/partitions.py); beside Apache Kafka with --reference=kafka",
    )
    parser.add_argument(
        "--replicated",
        action="store_true",
        help="only measure replicated produce: 3-node kafkalike vs 3-node Apache Kafka, RF=3 (bench_lib/replicated.py)",
    )
    parser.add_argument("--seconds", type=float, help="--replicated: seconds per produce and latency run (default 10)")
    parser.add_argument("--only", default=",".join(SCENARIOS), help=f"comma-separated: {', '.join(SCENARIOS)}")
    parser.add_argument("--no-java", action="store_true", help="skip Kafka's perf tools even if Java is present")
    parser.add_argument("--results", type=Path, help="output directory (default bench_results/<date-time>)")
    parser.add_argument(
        "--work", type=Path, help="broker data directories (default <results>/work, removed at the end)"
    )
    parser.add_argument("--profile", action="store_true", help="py-spy flame graphs of kafkalike under load, then exit")
    parser.add_argument("--profile-seconds", type=float, default=20.0)
    parser.add_argument(
        "--render", type=Path, metavar="DIR", help="only redo DIR's report.md and plots from its results.json"
    )
    args = parser.parse_args(argv)
    if args.reference is None:
        args.reference = "kafka" if args.replicated else "none"
    if args.ak_version is None:
        args.ak_version = "4.4.0" if args.replicated or args.many_partitions else "4.0.2"
    if args.replicated and (args.cluster_brokers or args.bootstrap or args.baseline_tree or args.profile):
        parser.error(
            "--replicated runs clusters of its own; no --cluster-brokers, --bootstrap, --baseline-tree or --profile"
        )
    args.only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = args.only - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    if sum([args.reference == "kafka", bool(args.bootstrap), bool(args.baseline_tree)]) > 1:
        parser.error("--reference=kafka, --bootstrap and --baseline-tree each name a reference; pick one")
    if args.baseline_tree and not (args.baseline_tree / "kafkalike" / "__init__.py").is_file():
        parser.error(f"--baseline-tree {args.baseline_tree} holds no kafkalike package")
    return args


def machine() -> str:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
        mem_gib = int(mem.split()[1]) / 2**20
    except (OSError, StopIteration):
        mem_gib = 0.0
    return f"{os.cpu_count()} cores ({model}), {mem_gib:.0f} GiB RAM, Linux {platform.release()}"


def software(java: bool) -> str:
    import confluent_kafka

    parts = [f"Python {platform.python_version()}", f"librdkafka {confluent_kafka.libversion()[0]}"]
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        parts.append(f"kafkalike {commit}{' + local changes' if dirty else ''}")
    except (OSError, subprocess.TimeoutExpired):
        pass
    if java and shutil.which("java"):
        ran = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
        parts.append((ran.stderr or ran.stdout).splitlines()[0])
    return ", ".join(parts)


def run_brokers(ctx: scenarios.Ctx, brokers: list[Broker]) -> None:
    """Every broker up at once; each scenario alternates between them run by run, so slow drifts in
    the machine's other load hit both alike."""
    up: list[Broker] = []
    try:
        for broker in brokers:
            ctx.say(f"starting {broker.name}")
            try:
                seconds = broker.start()
            except Exception as exc:
                ctx.say(f"{broker.name} FAILED to start: {exc}")
                ctx.notes.append(f"{broker.name}: failed to start: {str(exc)[:300]}")
                broker.close()
                continue
            up.append(broker)
            ctx.say(f"{broker.name} up on {broker.bootstrap}" + (f" in {seconds:.2f} s" if seconds is not None else ""))
        ctx.brokers = up
        scenarios.warm_up(ctx, up)
        steps = [
            ("produce", scenarios.produce_matrix),
            ("java", scenarios.produce_java),
            ("consume", scenarios.consume),
            ("latency", scenarios.latency),
            ("scaling", scenarios.scaling),
            ("retained", scenarios.retained),
        ]
        for name, step in steps:
            if ctx.wants(name):
                try:
                    step(ctx, up)
                except Exception as exc:  # one failing scenario must not lose the others' numbers
                    tails = "\n".join(b.output_tail() for b in up)
                    ctx.say(f"{name} FAILED: {exc}\n{tails}")
                    ctx.notes.append(f"scenario {name} failed: {str(exc)[:300]}")
    finally:
        for broker in up:
            broker.close()


def render(out: Path) -> int:
    """Summary, targets, report.md and plots again from ``out/results.json`` (after a report change)."""
    saved = json.loads((out / "results.json").read_text())
    meta, results = saved["meta"], saved["results"]
    ref = next((b for b in meta["brokers"] if b != report.SUBJECT), None)
    summary = report.summarize(results)
    goals = report.targets(summary, ref, None)
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "targets": goals, "results": results}, indent=1, default=str)
    )
    (out / "report.md").write_text(report.markdown(summary, meta, ref, goals))
    report.plots(results, summary, out)
    return 0


def replicated(args: argparse.Namespace, out: Path, work: Path, java_ok: bool, say: Any) -> int:
    """``--replicated``: kafkalike's 3-node cluster, then Apache Kafka's (bench_lib/replicated.py)."""
    from bench_lib import replicated as bench_replicated

    plan = bench_replicated.ReplicatedPlan.tiny() if args.quick else bench_replicated.ReplicatedPlan()
    if args.runs:
        plan.runs = args.runs
    if args.seconds:
        plan.produce_seconds = plan.latency_seconds = args.seconds
    lib = args.kafka_lib or (
        resolve_lib(args.ak_version, work, say) if (java_ok or args.reference == "kafka") else None
    )
    java = JavaTools(lib, work / "java") if (lib is not None and java_ok) else None
    plan.java = java is not None
    meta = {
        "command": "python scripts/bench.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "software": software(java is not None)
        + (f", Apache Kafka {args.ak_version}" if args.reference == "kafka" else ""),
    }
    say(f"results in {out}; replicated produce, {plan.runs} run(s) each")
    try:
        return bench_replicated.run(out, work, plan, ROOT, lib if args.reference == "kafka" else None, java, meta, say)
    finally:
        if not args.work:
            shutil.rmtree(work / "java", ignore_errors=True)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.render:
        return render(args.render)
    plan = scenarios.Plan.quick() if args.quick else scenarios.Plan()
    if args.runs:
        plan.runs = args.runs
        plan.startup_runs = args.runs
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.results or ROOT / "bench_results" / (stamp + ("-quick" if args.quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    work = args.work or out / "work"
    started = time.monotonic()
    date = time.strftime("%Y-%m-%d %H:%M %Z")

    # Bytecode caching for every Python process started here (brokers, load generators), kept in
    # the work directory: an installed package has its modules compiled, and a start-up time that
    # includes compiling them (PYTHONDONTWRITEBYTECODE) measures something no user sees twice.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")

    java_ok = have_java() and not args.no_java
    lib = None
    notes: list[str] = []

    def say(message: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    if args.cluster_brokers:
        from bench_lib import cluster

        sizes = [int(n) for n in args.cluster_brokers.split(",") if n.strip()]
        return cluster.run(out, work, sizes, args.runs or (1 if args.quick else 3), say)

    if args.replicated:
        return replicated(args, out, work, java_ok, say)

    if args.many_partitions:
        from bench_lib import partitions

        counts = [int(n) for n in args.many_partitions.split(",") if n.strip()]
        kafka_lib = (args.kafka_lib or resolve_lib(args.ak_version, work, say)) if args.reference == "kafka" else None
        return partitions.run(out, work, counts, kafka_lib, say)

    if java_ok or args.reference == "kafka":
        lib = resolve_lib(args.ak_version, work, say)
        if lib is None:
            notes.append("Apache Kafka jars unavailable: no Java tools, no Apache Kafka reference")
    java = JavaTools(lib, work / "java") if (lib is not None and java_ok) else None
    if java is None:
        args.only.discard("java")
        notes.append("no Java perf tools in this run (no Java, --no-java, or no jars)")

    if args.profile:
        from bench_lib.profiling import profile

        return profile(out, work, args.profile_seconds, say)

    ctx = scenarios.Ctx(plan, work, java, args.only)
    ctx.notes = notes
    say(f"results in {out}; plan: {'quick' if args.quick else 'full'}, {plan.runs} run(s) each")

    def make_kafkalike(tag: str) -> Broker:
        return KafkalikeBroker(work / f"kafkalike-{tag}")

    def make_kafka(tag: str) -> Broker:
        assert lib is not None
        return ApacheKafkaBroker(lib, work / f"kafka-{tag}", args.ak_version)

    makers: list[tuple[str, Any]] = [("kafkalike", make_kafkalike)]
    ref_name: str | None = None
    if args.reference == "kafka" and lib is not None:
        makers.append(("apache-kafka", make_kafka))
        ref_name = "apache-kafka"
    elif args.bootstrap:
        makers.append(("external", lambda tag: ExternalBroker(args.bootstrap)))
        ref_name = "external"
    elif args.baseline_tree:
        ref_name = "kafkalike-baseline"
        tree = args.baseline_tree.resolve()
        makers.append((ref_name, lambda tag: KafkalikeBroker(work / f"baseline-{tag}", source=tree, name=ref_name)))

    try:
        if ctx.wants("startup"):
            try:
                scenarios.startup(ctx, [(n, m) for n, m in makers if n != "external"])
            except Exception as exc:
                say(f"start-up FAILED: {exc}")
                notes.append(f"start-up failed: {str(exc)[:300]}")
        if ctx.only - {"startup"}:
            run_brokers(ctx, [make("main") for _, make in makers])
    finally:
        if not args.work:
            shutil.rmtree(work / "java", ignore_errors=True)
            for child in work.glob("*"):
                if child.is_dir() and not child.name.endswith("-lib"):
                    shutil.rmtree(child, ignore_errors=True)
            if work.exists() and not any(work.iterdir()):
                work.rmdir()

    summary = report.summarize(ctx.results)
    plan_notes = [
        "load: librdkafka producers/consumers run in separate processes (linger.ms=5 for throughput, 1 for latency); "
        "Java tools with batch.size=65536, linger.ms=5; both brokers get the same clients and settings",
        f"latency: {plan.latency_size} B values, acks=all, {plan.latency_partitions} partition(s), "
        f"{plan.latency_seconds:.0f} s per rate; end-to-end = consumer receive time - send time in the value (CLOCK_MONOTONIC)",
        "cold consume: broker restarted and its data files dropped from the page cache with posix_fadvise(DONTNEED)",
        "start-up: exec to the first Metadata answer on a fresh data directory; Python bytecode cached as for an "
        "installed package (the 'first start' row is the run that compiles it)",
        "kafkalike is one Python process (one core at most); Apache Kafka uses every core; load generators share the same cores",
        "MB = 10^6 bytes of message values",
    ]
    meta = {
        "command": "python scripts/bench.py " + " ".join(argv),
        "date": date,
        "seconds": time.monotonic() - started,
        "machine": machine(),
        "software": software(java is not None or ref_name == "apache-kafka")
        + (f", Apache Kafka {args.ak_version}" if ref_name == "apache-kafka" else ""),
        "brokers": [n for n, _ in makers],
        "rss_under_load_mib": {b: v / 2**20 for b, v in ctx.rss_load.items()},
        "notes": plan_notes + notes,
        "plan": {k: v for k, v in vars(plan).items()},
    }
    shares = {
        b: sorted(
            r["foreign_cpu_share"]
            for sec in secs.values()
            for e in sec.values()
            for r in e["runs"]
            if isinstance(r, dict) and r.get("foreign_cpu_share") is not None
        )
        for b, secs in ctx.results.items()
    }
    for b, values in shares.items():
        if values:
            meta["notes"].append(
                f"while {b} was measured, other processes used a median {values[len(values) // 2]:.0%} "
                f"(max {values[-1]:.0%}) of the machine's CPUs"
            )
    goals = report.targets(summary, ref_name, plan)
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "targets": goals, "results": ctx.results}, indent=1, default=str)
    )
    (out / "report.md").write_text(report.markdown(summary, meta, ref_name, goals))
    pngs = report.plots(ctx.results, summary, out)
    say(f"done in {meta['seconds'] / 60:.1f} min: {out / 'report.md'}, results.json, {len(pngs)} plots")
    for t in goals:
        say(f"target {t['name']}: {t['value']} -> {t['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
