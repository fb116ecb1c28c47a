"""One chaos run against one target: start the namespaced cluster, create the topic, start the
clients, inject the schedule's faults one after the other (each healed, and the cluster settled,
before the next), stop the producers, read everything back and account for it."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from chaos_lib.accounting import LeaderLoss, TimedAck, Verdict, acknowledged_fraction, check, failover_times, p50_max
from chaos_lib.clients import GroupConsumer, JavaProducer, PythonProducer, read_everything
from chaos_lib.cluster import CLIENT_PORT, Cluster, build_broker, build_cluster
from chaos_lib.grow import BALANCE_TIMEOUT_S, GrowthFailed, KafkaTools, elect_preferred, half_onto, reassign
from chaos_lib.network import NodeNetwork
from chaos_lib.schedule import (
    ISOLATE_NODE,
    KILL_CONTROLLER,
    KILL_LEADER,
    KILL_NODE,
    PAUSE_NODE,
    STRAND_LEADER,
    Fault,
)
from kafkalike.testing.apache_kafka import kafka_jvm_options
from kafkalike.testing.cluster_requests import partition_leaders
from kafkalike.testing.process_cluster import NodeExited, NodeNotReady

TOPIC = "chaos"
PARTITIONS = 6
REPLICATION_FACTOR = 3
NODES = 3
GROUP = "chaos-readers"
SETTLE_TIMEOUT_S = 180.0
RESTART_TIMEOUT_S = 180.0
WARMUP_TIMEOUT_S = 90.0
FINAL_READ_TIMEOUT_S = 300.0
POLL_S = 0.25


class SetupFailed(RuntimeError):
    """The run could not be carried out: the cluster did not start, the topic could not be
    created, no write was acknowledged, or a node did not come back after a fault."""


@dataclass
class Options:
    target: str
    seed: int
    faults: list[Fault]
    unsafe: bool
    rate: float  # records a second, per producer
    kafka_lib: Path | None  # Kafka's jars: the kafka target's nodes, and the Java producer's client
    root: Path  # the tree whose kafkalike the kafkalike target runs
    java_classpath: str | None  # kafka-clients for the Java producer (None: no Java producer)
    log: Callable[[str], None] = print
    grow: bool = False  # the growth phase first (chaos_lib/grow.py): needs kafka_lib for Kafka's tools


@dataclass
class Outcome:
    label: str
    verdict: Verdict | None = None
    setup_error: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    availability: float | None = None
    failover: dict[str, float] | None = None
    failover_unmeasured: int = 0
    failover_by_kind: dict[str, dict[str, float]] = field(default_factory=dict)
    producers: dict[str, dict[str, Any]] = field(default_factory=dict)
    consumers: dict[str, dict[str, Any]] = field(default_factory=dict)
    final_read_problems: list[str] = field(default_factory=list)
    settle_timeouts: int = 0
    duration_s: float = 0.0
    growth: list[dict[str, Any]] = field(default_factory=list)  # the growth phase's steps
    balanced: bool | None = None  # after the growth phase: every partition led by its first replica

    @property
    def ok(self) -> bool:
        verdict_ok = self.setup_error is None and self.verdict is not None and self.verdict.ok
        return verdict_ok and self.balanced is not False

    def as_dict(self) -> dict[str, Any]:
        verdict = None
        if self.verdict is not None:
            v = self.verdict
            verdict = {
                "ok": v.ok,
                "acked": v.acked,
                "final_records": v.final_records,
                "seen_records": v.seen_records,
                **{name: getattr(v, name) for name in (*v.INVARIANTS, "acked_without_offset", "foreign")},
                "lost_by_partition": v.lost_by_partition,
                "examples": v.examples,
            }
        return {
            "target": self.label,
            "ok": self.ok,
            "setup_error": self.setup_error,
            "verdict": verdict,
            "acknowledged_fraction_while_majority_up": self.availability,
            "failover_s": self.failover,
            "failover_unmeasured": self.failover_unmeasured,
            "failover_s_by_fault": self.failover_by_kind,
            "producers": self.producers,
            "consumers": self.consumers,
            "final_read_problems": self.final_read_problems,
            "settle_timeouts": self.settle_timeouts,
            "duration_s": round(self.duration_s, 1),
            "events": self.events,
            "growth": self.growth,
            "leaders_balanced": self.balanced,
        }


class Run:
    def __init__(self, options: Options, cluster: Cluster, network: NodeNetwork) -> None:
        self.options = options
        self.cluster = cluster
        self.network = network
        self.bootstrap = ",".join(f"{node.address.host}:{CLIENT_PORT}" for node in cluster.nodes)
        self.voters = {node.node_id for node in cluster.nodes}
        self.down: set[int] = set()  # nodes killed, paused or isolated right now
        self.down_lock = threading.Lock()
        self.losses: list[LeaderLoss] = []
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 10000})
        self.t0 = time.monotonic()

    def log(self, text: str) -> None:
        self.options.log(f"[{time.monotonic() - self.t0:7.1f} s] {text}")

    def majority_up(self) -> bool:
        with self.down_lock:
            return NODES - len(self.down & self.voters) > NODES // 2

    def mark(self, node_id: int, down: bool) -> None:
        with self.down_lock:
            (self.down.add if down else self.down.discard)(node_id)

    # -- the topic and the cluster's state ---------------------------------------------------------

    def create_topic(self) -> None:
        config = {"min.insync.replicas": "2"}
        if self.options.unsafe:
            config = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
        futures = self.admin.create_topics(
            [NewTopic(TOPIC, PARTITIONS, REPLICATION_FACTOR, config=config)], request_timeout=30
        )
        try:
            futures[TOPIC].result(60)
        except KafkaException as exc:
            error = exc.args[0]
            raise SetupFailed(
                f"CreateTopics {TOPIC} (partitions {PARTITIONS}, replication factor {REPLICATION_FACTOR}, "
                f"{config}): {error.name()}: {error.str()}"
            ) from exc

    def leaders(self) -> dict[int, int]:
        """Partition -> leader id, from Metadata asked of a node that is up and reachable."""
        for node in self.cluster.live_nodes(exclude=self.network.isolated):
            found = partition_leaders(node.address, TOPIC)
            if len(found) == PARTITIONS:
                return found
        return {}

    def healthy(self) -> bool:
        """Every node is a broker in Metadata and every partition has a leader and all its replicas in sync."""
        try:
            metadata = self.admin.list_topics(TOPIC, timeout=5)
        except KafkaException:
            return False
        if len(metadata.brokers) < NODES:
            return False
        topic = metadata.topics.get(TOPIC)
        if topic is None or topic.error is not None or len(topic.partitions) != PARTITIONS:
            return False
        return all(p.leader >= 0 and len(p.isrs) == REPLICATION_FACTOR for p in topic.partitions.values())

    def settle(self) -> bool:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.healthy():
                return True
            time.sleep(POLL_S)
        return False

    def replicas(self) -> dict[int, list[int]]:
        metadata = self.admin.list_topics(TOPIC, timeout=10)
        return {p: list(m.replicas) for p, m in metadata.topics[TOPIC].partitions.items()}

    def leaders_preferred(self) -> dict[int, tuple[int, int]]:
        """Partition -> (leader, first replica) where they differ."""
        metadata = self.admin.list_topics(TOPIC, timeout=10)
        partitions = metadata.topics[TOPIC].partitions.values()
        return {m.id: (m.leader, m.replicas[0]) for m in partitions if m.leader != m.replicas[0]}

    def grow(self, outcome: Outcome, data_dir: Path) -> None:
        """The growth phase (chaos_lib/grow.py): a broker joins, half the partitions move onto
        it, a rolling restart of every node, then the preferred leaders."""
        options = self.options
        if options.kafka_lib is None:
            raise SetupFailed("--grow needs Apache Kafka's jars (its reassignment and election tools)")
        new_id = NODES + 1
        started = time.monotonic()
        node = build_broker(
            options.target,
            self.network,
            data_dir,
            new_id,
            self.cluster,
            {},
            kafka_lib=options.kafka_lib,
            root=options.root,
        )
        self.log(f"adding broker {new_id} (broker only) at {node.address.host}")
        node.prepare(self.cluster.cluster_id)
        node.start(RESTART_TIMEOUT_S)
        self.cluster.nodes.append(node)
        self.cluster.wait_for(lambda: new_id in self.cluster.metadata_brokers(), f"broker {new_id} in Metadata", 60)
        outcome.growth.append({"kind": "add-broker", "node": new_id, "seconds": round(time.monotonic() - started, 1)})
        tools = KafkaTools(options.kafka_lib, self.bootstrap, data_dir)
        try:
            moves = half_onto(new_id, self.replicas())
            outcome.growth.append(reassign(tools, TOPIC, [*sorted(self.voters), new_id], moves, self.log))
            if not self.settle():
                raise SetupFailed("no full ISR after the reassignment")
            for node_id in [*sorted(self.voters), new_id]:
                began = time.monotonic()
                self.log(f"rolling restart: SIGTERM node {node_id}")
                self.mark(node_id, True)
                self.cluster.node(node_id).stop(60.0)
                stopped_s = time.monotonic() - began
                self.cluster.node(node_id).start(RESTART_TIMEOUT_S)
                self.mark(node_id, False)
                settled = self.settle()
                outcome.growth.append(
                    {
                        "kind": "restart",
                        "node": node_id,
                        "stopped_s": round(stopped_s, 1),
                        "seconds": round(time.monotonic() - began, 1),
                        "settled": settled,
                    }
                )
                if not settled:
                    outcome.settle_timeouts += 1
            elect_preferred(tools, self.log)
        except GrowthFailed as exc:
            raise SetupFailed(f"growth phase: {exc}") from exc
        deadline = time.monotonic() + BALANCE_TIMEOUT_S
        while (off := self.leaders_preferred()) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        leaders = {p: r[0] for p, r in self.replicas().items()}
        per_broker = {n: sum(1 for r in self.replicas().values() if r[0] == n) for n in [*sorted(self.voters), new_id]}
        outcome.balanced = not off
        outcome.growth.append(
            {
                "kind": "preferred-leaders",
                "not_preferred": {str(p): v for p, v in off.items()},
                "preferred": leaders,
                "per_broker": per_broker,
            }
        )
        self.log(
            f"leaders {'all preferred' if not off else f'NOT preferred for {off}'}; preferred leaders per broker {per_broker}"
        )

    # -- faults ------------------------------------------------------------------------------------

    def kill(self, node_id: int, led: dict[int, int]) -> list[int]:
        """SIGKILL ``node_id``, noting a lost leader for each partition it led: those partitions."""
        self.mark(node_id, True)
        killed_s = time.monotonic()
        self.cluster.node(node_id).kill()
        gone_s = time.monotonic()
        lost = sorted(partition for partition, leader in led.items() if leader == node_id)
        self.losses.extend(LeaderLoss(partition, killed_s, gone_s) for partition in lost)
        return lost

    def restart(self, node_id: int) -> None:
        self.cluster.node(node_id).start(RESTART_TIMEOUT_S)
        self.mark(node_id, False)

    def inject(self, fault: Fault) -> dict[str, Any]:
        led = self.leaders()
        event: dict[str, Any] = {**fault.as_dict(), "at_s": round(time.monotonic() - self.t0, 1), "leaders": led}
        if fault.kind in (KILL_LEADER, KILL_CONTROLLER, KILL_NODE):
            if fault.kind == KILL_LEADER:
                victim = led.get(fault.partition, -1)
            elif fault.kind == KILL_CONTROLLER:
                victim = self.cluster.active_controller(timeout_s=60)
            else:
                victim = fault.node_id
            if victim < 0:
                event["skipped"] = f"no leader of partition {fault.partition} known"
                return event
            event["victim"] = victim
            self.log(f"SIGKILL node {victim} ({fault.describe()})")
            event["leaders_lost"] = self.kill(victim, led)
            time.sleep(fault.hold_s)  # the fault's duration, from the schedule
            self.restart(victim)
        elif fault.kind == PAUSE_NODE:
            event["victim"] = fault.node_id
            self.log(f"SIGSTOP node {fault.node_id} for {fault.hold_s:.1f} s")
            self.mark(fault.node_id, True)
            self.cluster.node(fault.node_id).pause()
            time.sleep(fault.hold_s)
            self.cluster.node(fault.node_id).resume()
            self.mark(fault.node_id, False)
        elif fault.kind == ISOLATE_NODE:
            event["victim"] = fault.node_id
            self.log(f"isolate node {fault.node_id} for {fault.hold_s:.1f} s")
            self.mark(fault.node_id, True)
            self.network.isolate(fault.node_id)
            time.sleep(fault.hold_s)
            self.network.heal(fault.node_id)
            self.mark(fault.node_id, False)
        elif fault.kind == STRAND_LEADER:
            self.strand(fault, led, event)
        else:
            raise ValueError(f"unknown fault {fault.kind}")
        return event

    def strand(self, fault: Fault, led: dict[int, int], event: dict[str, Any]) -> None:
        """SIGSTOP the followers, let the leader take writes alone, SIGKILL it, SIGCONT the followers."""
        leader = led.get(fault.partition, -1)
        if leader < 0:
            event["skipped"] = f"no leader of partition {fault.partition} known"
            return
        followers = [n for n in self.network.node_ids if n != leader]
        event["victim"] = leader
        self.log(f"SIGSTOP nodes {followers}, the leader {leader} of partition {fault.partition} alone")
        for node_id in followers:
            self.mark(node_id, True)
            self.cluster.node(node_id).pause()
        time.sleep(fault.hold_s)
        self.log(f"SIGKILL node {leader}, SIGCONT nodes {followers}")
        event["leaders_lost"] = self.kill(leader, led)
        for node_id in followers:
            self.cluster.node(node_id).resume()
            self.mark(node_id, False)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline and self.leaders().get(fault.partition, -1) in (-1, leader):
            time.sleep(POLL_S)
        event["new_leader"] = self.leaders().get(fault.partition, -1)
        self.restart(leader)


def failover_by_kind(events: list[dict[str, Any]], times: list[float | None]) -> dict[str, dict[str, float]]:
    """Each event's failover times (``failover_s``, in the order of its ``leaders_lost``, as the
    run noted the losses), and p50/max by fault kind."""
    remaining = iter(times)
    by_kind: dict[str, list[float | None]] = {}
    for event in events:
        lost = event.get("leaders_lost", [])
        event["failover_s"] = [next(remaining, None) for _ in lost]
        by_kind.setdefault(event["kind"], []).extend(event["failover_s"])
    return {kind: figures for kind, values in by_kind.items() if (figures := p50_max(values)) is not None}


def java_producer(options: Options, run: Run, data_dir: Path) -> JavaProducer | None:
    if options.java_classpath is None:
        return None
    jvm = kafka_jvm_options(data_dir / "java-producer", "256m", "WARN")
    return JavaProducer(
        "java-1",
        run.bootstrap,
        TOPIC,
        PARTITIONS,
        options.rate,
        not options.unsafe,
        options.java_classpath,
        jvm,
        run.majority_up,
    )


def wait_first_acks(producers: list[Any], timeout_s: float) -> list[str]:
    """Until every producer has had a write acknowledged: the names of those that had none in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(p.log.acks for p in producers):
            return []
        time.sleep(POLL_S)
    return [p.log.name for p in producers if not p.log.acks]


