"""Dynamic controllers (KIP-853) with Kafka's own ``kafka-metadata-quorum``, the same steps against
kafkalike processes and Apache Kafka 4.4 JVMs:

1. node 1 (broker and controller) formatted ``--standalone``; nodes 2 and 3 controllers formatted
   ``--no-initial-controllers``, finding the quorum through ``controller.quorum.bootstrap.servers``:
   they are observers, node 1 the only voter;
2. ``add-controller`` of node 2 through the broker (``--bootstrap-server``) and of node 3 through
   the controller (``--bootstrap-controller``): three voters, each with the directory id of its
   meta.properties and its CONTROLLER endpoint; adding node 2 again fails as Kafka fails it;
3. node 1 (the leader) SIGKILLed: the two added voters elect a leader among themselves;
4. ``remove-controller`` of node 1 by id and directory id: two voters; removing it again fails
   as Kafka fails it; node 2 restarted comes back as a voter.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_LIB
from kafkalike.testing.apache_kafka import ApacheKafkaNode, java_executable, kafka_jvm_options
from kafkalike.testing.cluster_requests import describe_quorum
from kafkalike.testing.process_cluster import KafkalikeNode, NodeAddress, NodeProcess, free_ports, write_properties

pytestmark = pytest.mark.differential
CLUSTER_ID = "RHluYW1pY1ZvdGVyc1Rlc3Q"
WAIT_S = 60.0


class FormatFlag(NodeProcess):
    """A node formatted with one more flag (``--standalone`` or ``--no-initial-controllers``)."""

    flag = ""

    def format_command(self, cluster_id: str) -> list[str]:
        return [*super().format_command(cluster_id), self.flag]


class StandaloneKafkalike(FormatFlag, KafkalikeNode):
    pass


class StandaloneKafka(FormatFlag, ApacheKafkaNode):
    pass


def node_config(address: NodeAddress, first: NodeAddress, data: Path) -> dict[str, str]:
    combined = address.node_id == 1
    listeners = f"CONTROLLER://{address.controller}"
    if combined:
        listeners = f"PLAINTEXT://{address.client},{listeners}"
    return {
        "process.roles": "broker,controller" if combined else "controller",
        "node.id": str(address.node_id),
        "controller.listener.names": "CONTROLLER",
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": first.controller,
        "log.dirs": str(data),
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
    }


@pytest.fixture(params=["kafkalike", "kafka"])
def nodes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[int, NodeProcess]]:
    ports = free_ports(6)
    addresses = [NodeAddress(i, ports[2 * i - 2], ports[2 * i - 1]) for i in (1, 2, 3)]
    made: dict[int, NodeProcess] = {}
    jvm = kafka_jvm_options(tmp_path, "384m", "WARN")
    for address in addresses:
        node_dir = tmp_path / f"node-{address.node_id}"
        properties = node_config(address, addresses[0], node_dir / "data")
        flag = "--standalone" if address.node_id == 1 else "--no-initial-controllers"
        node: FormatFlag
        if request.param == "kafkalike":
            node = StandaloneKafkalike(address, node_dir, properties)
        else:
            node = StandaloneKafka(address, node_dir, properties, Path(AK_LIB), jvm)
        node.flag = flag
        node.prepare(CLUSTER_ID)
        made[address.node_id] = node
    try:
        for node in made.values():
            node.launch()
            node.wait_ready(WAIT_S * 2)
        yield made
    finally:
        for node in made.values():
            node.kill()


def quorum_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            java_executable(),
            "-Xmx256m",
            "-cp",
            str(Path(AK_LIB) / "*"),
            "org.apache.kafka.tools.MetadataQuorumCommand",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def status(bootstrap: list[str]) -> dict[str, str]:
    ran = quorum_tool(*bootstrap, "describe", "--status")
    assert ran.returncode == 0, ran.stderr
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in ran.stdout.splitlines()) if v}


def voter_ids(fields: dict[str, str]) -> list[int]:
    return sorted(int(i) for i in re.findall(r'"id": (\d+)', fields["CurrentVoters"]))


def directory_id(node: NodeProcess) -> str:
    text = (node.log_dir / "meta.properties").read_text()
    found = re.search(r"^directory\.id=(\S+)$", text, re.M)
    assert found is not None
    return found[1]


def until_voters(bootstrap: list[str], wanted: list[int]) -> dict[str, str]:
    """Until DescribeQuorum shows ``wanted`` as the voters with a leader among them (bounded)."""
    deadline = time.monotonic() + WAIT_S
    fields: dict[str, str] = {}
    while time.monotonic() < deadline:
        ran = quorum_tool(*bootstrap, "describe", "--status")
        if ran.returncode == 0:
            fields = {
                k.strip(): v.strip() for k, _, v in (line.partition(":") for line in ran.stdout.splitlines()) if v
            }
            if voter_ids(fields) == wanted and int(fields.get("LeaderId", "-1")) in wanted:
                return fields
        time.sleep(1)
    raise AssertionError(f"voters never became {wanted}: {fields}")


def exception_line(ran: subprocess.CompletedProcess[str]) -> str:
    """The tool's error, with the ids of this run's directories left out and the voters of a
    set (which Kafka prints in its hash order) in id order."""
    line = next((x for x in (ran.stdout + ran.stderr).splitlines() if "Exception:" in x), "")
    text = re.sub(r"directoryId=[A-Za-z0-9_-]{22}", "directoryId=D", line.split("Exception: ", 1)[-1])

    def in_order(found: re.Match[str]) -> str:
        return "[" + ", ".join(sorted(re.findall(r"ReplicaKey\([^)]*\)", found[0]))) + "]"

    return re.sub(r"\[ReplicaKey[^\]]*\]", in_order, text)


def config_file(node: NodeProcess) -> str:
    write_properties(node.config_path, node.properties)
    return str(node.config_path)


def test_controllers_are_added_and_removed_with_kafkas_tool(nodes: dict[int, NodeProcess]) -> None:
    first, second, third = nodes[1], nodes[2], nodes[3]
    via_broker = ["--bootstrap-server", first.bootstrap]
    fields = until_voters(via_broker, [1])
    assert sorted(int(i) for i in re.findall(r'"id": (\d+)', fields["CurrentObservers"])) == [2, 3]

    added = quorum_tool("--command-config", config_file(second), *via_broker, "add-controller")
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == (
        f"Added controller 2 with directory id {directory_id(second)} and endpoints: CONTROLLER://{second.controller_bootstrap}"
    )
    via_controller = ["--bootstrap-controller", first.controller_bootstrap]
    added = quorum_tool("--command-config", config_file(third), *via_controller, "add-controller")
    assert added.returncode == 0, added.stderr
    fields = until_voters(via_controller, [1, 2, 3])
    for node in (first, second, third):
        assert f'"id": {node.node_id}, "directoryId": "{directory_id(node)}"' in fields["CurrentVoters"]
        assert f"CONTROLLER://{node.controller_bootstrap}" in fields["CurrentVoters"]
    again = quorum_tool("--command-config", config_file(second), *via_controller, "add-controller")
    assert again.returncode == 1
    assert exception_line(again) == (
        "The voter id for ReplicaKey(id=2, directoryId=D) is already part of the set of voters "
        "[ReplicaKey(id=1, directoryId=D), ReplicaKey(id=2, directoryId=D), ReplicaKey(id=3, directoryId=D)]."
    )

    first.kill()
    # The new leader answers DescribeQuorum itself (a tool started before the election would
    # spend its whole timeout on the dead controller that DescribeCluster still named).
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        views = [describe_quorum(n.node_id, n.address.host, n.address.controller_port) for n in (second, third)]
        if any(v is not None and v.leader_id in (2, 3) for v in views):
            break
        time.sleep(0.5)
    else:
        raise AssertionError("no leader among the added voters")
    survivors = ["--bootstrap-controller", f"{second.controller_bootstrap},{third.controller_bootstrap}"]

    removed = quorum_tool(
        *survivors, "remove-controller", "--controller-id", "1", "--controller-directory-id", directory_id(first)
    )
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == f"Removed KRaft controller 1 with directory id {directory_id(first)}"
    until_voters(survivors, [2, 3])
    again = quorum_tool(
        *survivors, "remove-controller", "--controller-id", "1", "--controller-directory-id", directory_id(first)
    )
    assert again.returncode == 1
    assert exception_line(again) == (
        "Cannot remove voter ReplicaKey(id=1, directoryId=D) from the set of voters "
        "[ReplicaKey(id=2, directoryId=D), ReplicaKey(id=3, directoryId=D)]"
    )

    second.kill()
    second.launch()
    second.wait_ready(WAIT_S * 2)
    fields = until_voters(survivors, [2, 3])
    assert f'"id": 2, "directoryId": "{directory_id(second)}"' in fields["CurrentVoters"]
