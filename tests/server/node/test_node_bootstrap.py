"""The metadata.version a new cluster starts at: the one ``kafkalike storage format`` wrote into
the metadata directory (bootstrap.checkpoint), else the release default (4.4-IV2, eligible leader
replicas on, with the cluster-level min.insync.replicas)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkalike.controller.features import BOOTSTRAP_CHECKPOINT, bootstrap_records, feature_levels
from kafkalike.controller.image import BROKER_RESOURCE, ConfigResource
from kafkalike.protocol.metadata_records import build_snapshot
from kafkalike.server.broker import StartupError
from kafkalike.server.node import read_bootstrap
from tests.server.node.test_node_roles import DEADLINE_S, Nodes

ELR = "eligible.leader.replicas.version"


def format_at(directory: Path, release: str) -> None:
    records = bootstrap_records(feature_levels(release, dynamic_quorum=False))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / BOOTSTRAP_CHECKPOINT).write_bytes(
        build_snapshot(records, epoch=0, last_contained_log_timestamp=0, now_ms=0)
    )


@pytest.mark.parametrize(
    ("release", "level", "elr", "cluster_min_isr"),
    [
        (None, 33, 1, {"min.insync.replicas": "1"}),
        ("4.0-IV3", 25, None, {}),
        ("4.4-IV2", 33, 1, {"min.insync.replicas": "1"}),
    ],
)
async def test_a_new_cluster_starts_at_the_formatted_metadata_version(
    tmp_path: Path, release: str | None, level: int, elr: int | None, cluster_min_isr: dict[str, str]
) -> None:
    nodes = Nodes(tmp_path, 1)
    await nodes.bind()
    if release is not None:
        format_at(tmp_path / "node-1", release)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            node = await nodes.start(nursery, 1, "broker,controller")
            assert node.controller is not None
            await node.controller.wait_active()
            await nodes.wait(lambda: node.image.image.metadata_version != 0)
            image = node.image.image
            assert (image.metadata_version, image.features.get(ELR)) == (level, elr)
            assert dict(image.configs.get(ConfigResource(BROKER_RESOURCE, ""), {})) == cluster_min_isr
            await nodes.stop_in_turn()
            nursery.cancel_scope.cancel()


def test_an_unreadable_bootstrap_file_stops_the_start(tmp_path: Path) -> None:
    assert read_bootstrap(tmp_path) is None
    (tmp_path / BOOTSTRAP_CHECKPOINT).write_bytes(b"not a snapshot")
    with pytest.raises(StartupError, match="Unable to read the bootstrap metadata"):
        read_bootstrap(tmp_path)
