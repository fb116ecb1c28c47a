"""Replicated produce (``bench.py --replicated``): a 3-node kafkalike cluster and a 3-node Apache
Kafka cluster of real processes on loopback, one after the other (never both at once), each with
topics of 6 partitions, replication factor 3 and min.insync.replicas=2, measured alike:

- produce throughput, 1 KiB values, acks=all: librdkafka producers in processes of their own
  and, when Java is present, kafka-producer-perf-test;
- produce-to-ack and end-to-end latency at a fixed 10k msg/s (acks=all, linger.ms=1);
- failover: a steady 1k msg/s to one partition, its leader SIGKILLed; the time from the kill to
  the first acknowledgement of a message sent after it (only a new leader can have acknowledged
  that one), when Metadata names the new leader, and what errors and retries the client saw.

Each node's CPU seconds (from /proc) are recorded for every measurement. The nodes, the load
generators and this harness share the machine's cores: on a 2-core machine three Python nodes
(one core each at most) and three JVMs alike compete with the clients for two cores.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_lib.javaperf import JavaTools
from bench_lib.procstat import cpu_seconds
from bench_lib.scenarios import _parse, _wait_ready, _worker_command, run_worker, run_workers

from kafkalike.testing.apache_kafka import ApacheKafkaCluster
from kafkalike.testing.cluster_requests import partition_isrs
from kafkalike.testing.process_cluster import KafkalikeCluster, ProcessCluster
from kafkalike.testing.wire_client import WireClient

Cluster = ProcessCluster[Any]  # kafkalike's or Apache Kafka's nodes
Say = Callable[[str], None]

NODES = 3
PARTITIONS = 6
REPLICATION_FACTOR = 3
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
VALUE_SIZE = 1024
PRODUCERS = 2
LATENCY_RATE = 10_000
FAILOVER_RATE = 1_000
PRODUCE_CAP = 2_000_000
WORKER_SLACK_S = 120.0
CREATE_TOPICS = 19
SUBJECT = "kafkalike"
REFERENCE = "apache-kafka"


@dataclass
class ReplicatedPlan:
    """How long each measurement runs; ``tiny()`` is the smoke-test variant."""

    runs: int = 2
    produce_seconds: float = 10.0
    latency_seconds: float = 10.0
    latency_warmup_s: float = 2.0
    warmup_seconds: float = 5.0
    steady_before_kill_s: float = 3.0
    acks_after_failover_s: float = 2.0
    failover_limit_s: float = 60.0
    java: bool = True
    produce_cap: int = PRODUCE_CAP  # messages per producer
    latency_rate: int = LATENCY_RATE
    failover_rate: int = FAILOVER_RATE

    @classmethod
    def tiny(cls) -> ReplicatedPlan:
        return cls(
            runs=1,
            produce_seconds=1.0,
            latency_seconds=1.0,
            latency_warmup_s=0.5,
            warmup_seconds=0.5,
            steady_before_kill_s=0.5,
            acks_after_failover_s=0.5,
            failover_limit_s=45.0,
            java=False,
            produce_cap=5_000,
            latency_rate=200,
            failover_rate=200,
        )


# ---- clusters and topics ----------------------------------------------------------------------------


def kafkalike_cluster(data_dir: Path, source: Path) -> Cluster:
    return KafkalikeCluster(NODES, data_dir, env={"PYTHONPATH": str(source)})


def kafka_cluster(data_dir: Path, lib: Path) -> Cluster:
    # 1 GiB heaps, as kafka-server-start.sh gives a broker by default.
    return ApacheKafkaCluster(NODES, data_dir=data_dir, lib_dir=lib, heap="1g")


def create_replicated_topic(cluster: Cluster, name: str, timeout_s: float = 60.0) -> None:
    """CreateTopics (6 partitions, RF=3, min.insync.replicas=2), then wait until every live
    broker's Metadata shows every partition with a leader and all three replicas in sync."""
    node = cluster.live_brokers()[0]
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": PARTITIONS,
                "replication_factor": REPLICATION_FACTOR,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in TOPIC_CONFIGS.items()],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    with WireClient(node.address.host, node.address.client_port, timeout_s=60) as client:
        code = client.request(CREATE_TOPICS, 5, body).topics[0].error_code
    if code != 0:
        raise RuntimeError(f"CreateTopics {name}: error {code}")
    cluster.wait_for(lambda: fully_replicated(cluster, name), f"{name} led and fully in sync", timeout_s)


