"""Three quorum members in one process over loopback TCP: the driver, the peer channel and the
CONTROLLER listener together, on real clocks with short timeouts (every wait bounded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalike.log.errors import KafkaStorageError
from kafkalike.server.quorum.driver import NotControllerError
from kafkalike.testing.quorum import InProcessQuorum

DEADLINE_S = 20


async def commit_everywhere(quorum: InProcessQuorum, values: list[bytes]) -> int:
    return await quorum.append_committed(values)


def committed_values(quorum: InProcessQuorum) -> dict[int, list[bytes]]:
    return {node_id: quorum.recorders[node_id].values() for node_id in quorum.servers}


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "files"])
async def test_three_nodes_elect_one_leader_and_commit_the_same_data(tmp_path: Path, on_disk: bool) -> None:
    quorum = InProcessQuorum(3, tmp_path if on_disk else None)
    async with quorum.running(deadline_s=DEADLINE_S):
        leader = await quorum.wait_for_leader()
        assert quorum.leaders() == [leader.node_id]
        for i in range(5):
            await commit_everywhere(quorum, [f"v{i}-{j}".encode() for j in range(3)])
        values = committed_values(quorum)
        expected = [f"v{i}-{j}".encode() for i in range(5) for j in range(3)]
        assert values == {1: expected, 2: expected, 3: expected}
        follower = next(d for d in quorum.drivers() if not d.is_leader)
        with pytest.raises(NotControllerError) as refused:
            await follower.append([b"x"])
        assert refused.value.leader_id == leader.node_id


async def test_a_stopped_leader_is_replaced_and_appends_commit_again(tmp_path: Path) -> None:
    quorum = InProcessQuorum(3, tmp_path)
    async with quorum.running(deadline_s=DEADLINE_S):
        await commit_everywhere(quorum, [b"before"])
        old = await quorum.wait_for_leader()
        old_id, old_epoch = old.node_id, old.epoch
        await quorum.stop(old_id)
        new = await quorum.wait_for_leader()
        assert new.node_id != old_id and new.epoch > old_epoch
        await commit_everywhere(quorum, [b"after"])
        for node_id in quorum.servers:
            assert quorum.recorders[node_id].values() == [b"before", b"after"]


async def test_an_isolated_leader_is_replaced_and_rejoins_as_follower() -> None:
    quorum = InProcessQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S):
        await commit_everywhere(quorum, [b"one"])
        old = await quorum.wait_for_leader()
        quorum.faults.isolate(old.node_id)
        others = set(quorum.node_ids) - {old.node_id}
        assert (await quorum.wait_for_leader(among=others)).node_id != old.node_id
        last = await quorum.append_committed([b"two"], among=others)
        # The isolated one never commits what it cannot reach a majority for.
        assert b"two" not in quorum.recorders[old.node_id].values()
        quorum.faults.heal()
        await quorum.wait(lambda: quorum.driver(old.node_id).delivered_offset > last)
        assert quorum.driver(old.node_id).leader_id == (await quorum.wait_for_leader()).node_id
        assert quorum.recorders[old.node_id].values() == [b"one", b"two"]


async def test_a_restarted_node_catches_up_by_fetching(tmp_path: Path) -> None:
    quorum = InProcessQuorum(3, tmp_path)
    async with quorum.running(deadline_s=DEADLINE_S) as nursery:
        leader = await quorum.wait_for_leader()
        lagging = next(i for i in quorum.node_ids if i != leader.node_id)
        await commit_everywhere(quorum, [b"a"])
        await quorum.stop(lagging)
        for value in (b"b", b"c", b"d"):
            await commit_everywhere(quorum, [value])
        await quorum.start(nursery, lagging)
        await quorum.wait(lambda: quorum.recorders[lagging].values() == [b"a", b"b", b"c", b"d"])
        assert not quorum.recorders[lagging].snapshots


async def test_a_restarted_node_behind_the_log_start_loads_the_leaders_snapshot(tmp_path: Path) -> None:
    quorum = InProcessQuorum(3, tmp_path)
    async with quorum.running(deadline_s=DEADLINE_S) as nursery:
        leader = await quorum.wait_for_leader()
        lagging = next(i for i in quorum.node_ids if i != leader.node_id)
        await commit_everywhere(quorum, [b"a"])
        await quorum.stop(lagging)
        last = await commit_everywhere(quorum, [b"b", b"c"])
        snapshot_id = await leader.snapshot(last + 1, b"state-after-c")
        assert leader.node.log.start_offset == last + 1
        await commit_everywhere(quorum, [b"d"])
        await quorum.start(nursery, lagging)
        await quorum.wait(lambda: quorum.recorders[lagging].values() == [b"d"])
        assert quorum.recorders[lagging].snapshots == [(snapshot_id, b"state-after-c")]


async def test_a_refused_metadata_log_write_fails_that_append_only(tmp_path: Path) -> None:
    quorum = InProcessQuorum(3, tmp_path)
    async with quorum.running(deadline_s=DEADLINE_S):
        leader = await quorum.wait_for_leader()
        partition_log = leader.node.log.partition_log  # type: ignore[attr-defined]
        real_append = partition_log.append

        def full_disk(*args: object, **kwargs: object) -> object:
            partition_log.append = real_append  # once
            raise KafkaStorageError("append to __cluster_metadata-0 failed: No space left on device")

        partition_log.append = full_disk
        with pytest.raises(KafkaStorageError):
            await leader.append([b"lost"])
        assert leader.is_leader
        await commit_everywhere(quorum, [b"kept"])
        for node_id in quorum.node_ids:
            assert quorum.recorders[node_id].values() == [b"kept"]


async def test_an_observer_follows_the_log_and_is_listed_as_an_observer() -> None:
    quorum = InProcessQuorum(3, observers=1)
    async with quorum.running(deadline_s=DEADLINE_S):
        await commit_everywhere(quorum, [b"seen by all four"])
        assert quorum.recorders[4].values() == [b"seen by all four"]
        observer = quorum.driver(4)
        assert not observer.node.is_voter and observer.leader_id == (await quorum.wait_for_leader()).node_id
        leader = await quorum.wait_for_leader()
        (p,) = (await leader.describe())["topics"][0]["partitions"]
        assert sorted(v["replica_id"] for v in p["current_voters"]) == [1, 2, 3]
        assert [o["replica_id"] for o in p["observers"]] == [4]


async def test_a_resigning_leader_tells_every_voter_and_another_takes_over() -> None:
    quorum = InProcessQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S):
        await commit_everywhere(quorum, [b"before"])
        old = await quorum.wait_for_leader()
        old_id, old_epoch = old.node_id, old.epoch
        assert await old.resign_gracefully(DEADLINE_S)  # both voters acknowledged its EndQuorumEpoch
        await quorum.stop(old_id)
        new = await quorum.wait_for_leader()
        assert new.node_id != old_id and new.epoch > old_epoch
        await commit_everywhere(quorum, [b"after"])
