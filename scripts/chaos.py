#!/usr/bin/env python3
"""Fault injection on a 3-node cluster of real processes, Apache Kafka's or kafkalike's, with
producers and consumers running throughout; then an account of what was written, read and kept.

    sudo python scripts/chaos.py --target kafka --seed 1 --faults 20 --json chaos.json
    sudo python scripts/chaos.py --target kafka --short                  # 4 short faults, ~2 minutes
    sudo python scripts/chaos.py --target kafka --unsafe --faults 3      # the negative control
    sudo python scripts/chaos.py --target kafkalike --seed 1
    sudo python scripts/chaos.py --target both --short

Every node is broker and controller, a voter of one static quorum, in a network namespace of its
own (root is needed: ``ip netns``, veth pairs on a bridge; see ``chaos_lib/network.py``); the
clients run here and reach the nodes over the bridge. The topic has 6 partitions, replication
factor 3 and ``min.insync.replicas=2``. Two confluent-kafka producers and one Java client producer
(``compat_tests/java/client/.../ChaosProducer.java``, kafka-clients from Kafka's jars) write, with
acks=all and idempotence, values that name their producer and sequence number; a consumer group of
two (read_committed) reads throughout. The seeded schedule (``chaos_lib/schedule.py``) SIGKILLs a
partition's leader, the active controller (DescribeQuorum) or a node, each restarted after a while;
SIGSTOPs a node past the broker session timeout (then SIGCONT); cuts a node off the network (then
heals it). Each fault is healed, and the cluster back to full ISR, before the next. Then the
producers stop and a fresh read_committed consumer reads every partition from offset 0.

The report (a table, and with ``--json FILE`` everything including each fault) counts, each of
which must be 0: acknowledged writes lost (acked by the delivery callback, absent from the final
log) or found at another offset than acknowledged; offsets a consumer saw with another value, or
that the final log no longer has; duplicates in the final log; a producer's sequence numbers going
down within a partition. It also gives the fraction of produce attempts acknowledged among those
made while a majority of nodes was up, and the failover time (a leader SIGKILLed -> the first
acknowledgement in its partition of a write sent after the kill), p50 and max.

``--unsafe`` is the negative control: acks=1 without idempotence, ``min.insync.replicas=1``,
``unclean.leader.election.enable=true``, and one fault: SIGSTOP a partition's followers, let its
leader acknowledge writes alone, SIGKILL it and SIGCONT the followers (one takes over without the
writes, and the old leader truncates them when it returns). The checker must report the loss.

Exit status: 0 when every invariant held, 1 when one failed (with ``--unsafe``: when the checker
caught the loss, as it should), 2 when a target could not be run (the cluster did not start, the
topic could not be created: kafkalike without replication refuses replication factor 3; or a node
did not come back after a fault), 130 when interrupted (Ctrl-C, SIGTERM), after cleaning up.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from chaos_lib.network import remove_stale  # noqa: E402
from chaos_lib.run import NODES, PARTITIONS, Options, Outcome, execute  # noqa: E402
from chaos_lib.schedule import make_schedule  # noqa: E402

SHORT_FAULTS = 4
DEFAULT_FAULTS = 20
UNSAFE_FAULTS = 3
ROWS = (
    ("lost", "acknowledged writes lost"),
    ("moved", "acknowledged writes at another offset"),
    ("diverged", "offsets read with another value"),
    ("vanished", "offsets read, gone from the final log"),
    ("duplicates", "duplicates in the final log"),
    ("reordered", "sequence numbers out of order"),
)


def kafka_jars(version: str, given: Path | None) -> Path:
    if given is not None:
        return given
    from compat_lib.tools import ak_lib_dir, resolve_ak

    problem = resolve_ak(version)
    if problem is not None:
        raise SystemExit(f"chaos: cannot get Apache Kafka {version}: {problem}")
    return Path(ak_lib_dir(version))


def java_classpath(version: str, kafka_lib: Path) -> str:
    """kafka-clients for the Java producer: the compat tests' shaded client jar when it is built,
    else Kafka's own jars."""
    built = ROOT / "compat_tests" / ".work" / "java" / f"client-{version}" / f"compat-client-{version}.jar"
    return str(built) if built.exists() else str(kafka_lib / "*")


def table(outcome: Outcome) -> str:
    lines = [f"{outcome.label}:"]
    if outcome.setup_error is not None:
        lines.append(f"  NOT RUN: {outcome.setup_error}")
        return "\n".join(lines)
    verdict = outcome.verdict
    assert verdict is not None
    lines.append(
        f"  {verdict.acked} writes acknowledged, {verdict.final_records} records in the final log, "
        f"{verdict.seen_records} reads by the group, {len(outcome.events)} faults in {outcome.duration_s:.0f} s"
    )
    for name, text in ROWS:
        count = getattr(verdict, name)
        lines.append(f"  {text:<40} {count:>8}  {'ok' if count == 0 else 'FAIL'}")
        for example in verdict.examples.get(name, [])[:3]:
            lines.append(f"      e.g. {example}")
    if outcome.availability is not None:
        lines.append(f"  {'acknowledged while a majority was up':<40} {outcome.availability:>8.2%}")
    if outcome.failover is not None:
        f = outcome.failover
        lines.append(
            f"  {'failover (kill -> first ack)':<40} p50 {f['p50']:.2f} s, max {f['max']:.2f} s "
            f"({int(f['count'])} leaders lost{f', {outcome.failover_unmeasured} unmeasured' if outcome.failover_unmeasured else ''})"
        )
    for kind, f in outcome.failover_by_kind.items():
        lines.append(f"      after {kind}: p50 {f['p50']:.2f} s, max {f['max']:.2f} s ({int(f['count'])} leaders)")
    for name, figures in outcome.producers.items():
        failures = ", ".join(f"{k} {v}" for k, v in figures["failures"].items()) or "none"
        lines.append(f"  {name}: {figures['attempts']} sent, {figures['acked']} acknowledged, failures: {failures}")
    if outcome.final_read_problems:
        lines.append(f"  final read: {'; '.join(outcome.final_read_problems[:5])}")
    for step in outcome.growth:
        lines.append(f"  growth: {growth_line(step)}")
    if outcome.balanced is not None:
        lines.append(f"  {'leaders on their preferred replicas':<40} {'yes' if outcome.balanced else 'NO':>8}")
    if outcome.settle_timeouts:
        lines.append(f"  {outcome.settle_timeouts} faults after which the cluster did not get back to full ISR")
    lines.append(f"  verdict: {'every invariant held' if outcome.ok else 'INVARIANT FAILED: ' + str(verdict.failures)}")
    return "\n".join(lines)