def fully_replicated(cluster: Cluster, topic: str) -> bool:
    for node in cluster.live_brokers():
        leaders = cluster.partition_leaders(topic, via=node.node_id)
        isrs = partition_isrs(node.address, topic)
        if len(leaders) != PARTITIONS or -1 in leaders.values():
            return False
        if any(len(isrs.get(p, ())) != REPLICATION_FACTOR for p in range(PARTITIONS)):
            return False
    return True


class NodeCpu:
    """Each node's CPU seconds over a ``with`` block (utime + stime from /proc)."""

    def __init__(self, cluster: Cluster) -> None:
        self.pids = {n.node_id: n.pid for n in cluster.nodes}
        self.seconds: dict[int, float | None] = {}

    def __enter__(self) -> NodeCpu:
        self._before = {node: cpu_seconds(pid) for node, pid in self.pids.items()}
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.monotonic() - self._t0
        for node, pid in self.pids.items():
            before, after = self._before[node], cpu_seconds(pid)
            self.seconds[node] = None if before is None or after is None else after - before

    def annotate(self, run: dict[str, Any], loaded_s: float | None = None) -> dict[str, Any]:
        """``run`` with each node's CPU seconds and their share of one core over ``loaded_s`` (the
        load's own duration, without the load generators' start-up), or over the whole block."""
        span = loaded_s or self.wall_s
        run["node_cpu_s"] = {str(node): s for node, s in self.seconds.items()}
        run["node_cpu_share"] = {
            str(node): (s / span if s is not None and span > 0 else None) for node, s in self.seconds.items()
        }
        return run


# ---- the measurements --------------------------------------------------------------------------------


def produce_throughput(cluster: Cluster, topic: str, seconds: float, cap: int = PRODUCE_CAP) -> dict[str, Any]:
    """``PRODUCERS`` librdkafka producers as fast as they go (``cap`` messages each at most),
    acks=all, 1 KiB values."""
    load = {
        "bootstrap": cluster.bootstrap_servers,
        "topic": topic,
        "count": cap,
        "seconds": seconds,
        "value_size": VALUE_SIZE,
        "acks": "all",
        "compression": "none",
    }
    with NodeCpu(cluster) as cpu:
        results = run_workers("produce", [load] * PRODUCERS, seconds + WORKER_SLACK_S)
    acked = sum(r["acked"] for r in results)
    wall = max(r["seconds"] for r in results)
    run = {
        "acked": acked,
        "errors": sum(r["errors"] for r in results),
        "seconds": wall,
        "msgs_per_s": acked / wall,
        "mb_per_s": acked * VALUE_SIZE / wall / 1e6,
    }
    return cpu.annotate(run, wall)


def produce_java(cluster: Cluster, java: JavaTools, topic: str, records: int) -> dict[str, Any]:
    """kafka-producer-perf-test, acks=all, 1 KiB records, ``records`` of them."""
    with NodeCpu(cluster) as cpu:
        run = java.producer_perf(cluster.bootstrap_servers, topic, records, VALUE_SIZE, "all", "none", timeout_s=300)
    return cpu.annotate(run)


