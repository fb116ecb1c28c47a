"""The controller host on its CONTROLLER listener, through the real wire codec: each write is
answered once committed, by the active controller only, and every voter replays the same log."""

from __future__ import annotations

import uuid
from typing import Any

from kafkalike.controller.image import MetadataImage
from kafkalike.controller.loader import build_image_snapshot
from kafkalike.log.errors import KafkaStorageError
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import MetadataRecordType, decode_metadata_record
from kafkalike.raft.log import OffsetAndEpoch
from kafkalike.server.quorum.driver import CommittedBatch
from kafkalike.testing.controller_quorum import ControllerQuorum
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.quorum import CLUSTER_ID
from kafkalike.testing.wire_client import AsyncWireClient

DEADLINE_S = 30
CREATE_TOPICS, DELETE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 33, 37, 44
BROKER_REGISTRATION, BROKER_HEARTBEAT, UNREGISTER_BROKER, ALLOCATE_PRODUCER_IDS = 62, 63, 64, 67
TOPIC_RESOURCE, SET = 2, 0


def new_topic(name: str, partitions: int = 3, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
        **extra,
    }


def create_topics(*topics: dict[str, object]) -> dict[str, object]:
    return {"topics": list(topics), "timeout_ms": 5000, "validate_only": False}


async def register_unfenced(client: AsyncWireClient, broker_id: int) -> int:
    """Register a broker and heartbeat it out of fencing; its broker epoch."""
    registered = await client.request(BROKER_REGISTRATION, 4, registration(broker_id, CLUSTER_ID))
    assert registered.error_code == 0, registered
    epoch = registered.broker_epoch
    beat = await client.request(BROKER_HEARTBEAT, 1, heartbeat(broker_id, epoch, 2**40))
    assert (beat.error_code, beat.is_caught_up, beat.is_fenced) == (0, True, False), beat
    return int(epoch)


def topic_records(quorum: ControllerQuorum, node_id: int, name: str) -> int:
    """How many TopicRecords for ``name`` a member's committed log holds."""
    count = 0
    for batch in quorum.recorders[node_id].batches:
        for value in batch.values:
            record = decode_metadata_record(value)
            count += record.type == MetadataRecordType.TOPIC_RECORD and record.name == name
    return count


async def test_one_voter_creates_a_topic_once_committed() -> None:
    quorum = ControllerQuorum(1)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        client = await quorum.client(1)
        await register_unfenced(client, 1)
        response = await client.request(CREATE_TOPICS, 7, create_topics(new_topic("orders")))
        (topic,) = response.topics
        assert (topic.name, topic.error_code, topic.num_partitions, topic.replication_factor) == ("orders", 0, 3, 1)
        # Answered once committed: the committed image already has it.
        created = host.image.topic("orders")
        assert created is not None and created.topic_id == topic.topic_id
        assert {c.name for c in topic.configs} >= {"cleanup.policy", "retention.ms"}
        again = await client.request(CREATE_TOPICS, 7, create_topics(new_topic("orders")))
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        versions = await client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served[CREATE_TOPICS] == (2, 7) and served[BROKER_REGISTRATION] == (0, 4) and served[55] == (0, 2)


