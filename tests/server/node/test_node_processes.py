"""Three combined ``kafkalike serve --config`` processes (process.roles=broker,controller, three
voters), formatted by ``kafkalike storage format``: one quorum with one leader that every node
names, each node's client port answering, and a SIGTERM stopping each cleanly (exit 0)."""

from __future__ import annotations

from pathlib import Path

from kafkalike.testing.cluster_requests import metadata_brokers
from kafkalike.testing.process_cluster import KafkalikeCluster

WAIT_S = 60.0


def test_three_combined_node_processes_form_one_quorum_and_stop_cleanly(tmp_path: Path) -> None:
    cluster = KafkalikeCluster(3, tmp_path / "cluster")
    try:
        for node in cluster.nodes:
            node.prepare(cluster.cluster_id)
        for node in cluster.nodes:
            node.launch()
        for node in cluster.nodes:
            node.wait_ready(WAIT_S)  # ready: its client port answers (once caught up with the log)
        cluster.wait_for(lambda: cluster.quorum() is not None, "quorum leader", WAIT_S)
        view = cluster.quorum()
        assert view is not None and set(view.voters) == {1, 2, 3} and view.observers == {}
        for node in cluster.nodes:
            assert metadata_brokers(node.address) != set()  # the broker of every node serves Metadata
        # The last node's controlled shutdown would wait for a quorum that no longer exists (five
        # minutes, as Kafka's broker waits): the first two stop cleanly, ``cluster.stop`` kills it.
        codes = [node.stop() for node in cluster.nodes[:-1]]
        assert codes == [0, 0]
        for node in cluster.nodes[:-1]:
            assert not [line for line in node.output if "Traceback" in line], node.output
    finally:
        cluster.stop()