def latency(cluster: Cluster, topic: str, plan: ReplicatedPlan) -> dict[str, Any]:
    """Produce-to-ack (the paced producer) and end-to-end (a consumer at the log end) at
    ``plan.latency_rate`` (LATENCY_RATE)."""
    bootstrap = cluster.bootstrap_servers
    total_s = plan.latency_warmup_s + plan.latency_seconds
    consumer = subprocess.Popen(
        _worker_command(
            "e2e",
            {
                "bootstrap": bootstrap,
                "topic": topic,
                "count": int(plan.latency_rate * plan.latency_seconds),
                "seconds": total_s + 40,
            },
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        errors = _wait_ready(consumer, 60)
        args = {
            "bootstrap": bootstrap,
            "topic": topic,
            "rate": plan.latency_rate,
            "seconds": plan.latency_seconds,
            "warmup_s": plan.latency_warmup_s,
            "value_size": VALUE_SIZE,
            "acks": "all",
            "linger_ms": 1,
        }
        with NodeCpu(cluster) as cpu:
            ack = run_worker("paced", args, total_s + WORKER_SLACK_S)
        stdout, _ = consumer.communicate(timeout=total_s + 60)
        ack.pop("cdf", None)
        e2e = _parse("e2e", stdout, "".join(errors), consumer.returncode)
        e2e.pop("cdf", None)
        return cpu.annotate({"ack": ack, "e2e": e2e}, plan.latency_warmup_s + ack["seconds"])
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()


def pick_victim(cluster: Cluster, topic: str) -> tuple[int, int, int | None]:
    """(partition, its leader, the active controller): a partition whose leader is not the active
    controller when there is one, so that the kill measures a partition's failover, not the
    controller's as well."""
    leaders = cluster.partition_leaders(topic)
    try:
        controller: int | None = cluster.active_controller(timeout_s=10)
    except Exception:
        controller = None
    for partition in sorted(leaders):
        if leaders[partition] != controller:
            return partition, leaders[partition], controller
    return 0, leaders[0], controller


def watch_metadata_leader(
    cluster: Cluster, topic: str, partition: int, killed: int, t0: float, limit_s: float, out: dict[str, Any]
) -> None:
    """Poll a survivor's Metadata until it names a leader other than ``killed`` for the partition."""
    survivors = [n.node_id for n in cluster.live_brokers(exclude={killed})]
    while time.monotonic() < t0 + limit_s:
        for node in survivors:
            leader = cluster.leader(topic, partition, via=node)
            if leader not in (-1, killed):
                out.update(metadata_leader_s=time.monotonic() - t0, new_leader=leader)
                return
        time.sleep(0.01)


def failover(cluster: Cluster, topic: str, plan: ReplicatedPlan, say: Say) -> dict[str, Any]:
    """SIGKILL the leader of one partition under a steady ``plan.failover_rate`` to it; then
    start the node again and wait until the topic is fully in sync (ready for the next round)."""
    partition, victim, controller = pick_victim(cluster, topic)
    args = {
        "bootstrap": cluster.bootstrap_servers,
        "topic": topic,
        "partition": partition,
        "rate": plan.failover_rate,
        "seconds": plan.steady_before_kill_s + plan.failover_limit_s,
        "after_s": plan.acks_after_failover_s,
        "value_size": VALUE_SIZE,
        "acks": "all",
        "linger_ms": 1,
    }
    worker = subprocess.Popen(
        _worker_command("steady", args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    found: dict[str, Any] = {}
    try:
        errors = _wait_ready(worker, 60)
        time.sleep(plan.steady_before_kill_s)  # the steady load before the fault, as a duration
        assert worker.stdin is not None
        t0 = time.monotonic()
        killed_ns = time.monotonic_ns()
        cluster.node(victim).kill()
        worker.stdin.write(f"{killed_ns}\n")
        worker.stdin.flush()
        watcher = threading.Thread(
            target=watch_metadata_leader,
            args=(cluster, topic, partition, victim, t0, plan.failover_limit_s, found),
            daemon=True,
        )
        watcher.start()
        stdout, _ = worker.communicate(timeout=plan.steady_before_kill_s + plan.failover_limit_s + WORKER_SLACK_S)
        watcher.join(plan.failover_limit_s)
        result = _parse("steady", stdout, "".join(errors), worker.returncode)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    result.update(partition=partition, killed=victim, active_controller=controller, **found)
    restarted = time.monotonic()
    cluster.node(victim).start()
    cluster.wait_for(lambda: fully_replicated(cluster, topic), f"{topic} in sync again", plan.failover_limit_s * 2)
    result["rejoin_s"] = time.monotonic() - restarted
    return result


def measure(name: str, cluster: Cluster, plan: ReplicatedPlan, java: JavaTools | None, say: Say) -> dict[str, Any]:
    """Every measurement on one started cluster: ``plan.runs`` of each, the failover rounds last."""
    results: dict[str, Any] = {"produce": [], "produce_java": [], "latency": [], "failover": []}
    warm = "replicated-warmup"
    create_replicated_topic(cluster, warm)
    # A JVM compiles its hot paths first: both products get the same seconds of bulk and paced load.
    produce_throughput(cluster, warm, plan.warmup_seconds, plan.produce_cap)
    paced = {
        "bootstrap": cluster.bootstrap_servers,
        "topic": warm,
        "rate": plan.latency_rate,
        "seconds": plan.warmup_seconds,
        "value_size": VALUE_SIZE,
        "acks": "all",
        "linger_ms": 1,
    }
    run_worker("paced", paced, plan.warmup_seconds + WORKER_SLACK_S)
    say(f"{name}: warmed up")
    for run in range(plan.runs):
        topic = f"replicated-produce-{run}"
        create_replicated_topic(cluster, topic)
        r = produce_throughput(cluster, topic, plan.produce_seconds, plan.produce_cap)
        results["produce"].append(r)
        say(
            f"{name} produce acks=all RF=3 run {run + 1}/{plan.runs}: {r['msgs_per_s']:,.0f} msg/s, "
            f"{r['mb_per_s']:.1f} MB/s; node CPU {_cpu_text(r)}"
        )
        if java is not None and plan.java:
            records = int(min(max(r["msgs_per_s"] * plan.produce_seconds, 10_000), plan.produce_cap))
            j = produce_java(cluster, java, topic, records)
            results["produce_java"].append(j)
            say(
                f"{name} producer-perf-test run {run + 1}/{plan.runs}: {j['msgs_per_s']:,.0f} msg/s, "
                f"{j['mb_per_s']:.1f} MB/s, ack p99 {j['p99']:.0f} ms; node CPU {_cpu_text(j)}"
            )
        topic = f"replicated-latency-{run}"
        create_replicated_topic(cluster, topic)
        lat = latency(cluster, topic, plan)
        results["latency"].append(lat)
        ack, e2e = lat["ack"], lat["e2e"]
        say(
            f"{name} latency {plan.latency_rate:,} msg/s run {run + 1}/{plan.runs}: achieved {ack['achieved_rate']:,.0f}/s; "
            f"ack p50/p99 {ack.get('p50', 0):.2f}/{ack.get('p99', 0):.2f} ms; "
            f"e2e p50/p99 {e2e.get('p50', 0):.2f}/{e2e.get('p99', 0):.2f} ms; node CPU {_cpu_text(lat)}"
        )
    topic = "replicated-failover"
    create_replicated_topic(cluster, topic)
    for run in range(plan.runs):
        f = failover(cluster, topic, plan, say)
        results["failover"].append(f)
        say(f"{name} failover run {run + 1}/{plan.runs}: {failover_text(f)}")
    return results


def _cpu_text(run: dict[str, Any]) -> str:
    shares = run.get("node_cpu_share", {})
    return ", ".join(f"node {n} {s:.0%}" for n, s in shares.items() if s is not None) or "?"


def failover_text(f: dict[str, Any]) -> str:
    stall = f.get("failover_s")
    meta = f.get("metadata_leader_s")
    return (
        f"killed node {f['killed']} (leader of partition {f['partition']}; active controller {f['active_controller']}); "
        f"first ack of a later write after {'-' if stall is None else f'{stall:.2f} s'}, "
        f"Metadata named node {f.get('new_leader', '?')} after {'-' if meta is None else f'{meta:.2f} s'}; "
        f"delivery errors {f['delivery_errors'] or 0}, client errors {f['client_errors'] or 0}, "
        f"request retries {f['request_retries']}; rejoined in {f['rejoin_s']:.1f} s"
    )


def run_product(
    name: str, make: Callable[[Path], Cluster], work: Path, plan: ReplicatedPlan, java: JavaTools | None, say: Say
) -> dict[str, Any]:
    """Start ``name``'s cluster in ``work``, measure it, stop it and remove its data."""
    data = work / f"replicated-{name}"
    shutil.rmtree(data, ignore_errors=True)
    cluster = make(data)
    started = time.monotonic()
    say(f"{name}: starting {NODES} nodes")
    cluster.start()
    try:
        say(f"{name}: {NODES} nodes ready in {time.monotonic() - started:.1f} s")
        return measure(name, cluster, plan, java, say)
    finally:
        cluster.stop()
        shutil.rmtree(data, ignore_errors=True)


def run(
    out: Path,
    work: Path,
    plan: ReplicatedPlan,
    source: Path,
    lib: Path | None,
    java: JavaTools | None,
    meta: dict[str, Any],
    say: Say,
) -> int:
    """kafkalike's cluster, then (with ``lib``) Apache Kafka's; ``replicated.json`` and
    ``replicated.md`` in ``out``."""
    import json

    from bench_lib import report

    started = time.monotonic()
    results: dict[str, Any] = {}
    products: list[tuple[str, Callable[[Path], Cluster]]] = [(SUBJECT, lambda d: kafkalike_cluster(d, source))]
    if lib is not None:
        products.append((REFERENCE, lambda d: kafka_cluster(d, lib)))
    failures = []
    for name, make in products:
        try:
            results[name] = run_product(name, make, work, plan, java, say)
        except Exception as exc:  # the other product's figures are still worth a report
            say(f"{name} FAILED: {exc}")
            failures.append(f"{name}: {str(exc)[:300]}")
    meta = meta | {"seconds": time.monotonic() - started, "plan": vars(plan), "failures": failures}
    summary = report.replicated_summary(results)
    goals = report.replicated_targets(summary)
    (out / "replicated.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "targets": goals, "results": results}, indent=1, default=str)
    )
    (out / "replicated.md").write_text(report.replicated_markdown(summary, goals, meta))
    say(f"replicated produce done in {meta['seconds'] / 60:.1f} min: {out / 'replicated.md'}")
    for t in goals:
        say(f"target {t['name']}: {t['value']} -> {t['status']}")
    return 1 if failures else 0
