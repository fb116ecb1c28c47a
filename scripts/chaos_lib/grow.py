"""A chaos run's growth phase (``chaos.py --grow``), under the same producers and consumers: a
broker-only node joins the running 3-node cluster; Kafka's own ``kafka-reassign-partitions``
moves half the topic's partitions onto it (``--generate`` for the proposal it prints, then
``--execute`` of a plan that puts the new broker first in every other partition's replicas,
throttled, and ``--verify`` until every move completed, which clears the throttles); then every
node in turn is stopped with SIGTERM (its controlled shutdown) and started again, the cluster
back to full ISR before the next; then ``kafka-leader-election --election-type PREFERRED`` gives
each partition back to its first replica, and leadership must end there, spread over the four.

Each step is an event of the report; a step that does not complete in time is a SetupFailed.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkalike.testing.apache_kafka import java_executable, kafka_jvm_options

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
TOOL_TIMEOUT_S = 120.0
VERIFY_TIMEOUT_S = 300.0
VERIFY_EVERY_S = 2.0
BALANCE_TIMEOUT_S = 60.0
THROTTLE_BYTES_S = 1_000_000  # Kafka's advice: no less than 1 MB/s


class GrowthFailed(RuntimeError):
    pass


class KafkaTools:
    """Kafka's command-line tools from its jars, as ``bin/kafka-*.sh`` runs them."""

    def __init__(self, kafka_lib: Path, bootstrap: str, work_dir: Path) -> None:
        self.kafka_lib = kafka_lib
        self.bootstrap = bootstrap
        self.work_dir = work_dir
        self.jvm = kafka_jvm_options(work_dir / "tools", "256m", "WARN")

    def run(self, main: str, *args: str) -> str:
        command = [java_executable(), *self.jvm, "-cp", str(self.kafka_lib / "*"), main, "--bootstrap-server"]
        ran = subprocess.run(
            [*command, self.bootstrap, *args], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
        )
        if ran.returncode != 0:
            raise GrowthFailed(
                f"{main.rsplit('.', 1)[-1]} {' '.join(args)} exited {ran.returncode}: {ran.stdout[-800:]}{ran.stderr[-800:]}"
            )
        return ran.stdout

    def write(self, name: str, content: Any) -> Path:
        path = self.work_dir / name
        path.write_text(json.dumps(content))
        return path


def half_onto(new_broker: int, replicas: dict[int, list[int]]) -> dict[int, list[int]]:
    """Every other partition (0, 2, 4...) moved onto ``new_broker`` in place of its last replica
    (the replication factor stays), first in every other one of them (its preferred leader), so
    that the new broker ends up leading its share."""
    moved = [(p, r) for p, r in sorted(replicas.items()) if p % 2 == 0]
    return {p: [new_broker, *r[:-1]] if k % 2 == 0 else [*r[:-1], new_broker] for k, (p, r) in enumerate(moved)}


def plan_json(topic: str, moves: dict[int, list[int]]) -> dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": r} for p, r in moves.items()]}


def reassign(
    tools: KafkaTools,
    topic: str,
    brokers: list[int],
    moves: dict[int, list[int]],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """--generate (its proposal only logged), --execute of ``moves`` with a throttle, --verify
    until every partition's move completed; the event."""
    started = time.monotonic()
    topics = tools.write("topics-to-move.json", {"version": 1, "topics": [{"topic": topic}]})
    generated = tools.run(
        REASSIGN, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", ",".join(map(str, brokers))
    )
    proposal = json.loads(generated.strip().splitlines()[-1])
    log(f"kafka-reassign-partitions --generate proposes {len(proposal['partitions'])} partitions over {brokers}")
    plan = tools.write("reassignment.json", plan_json(topic, moves))
    executed = tools.run(
        REASSIGN, "--execute", "--reassignment-json-file", str(plan), "--throttle", str(THROTTLE_BYTES_S)
    )
    if "Successfully started partition reassignment" not in executed:
        raise GrowthFailed(f"--execute did not start the moves: {executed[-800:]}")
    log(f"kafka-reassign-partitions --execute: {sorted(moves)} onto {moves}, throttled at {THROTTLE_BYTES_S} B/s")
    deadline = time.monotonic() + VERIFY_TIMEOUT_S
    verifications = 0
    while True:
        verified = tools.run(REASSIGN, "--verify", "--reassignment-json-file", str(plan))
        verifications += 1
        done = [p for p in moves if f"Reassignment of partition {topic}-{p} is completed." in verified]
        if len(done) == len(moves):
            break
        if time.monotonic() > deadline:
            raise GrowthFailed(f"reassignment not complete after {VERIFY_TIMEOUT_S:g} s: {verified[-800:]}")
        time.sleep(VERIFY_EVERY_S)
    if "Clearing broker-level throttles" not in verified:
        raise GrowthFailed(f"--verify did not clear the throttles: {verified[-800:]}")
    seconds = time.monotonic() - started
    log(f"kafka-reassign-partitions --verify: every move completed in {seconds:.1f} s ({verifications} verifications)")
    return {
        "kind": "reassign",
        "moves": {str(p): r for p, r in moves.items()},
        "seconds": round(seconds, 1),
        "verifications": verifications,
    }


def elect_preferred(tools: KafkaTools, log: Callable[[str], None]) -> str:
    output = tools.run(LEADER_ELECTION, "--election-type", "PREFERRED", "--all-topic-partitions")
    log(f"kafka-leader-election --election-type PREFERRED: {' '.join(output.split())[:200]}")
    return output
