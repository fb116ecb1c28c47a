"""The Java client's compatibility scenarios (kafka-clients' AdminClient, producer, consumer, groups
and transactions: compat_tests/java, built as ``scripts/compat.py`` builds it) against a 3-node
kafkalike cluster of processes, given one node's address: every scenario creates topics of its own
through that node and produces and consumes wherever Metadata sends it.

Left out: the scenarios that check a one-broker cluster (DescribeCluster listing one node, a
partition led by the broker given, replication factor 3 refused) — they fail against a 3-node
Apache Kafka cluster as well.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalike.testing.process_cluster import KafkalikeCluster

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from compat_lib.runner import java_env  # noqa: E402
from compat_lib.suites import build_java_client, java_jar  # noqa: E402

pytestmark = pytest.mark.compat
JAVA_CLIENT_VERSION = "4.0.2"
ONE_BROKER_CHECKS = {"admin-describe-topics", "admin-describe-cluster", "admin-create-topic-errors"}
SETTINGS = {"auto.create.topics.enable": "false", "num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}
RUN_TIMEOUT_S = 1200


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkalikeCluster]:
    with KafkalikeCluster(
        3, tmp_path_factory.mktemp("cluster"), overrides=SETTINGS, env={"PYTHONPATH": str(ROOT)}
    ) as running:
        yield running
    for node in running.nodes:
        errors = [line for line in node.output if "Traceback" in line or " ERROR " in line]
        assert not errors, f"node {node.node_id}: {errors[:5]}"


def java_command() -> list[str]:
    why = build_java_client(JAVA_CLIENT_VERSION)
    assert why is None, why
    return [
        "java",
        "-Xmx512m",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-jar",
        str(java_jar(JAVA_CLIENT_VERSION)),
    ]


def run_scenarios(
    command: list[str], list_flag: str, bootstrap_args: list[str], env: dict[str, str] | None
) -> dict[str, str]:
    """Every scenario the runner lists but the one-broker checks: scenario -> error ('' when it passed)."""
    listed = subprocess.run([*command, list_flag], capture_output=True, text=True, timeout=120, check=False)
    names = [n for n in listed.stdout.split() if n not in ONE_BROKER_CHECKS]
    assert names, listed.stderr
    ran = subprocess.run(
        [*command, *bootstrap_args, *names], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env, check=False
    )
    results = {}
    for line in ran.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            results[row["scenario"]] = "" if row["status"] == "pass" else (row.get("error") or row["status"])
    assert set(results) == set(names), ran.stderr[-2000:]
    return results


def test_the_java_client_scenarios_pass_across_three_brokers(cluster: KafkalikeCluster) -> None:
    first = cluster.node(cluster.broker_ids[0]).bootstrap
    failed = {n: e for n, e in run_scenarios(java_command(), "--list", [first], java_env()).items() if e}
    assert failed == {}
