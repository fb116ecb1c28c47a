"""The Java client (kafka-clients, compat_tests/java) and franz-go (compat_tests/go) through the
same outage as the Python clients (``Outage``): each runner's ``failover-produce`` scenario
produces to a 6-partition RF=3 topic (min.insync.replicas=2; idempotent, acks=all, retrying),
hands over with a line on stdout at each step and waits for a line on stdin, while this test
kills the leader of some partitions with records in flight and starts it again; the runner reads
everything back itself (every value once, each partition in send order), and so does librdkafka
here.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from compat_tests.failover_support import (
    PARTITIONS,
    ROOT,
    WAIT_S,
    check_acked_records,
    every_broker,
    kill,
    leader_to_kill,
    read_all,
    replicated_topic,
    restart,
    running_cluster,
    value_of,
    wait_in_sync,
)
from kafkalike.testing.process_cluster import KafkalikeCluster

sys.path.insert(0, str(ROOT / "scripts"))

from compat_lib.runner import java_env
from compat_lib.suites import GO_BINARY, GO_DIR, build_java_client, java_jar

pytestmark = pytest.mark.compat
JAVA_CLIENT_VERSION = "4.0.2"
COUNT = 300
BUILD_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkalikeCluster]:
    yield from running_cluster(tmp_path_factory.mktemp("failover-runners"))


def read_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def drive(cluster: KafkalikeCluster, command: list[str], env: dict[str, str], tag: str, log: Path) -> None:
    """Run ``command`` (a runner's failover-produce) through the outage; its scenario must pass,
    and every value it produced must be on the topic once, in order."""
    topic = f"failover-{tag}"
    replicated_topic(cluster, topic)
    victim = leader_to_kill(cluster, topic)
    settings = {"FAILOVER_TOPIC": topic, "FAILOVER_COUNT": str(COUNT), "FAILOVER_PARTITIONS": str(PARTITIONS)}
    lines: queue.Queue[str | None] = queue.Queue()
    results: list[dict[str, Any]] = []
    with (
        log.open("w", encoding="utf-8") as errors,
        subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True, env={**env, **settings}
        ) as runner,
    ):
        assert runner.stdin is not None and runner.stdout is not None
        reader = threading.Thread(target=read_lines, args=(runner.stdout, lines), daemon=True)
        reader.start()

        def until(step: str | None) -> None:
            """Read the runner's lines until ``step`` is handed over (None: until it ends)."""
            deadline = time.monotonic() + WAIT_S
            while True:
                try:
                    line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
                except queue.Empty:
                    pytest.fail(f"{tag}: no {step or 'end'} within {WAIT_S:g} s; {log.read_text()[-2000:]}")
                if line is None:
                    assert step is None, f"{tag} ended before {step}: {results} {log.read_text()[-2000:]}"
                    return
                if line.startswith("{"):
                    results.append(json.loads(line))
                elif line.strip() == f"failover: {step}":
                    return

        def go_ahead() -> None:
            runner.stdin.write("go\n")  # type: ignore[union-attr]
            runner.stdin.flush()  # type: ignore[union-attr]

        try:
            until("in flight")
            kill(cluster, victim)
            go_ahead()
            until("acked with a broker down")
            restart(cluster, victim)
            go_ahead()
            until(None)
        finally:
            if runner.poll() is None:
                runner.kill()
            runner.wait(WAIT_S)
            reader.join(WAIT_S)  # the pipe is at its end once the runner is gone
    assert [(r["scenario"], r["status"], r["error"]) for r in results] == [("failover-produce", "pass", None)]
    wait_in_sync(cluster, topic)
    check_acked_records([value_of(tag, i) for i in range(COUNT)], read_all(cluster, topic, COUNT))


def test_the_java_client_loses_no_acknowledged_record_when_a_leader_dies(
    cluster: KafkalikeCluster, tmp_path: Path
) -> None:
    why = build_java_client(JAVA_CLIENT_VERSION)
    assert why is None, why
    command = [
        "java",
        "-Xmx512m",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-jar",
        str(java_jar(JAVA_CLIENT_VERSION)),
        every_broker(cluster),
        "failover-produce",
    ]
    drive(cluster, command, java_env(), "java", tmp_path / "java.log")


def test_franz_go_loses_no_acknowledged_record_when_a_leader_dies(cluster: KafkalikeCluster, tmp_path: Path) -> None:
    built = subprocess.run(
        ["go", "build", "-o", str(GO_BINARY), "."],
        cwd=GO_DIR,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        env=dict(os.environ, GOFLAGS="-mod=mod"),
        check=False,
    )
    assert built.returncode == 0, built.stderr
    command = [str(GO_BINARY), "-client", "franz", "-bootstrap", every_broker(cluster), "failover-produce"]
    drive(cluster, command, dict(os.environ), "franz", tmp_path / "franz.log")