async def test_three_voters_serve_every_write_and_replay_the_same_image() -> None:
    quorum = ControllerQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        client = await quorum.client(host.node_id)
        epochs = {b: await register_unfenced(client, b) for b in (1, 2)}
        assert len(set(epochs.values())) == 2  # each registration's own offset

        created = await client.request(CREATE_TOPICS, 7, create_topics(new_topic("spread", 4)))
        assert created.topics[0].error_code == 0
        spread = host.image.topic("spread")
        assert spread is not None
        leaders = [p.leader for p in spread.partitions.values()]
        assert sorted(set(leaders)) == [1, 2]  # placed over both brokers

        grown = await client.request(
            CREATE_PARTITIONS,
            3,
            {
                "topics": [{"name": "spread", "count": 6, "assignments": None}],
                "timeout_ms": 5000,
                "validate_only": False,
            },
        )
        assert [(r.name, r.error_code) for r in grown.results] == [("spread", 0)]
        assert len(host.image.topic("spread").partitions) == 6  # type: ignore[union-attr]

        altered = await client.request(
            INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": TOPIC_RESOURCE,
                        "resource_name": "spread",
                        "configs": [{"name": "retention.ms", "config_operation": SET, "value": "60000"}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert [(r.resource_name, r.error_code) for r in altered.responses] == [("spread", 0)]
        assert host.image.topic_configs("spread") == {"retention.ms": "60000"}
        replaced = await client.request(
            ALTER_CONFIGS,
            2,
            {
                "resources": [
                    {
                        "resource_type": TOPIC_RESOURCE,
                        "resource_name": "spread",
                        "configs": [{"name": "cleanup.policy", "value": "compact"}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert [(r.resource_name, r.error_code) for r in replaced.responses] == [("spread", 0)]

        first = await client.request(ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 1, "broker_epoch": epochs[1]})
        second = await client.request(ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 2, "broker_epoch": epochs[2]})
        assert (first.error_code, second.error_code) == (0, 0)
        assert second.producer_id_start == first.producer_id_start + first.producer_id_len
        stale = await client.request(ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 1, "broker_epoch": epochs[1] + 99})
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH

        await client.request(CREATE_TOPICS, 7, create_topics(new_topic("doomed", 1)))
        deleted = await client.request(
            DELETE_TOPICS, 6, {"topics": [{"name": "doomed", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 5000}
        )
        assert [(r.name, r.error_code) for r in deleted.responses] == [("doomed", 0)]

        gone = await client.request(UNREGISTER_BROKER, 0, {"broker_id": 2})
        assert gone.error_code == 0
        unknown = await client.request(UNREGISTER_BROKER, 0, {"broker_id": 7})
        assert unknown.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED

        expected = host.image
        assert expected.topic("doomed") is None and sorted(expected.brokers) == [1]
        # AlterConfigs replaces the topic's whole set: the incremental change before it is gone.
        assert expected.topic_configs("spread") == {"cleanup.policy": "compact"}
        # Every voter replays the same committed log into the same image.
        await quorum.wait(lambda: all(_same(h.image, expected) for h in quorum.hosts.values()))


def _same(image: MetadataImage, expected: MetadataImage) -> bool:
    return image.records() == expected.records()


async def test_a_follower_answers_not_controller_naming_the_leader_and_writes_nothing() -> None:
    quorum = ControllerQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        follower_id = next(i for i in quorum.node_ids if i != host.node_id)
        await quorum.wait(lambda: quorum.driver(follower_id).leader_id == host.node_id)
        client = await quorum.client(follower_id)
        message = f"The active controller appears to be node {host.node_id}."
        before = quorum.driver(host.node_id).node.log.end_offset
        requests: list[tuple[int, int, dict[str, Any]]] = [
            (CREATE_TOPICS, 7, create_topics(new_topic("a"), new_topic("b"))),
            (DELETE_TOPICS, 6, {"topics": [{"name": "a", "topic_id": uuid.UUID(int=0)}], "timeout_ms": 1}),
            (
                CREATE_PARTITIONS,
                3,
                {
                    "topics": [{"name": "a", "count": 2, "assignments": None}],
                    "timeout_ms": 1,
                    "validate_only": False,
                },
            ),
            (BROKER_REGISTRATION, 4, registration(1, CLUSTER_ID)),
            (BROKER_HEARTBEAT, 1, heartbeat(1, 5, 5)),
            (UNREGISTER_BROKER, 0, {"broker_id": 1}),
            (ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 1, "broker_epoch": 5}),
        ]
        for api_key, version, body in requests:
            answer = await client.request(api_key, version, body)
            codes = _error_codes(answer)
            assert codes and set(codes) == {ErrorCode.NOT_CONTROLLER}, (api_key, answer)
        created = await client.request(CREATE_TOPICS, 7, create_topics(new_topic("a"), new_topic("b")))
        assert [(t.name, t.error_message) for t in created.topics] == [("a", message), ("b", message)]
        assert quorum.driver(host.node_id).node.log.end_offset == before


def _error_codes(answer: Any) -> list[int]:
    for field in ("topics", "responses", "results"):
        entries = answer.get(field)
        if entries is not None:
            return [e.error_code for e in entries]
    return [answer.error_code]


async def test_a_leader_cut_off_mid_write_answers_not_controller_and_nothing_is_applied_twice() -> None:
    quorum = ControllerQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S) as nursery:
        old = await quorum.active_host()
        client = await quorum.client(old.node_id)
        await register_unfenced(client, 1)
        committed = quorum.driver(old.node_id).high_watermark
        quorum.faults.isolate(old.node_id)
        answers: list[Any] = []

        async def create_on_the_old_leader() -> None:
            answers.append(await client.request(CREATE_TOPICS, 7, create_topics(new_topic("once"))))

        nursery.start_soon(create_on_the_old_leader)
        # Appended by the old leader, never committed: the others cannot hear it.
        await quorum.wait(lambda: quorum.driver(old.node_id).node.log.end_offset > (committed or 0) + 1)
        others = set(quorum.node_ids) - {old.node_id}
        new = await quorum.active_host(among=others)
        assert new.node_id != old.node_id
        await quorum.wait(lambda: bool(answers))
        (lost,) = answers[0].topics
        assert lost.error_code == ErrorCode.NOT_CONTROLLER
        assert old.image.topic("once") is None and old.controller.latest_image.topic("once") is None

        quorum.faults.heal()
        retry = await quorum.client(new.node_id)
        again = await retry.request(CREATE_TOPICS, 7, create_topics(new_topic("once")))
        assert again.topics[0].error_code == 0
        created = new.image.topic("once")
        assert created is not None
        await quorum.wait(
            lambda: all(
                (t := h.image.topic("once")) is not None and t.topic_id == created.topic_id
                for h in quorum.hosts.values()
            )
        )
        assert all(topic_records(quorum, i, "once") == 1 for i in quorum.node_ids)
        assert not old.active


async def test_a_write_not_committed_within_the_request_timeout_answers_request_timed_out() -> None:
    quorum = ControllerQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        client = await quorum.client(host.node_id)
        await register_unfenced(client, 1)
        quorum.faults.isolate(host.node_id)  # it still leads, but commits nothing now
        body = {"topics": [new_topic("late")], "timeout_ms": 100, "validate_only": False}
        answer = await client.request(CREATE_TOPICS, 7, body)
        assert [(t.name, t.error_code) for t in answer.topics] == [("late", ErrorCode.REQUEST_TIMED_OUT)]
        assert host.image.topic("late") is None


async def test_a_refused_append_makes_the_leader_resign_and_the_next_epoch_serves_again() -> None:
    quorum = ControllerQuorum(1)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        client = await quorum.client(1)
        await register_unfenced(client, 1)
        driver = quorum.driver(1)
        first_epoch = host.active_epoch
        real_append = driver.append
        refusals = []

        async def refusing_append(values: Any) -> int:
            if not refusals:
                refusals.append(values)
                raise KafkaStorageError("No space left on device")
            return await real_append(values)

        driver.append = refusing_append  # type: ignore[method-assign]
        refused = await client.request(CREATE_TOPICS, 7, create_topics(new_topic("after")))
        assert refused.topics[0].error_code == ErrorCode.NOT_CONTROLLER
        assert host.controller.latest_image.topic("after") is None  # the held records were dropped
        # It resigned: the only voter is elected again in a later epoch and serves again.
        await quorum.wait(lambda: driver.epoch > (first_epoch or 0))
        assert await quorum.active_host() is host
        again = await client.request(CREATE_TOPICS, 7, create_topics(new_topic("after")))
        assert again.topics[0].error_code == 0
        assert host.active_epoch is not None and first_epoch is not None and host.active_epoch > first_epoch
        assert topic_records(quorum, 1, "after") == 1


async def test_controlled_shutdown_moves_leadership_away_before_the_broker_may_stop() -> None:
    quorum = ControllerQuorum(1)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        client = await quorum.client(1)
        epochs = {b: await register_unfenced(client, b) for b in (1, 2)}
        await client.request(CREATE_TOPICS, 7, create_topics(new_topic("led", 2)))
        spread = host.image.topic("led")
        assert spread is not None and sorted(p.leader for p in spread.partitions.values()) == [1, 2]
        first = await client.request(BROKER_HEARTBEAT, 1, heartbeat(2, epochs[2], 0, want_shut_down=True))
        assert (first.error_code, first.should_shut_down) == (0, False)  # not caught up yet
        after = host.image
        assert after.brokers[2].in_controlled_shutdown
        assert sorted(p.leader for p in after.topic("led").partitions.values()) == [-1, 1]  # type: ignore[union-attr]
        # It may stop once every active broker has caught up past its last leadership change
        # (broker 1 says so in its next heartbeat; as in Kafka, replaying broker 1's own
        # unfencing forgot the offset it reported then).
        assert (await client.request(BROKER_HEARTBEAT, 1, heartbeat(1, epochs[1], 2**40))).error_code == 0
        caught_up = await client.request(BROKER_HEARTBEAT, 1, heartbeat(2, epochs[2], 2**40, want_shut_down=True))
        assert (caught_up.error_code, caught_up.should_shut_down) == (0, True)


async def test_a_controller_restarted_behind_a_snapshot_loads_it_and_can_take_over() -> None:
    quorum = ControllerQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S) as nursery:
        host = await quorum.active_host()
        lagging = next(i for i in quorum.node_ids if i != host.node_id)
        client = await quorum.client(host.node_id)
        epoch = await register_unfenced(client, 1)
        await quorum.stop(lagging)
        for name in ("s1", "s2"):
            assert (await client.request(CREATE_TOPICS, 7, create_topics(new_topic(name)))).topics[0].error_code == 0
        snapshot_id, data = build_image_snapshot(host.image, now_ms=host.now_ms())
        await quorum.driver(host.node_id).snapshot(snapshot_id.end_offset, data)
        assert (await client.request(CREATE_TOPICS, 7, create_topics(new_topic("s3")))).topics[0].error_code == 0
        await quorum.start(nursery, lagging)
        restarted = quorum.hosts[lagging]
        await quorum.wait(lambda: _same(restarted.image, host.image))
        assert quorum.recorders[lagging].snapshots  # it did not replay from the start
        await client.aclose()
        # The old leader goes: the other two elect one, which serves with what it loaded.
        await quorum.stop(host.node_id)
        new = await quorum.active_host()
        retry = await quorum.client(new.node_id)
        beat = await retry.request(BROKER_HEARTBEAT, 1, heartbeat(1, epoch, 2**40))
        assert (beat.error_code, beat.is_fenced) == (0, False)
        assert (await retry.request(CREATE_TOPICS, 7, create_topics(new_topic("s4")))).topics[0].error_code == 0
        assert {"s1", "s2", "s3", "s4"} <= set(new.image.topics_by_name)


async def test_committed_metadata_it_cannot_replay_makes_the_controller_step_down_not_crash() -> None:
    quorum = ControllerQuorum(1)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        epoch = host.active_epoch
        assert epoch is not None
        # As if the log held these: the listener calls come from the driver's loop, which
        # must not see them raise.
        host.handle_commit(CommittedBatch(10**6, 10**6, epoch, (b"\x00\x63\x00junk",), False))
        assert not host.active
        await quorum.wait(lambda: quorum.driver(1).epoch > epoch)
        again = await quorum.active_host()
        assert again is host and host.active_epoch is not None and host.active_epoch > epoch
        host.handle_load_snapshot(OffsetAndEpoch(10**6, host.active_epoch), b"not a snapshot")
        assert not host.active