def growth_line(step: dict[str, Any]) -> str:
    kind = step["kind"]
    if kind == "add-broker":
        return f"broker {step['node']} joined in {step['seconds']:.1f} s"
    if kind == "reassign":
        return (
            f"{len(step['moves'])} partitions moved with kafka-reassign-partitions in {step['seconds']:.1f} s "
            f"({step['verifications']} --verify runs)"
        )
    if kind == "restart":
        settled = "back to full ISR" if step["settled"] else "NOT back to full ISR"
        return (
            f"node {step['node']} stopped in {step['stopped_s']:.1f} s, {settled} {step['seconds']:.1f} s after SIGTERM"
        )
    if kind == "preferred-leaders":
        return f"preferred leaders per broker {step['per_broker']}"
    return str(step)


def interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does (the finally blocks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=["kafka", "kafkalike", "both"], required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", type=int, help=f"default {DEFAULT_FAULTS} ({SHORT_FAULTS} with --short)")
    parser.add_argument("--short", action="store_true", help="a few short faults (~2 minutes a target)")
    parser.add_argument("--unsafe", action="store_true", help="the negative control: a configuration that loses writes")
    parser.add_argument(
        "--grow",
        action="store_true",
        help="first add a 4th broker, move half the partitions onto it with kafka-reassign-partitions, restart "
        "every node in turn and elect the preferred leaders (no faults after it unless --faults is given)",
    )
    parser.add_argument("--rate", type=float, default=100.0, help="records a second per producer")
    parser.add_argument("--no-java", action="store_true", help="confluent-kafka producers only")
    parser.add_argument("--version", default="4.4.0", help="Apache Kafka's version (its jars, its Java client)")
    parser.add_argument("--kafka-lib", type=Path, help="Apache Kafka's jars, instead of resolving them")
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument(
        "--remove-stale", action="store_true", help="first remove namespaces left by killed runs (no process in them)"
    )
    args = parser.parse_args(argv)
    if args.remove_stale:
        remove_stale(lambda text: print(f"chaos: {text}", flush=True))
    if args.grow and args.unsafe:
        parser.error("--grow runs the safe configuration only")
    count = args.faults
    if count is None:
        count = 0 if args.grow else UNSAFE_FAULTS if args.unsafe else SHORT_FAULTS if args.short else DEFAULT_FAULTS
    faults = make_schedule(args.seed, count, nodes=NODES, partitions=PARTITIONS, unsafe=args.unsafe, short=args.short)
    # Kafka's jars run the kafka target's nodes and give the Java producer its client.
    needs_jars = args.target != "kafkalike" or not args.no_java or args.grow
    kafka_lib = kafka_jars(args.version, args.kafka_lib) if needs_jars else None
    signal.signal(signal.SIGTERM, interrupted)
    targets = ["kafka", "kafkalike"] if args.target == "both" else [args.target]
    outcomes: list[Outcome] = []
    for target in targets:
        label = f"Apache Kafka {args.version}" if target == "kafka" else "kafkalike"
        label += (
            f" (seed {args.seed}, {count} faults{', unsafe' if args.unsafe else ''}{', grown' if args.grow else ''})"
        )
        options = Options(
            target=target,
            seed=args.seed,
            faults=faults,
            unsafe=args.unsafe,
            rate=args.rate,
            kafka_lib=kafka_lib,
            root=ROOT,
            java_classpath=None if args.no_java or kafka_lib is None else java_classpath(args.version, kafka_lib),
            log=lambda text: print(text, flush=True),
            grow=args.grow,
        )
        for number, fault in enumerate(faults, 1):
            print(f"  fault {number}: after {fault.gap_s:.1f} s, {fault.describe()}", flush=True)
        try:
            outcomes.append(execute(options, label))
        except KeyboardInterrupt:
            print("chaos: interrupted; the nodes, clients and namespaces are gone", file=sys.stderr)
            return 130
    print()
    for outcome in outcomes:
        print(table(outcome))
    if args.json is not None:
        report: list[dict[str, Any]] = [o.as_dict() for o in outcomes]
        args.json.write_text(json.dumps(report[0] if len(report) == 1 else report, indent=2))
    return exit_status(outcomes)


def exit_status(outcomes: list[Outcome]) -> int:
    """2 when a target could not be run, else 1 when an invariant failed, else 0."""
    if any(o.setup_error is not None for o in outcomes):
        return 2
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