def execute(options: Options, label: str) -> Outcome:
    """The whole run; namespaces, processes and clients are gone when it returns (or raises)."""
    outcome = Outcome(label)
    started = time.monotonic()
    network = NodeNetwork(list(range(1, NODES + 1 + (1 if options.grow else 0))))
    producers: list[Any] = []
    consumers: list[GroupConsumer] = []
    with tempfile.TemporaryDirectory(prefix="kafkalike-chaos-") as tmp:
        data_dir = Path(tmp)
        network.setup()
        cluster: Cluster | None = None
        try:
            overrides: dict[str, str] = {}
            if options.unsafe:
                overrides = {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}
            cluster = build_cluster(
                options.target,
                network,
                data_dir,
                overrides,
                kafka_lib=options.kafka_lib,
                root=options.root,
                voters=list(range(1, NODES + 1)),
            )
            options.log(f"{label}: starting {NODES} nodes at {network.subnet}.11-{10 + NODES}")
            try:
                cluster.start()
            except (NodeExited, NodeNotReady) as exc:
                raise SetupFailed(f"the cluster did not start: {exc}") from exc
            run = Run(options, cluster, network)
            run.log(f"nodes {cluster.node_ids} ready: each a broker in Metadata, one quorum")
            run.create_topic()
            if not run.settle():
                raise SetupFailed(f"topic {TOPIC} has no leader and full ISR after {SETTLE_TIMEOUT_S:g} s")
            run.log(f"topic {TOPIC}: {PARTITIONS} partitions, replication factor {REPLICATION_FACTOR}")
            consumers = [GroupConsumer(f"consumer-{i}", run.bootstrap, TOPIC, GROUP) for i in (1, 2)]
            for consumer in consumers:
                consumer.start()
            safe = not options.unsafe
            producers = [
                PythonProducer(f"python-{i}", run.bootstrap, TOPIC, PARTITIONS, options.rate, safe, run.majority_up)
                for i in (1, 2)
            ]
            java = java_producer(options, run, data_dir)
            if java is not None:
                producers.append(java)
            for producer in producers:
                producer.start()
            silent = wait_first_acks(producers, WARMUP_TIMEOUT_S)
            if silent:
                raise SetupFailed(f"no write acknowledged in {WARMUP_TIMEOUT_S:g} s for {silent}")
            if options.grow:
                run.log("producers acknowledged; the growth phase starts")
                run.grow(outcome, data_dir)
            run.log("faults start" if options.grow else "producers acknowledged; faults start")
            for number, fault in enumerate(options.faults, 1):
                time.sleep(fault.gap_s)  # the schedule's quiet time between faults
                try:
                    event = run.inject(fault)
                except (NodeExited, NodeNotReady) as exc:
                    raise SetupFailed(f"stopped at fault {number} ({fault.describe()}): {exc}") from exc
                settled = run.settle()
                event["settled_s"] = round(time.monotonic() - run.t0, 1)
                if not settled:
                    outcome.settle_timeouts += 1
                    event["settle_timeout"] = True
                outcome.events.append(event)
                acked = sum(len(p.log.acks) for p in producers)
                run.log(
                    f"fault {number}/{len(options.faults)} done ({'settled' if settled else 'NOT settled'}), "
                    f"{acked} writes acknowledged so far"
                )
            time.sleep(3.0)  # writes after the last fault, under a healthy cluster
            run.log("stopping the producers")
            for producer in producers:
                producer.stop()
            time.sleep(3.0)  # lets the group read the last writes; what it misses is not a finding
            for consumer in consumers:
                consumer.stop()
            run.log("reading every partition from offset 0")
            final, outcome.final_read_problems = read_everything(run.bootstrap, TOPIC, PARTITIONS, FINAL_READ_TIMEOUT_S)
            acks = [a for p in producers for a in p.log.acks]
            seen = [r for c in consumers for r in c.seen]
            outcome.verdict = check(acks, seen, final)
            outcome.availability = acknowledged_fraction([a for p in producers for a in p.log.attempts], acks)
            timed: list[TimedAck] = [t for p in producers if isinstance(p, PythonProducer) for t in p.log.timed]
            times = failover_times(run.losses, timed)
            outcome.failover = p50_max(times)
            outcome.failover_unmeasured = sum(t is None for t in times)
            outcome.failover_by_kind = failover_by_kind(outcome.events, times)
            outcome.producers = {
                p.log.name: {"attempts": len(p.log.attempts), "acked": len(p.log.acks), "failures": p.log.failures}
                for p in producers
            }
            outcome.consumers = {c.name: {"seen": len(c.seen), "errors": c.errors} for c in consumers}
        except SetupFailed as exc:
            outcome.setup_error = str(exc)
        finally:
            try:
                for producer in producers:
                    if isinstance(producer, JavaProducer):
                        producer.kill()
                for consumer in consumers:
                    consumer.stopping.set()
                if cluster is not None:
                    cluster.stop(timeout_s=30)
            finally:
                network.teardown()  # even when stopping the cluster was interrupted
    outcome.duration_s = time.monotonic() - started
    return outcome
