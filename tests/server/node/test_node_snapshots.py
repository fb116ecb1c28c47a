"""Metadata snapshots of a running node: written from its image when the policy says so, kept by
the quorum as a ``.checkpoint`` file with the log before it deleted, and loaded by a restart."""

from __future__ import annotations

from pathlib import Path

import trio

from kafkalike.controller.loader import MetadataLoader
from kafkalike.log.snapshot_files import SnapshotFiles, SnapshotId
from kafkalike.log.storage import FileLogDirectory
from kafkalike.server.config import BrokerConfig
from kafkalike.server.node import Node
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.quorum import CommitRecorder
from kafkalike.testing.wire_client import AsyncWireClient

DEADLINE_S = 30
CLUSTER = "node-snapshot-cluster-0A"


def controller_config(tmp_path: Path, port: int, **more: str) -> BrokerConfig:
    return BrokerConfig(
        {
            "process.roles": "controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "log.dirs": str(tmp_path / "data"),
            "controller.quorum.election.timeout.ms": "200",  # a single voter elects itself at the first one
            **{k.replace("_", "."): v for k, v in more.items()},
        }
    )


def format_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text(f"version=1\ncluster.id={CLUSTER}\nnode.id=1\n")
    return data / "__cluster_metadata-0"


async def free_port() -> tuple[list[trio.SocketListener], int]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    return listeners, listeners[0].socket.getsockname()[1]


async def wait_active(node: Node) -> None:
    """Until the node's controller is the active one (its single-voter quorum elected it)."""
    driver, host = node.driver, node.controller
    assert driver is not None and host is not None
    await driver.wait_for(lambda: driver.is_leader)
    await host.wait_active()


async def create_topics(port: int, names: list[str]) -> None:
    client = await AsyncWireClient.connect("127.0.0.1", port)
    try:
        registered = await client.request(62, 4, registration(1, CLUSTER))
        assert registered.error_code == 0, registered
        beat = await client.request(63, 1, heartbeat(1, registered.broker_epoch, 2**40))
        assert beat.error_code == 0, beat
        for name in names:
            topic = {"name": name, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}
            created = await client.request(19, 7, {"topics": [topic], "timeout_ms": 5000})
            assert created.topics[0].error_code == 0, created
    finally:
        await client.aclose()


async def test_a_snapshot_is_written_by_size_the_log_before_it_deleted_and_a_restart_loads_it(tmp_path: Path) -> None:
    metadata = format_dir(tmp_path)
    bound, port = await free_port()
    # Every batch with records crosses one byte: a snapshot after each.
    config = controller_config(tmp_path, port, metadata_log_max_record_bytes_between_snapshots="1")
    node = Node(config, controller_bound=bound)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await wait_active(node)
            assert node.driver is not None
            await create_topics(port, ["orders", "payments"])
            driver = node.driver
            end = node.metadata_offset + 1
            await driver.wait_for(lambda: bool(node.snapshots_written) and node.snapshots_written[-1].offset == end)
            latest = node.snapshots_written[-1]
            assert driver.node.log.start_offset == latest.offset  # the log before it is gone
            image_before = node.image.image
            await node.stop()
            nursery.cancel_scope.cancel()
    files = SnapshotFiles(FileLogDirectory(metadata))
    assert files.ids()[-1] == SnapshotId(latest.offset, latest.epoch)
    loader = MetadataLoader()
    loader.load_snapshot(files.ids()[-1], files.read(files.ids()[-1]))
    assert loader.image.records() == image_before.records()
    assert {"orders", "payments"} <= set(loader.image.topics_by_name)

    # A restart starts from the snapshot: its subscribers are handed it first, then what follows.
    restarted = Node(config)
    recorder = CommitRecorder()
    restarted.subscribe(recorder)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(restarted.run)
            await wait_active(restarted)
            assert restarted.controller is not None
            assert [s for s, _ in recorder.snapshots][:1] == [latest]
            assert restarted.image.image.topic("orders") == image_before.topic("orders")
            assert restarted.controller.image.topic("payments") == image_before.topic("payments")
            await restarted.stop()
            nursery.cancel_scope.cancel()


async def test_no_second_snapshot_is_written_without_new_records(tmp_path: Path) -> None:
    """The bootstrap records a new active controller writes make the first snapshot; asked
    again with nothing replayed since, the node writes none."""
    format_dir(tmp_path)
    bound, port = await free_port()
    config = controller_config(tmp_path, port, metadata_log_max_record_bytes_between_snapshots="1")
    node = Node(config, controller_bound=bound)
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await wait_active(node)
            # The bootstrap records the new active controller wrote are a snapshot's worth.
            assert node.driver is not None
            await node.driver.wait_for(lambda: bool(node.snapshots_written))
            first = list(node.snapshots_written)
            assert await node.write_snapshot() is None  # nothing new since
            assert node.snapshots_written == first
            await node.stop()
            nursery.cancel_scope.cancel()
