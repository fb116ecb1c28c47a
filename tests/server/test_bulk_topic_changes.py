"""Huge admin requests: refused at once with Kafka's limits, and never a stall for other clients.

The ordering tests hold the first new partition's file creation at a gate (a threading.Event)
and check what other clients get answered while it is held: they need no timings. Were the
files made on the event loop, the gate would hold the loop itself, and nothing would be answered
until the gate's bounded wait ran out.
"""

from __future__ import annotations

import errno
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from kafkalike.log.partition_log import PartitionLog
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch
from tests.server.conftest import RunningBroker
from tests.server.test_broker_basics import _create, _produce_body

GATE_HELD_S = 10.0
ZERO_UUID = uuid.UUID(int=0)


def _spec(name: str, partitions: int, configs: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": 1,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def _create_body(topics: list[dict[str, Any]], validate_only: bool = False) -> dict[str, Any]:
    return {"topics": topics, "timeout_ms": 30000, "validate_only": validate_only}


def _metadata_body(names: list[str], auto_create: bool) -> dict[str, Any]:
    return {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": auto_create}


def _partition_dirs(running: RunningBroker) -> set[str]:
    return {p.name for p in running.broker.data_dir.iterdir() if p.is_dir() and not p.name.startswith("__")}


class Gate:
    """Holds the first PartitionLog.open until released (or GATE_HELD_S passed)."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.held_on_loop_thread = False


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    gate = Gate()
    original = PartitionLog.open.__func__  # type: ignore[attr-defined]
    loop_thread = threading.current_thread()

    def gated_open(cls: type[PartitionLog], *args: Any, **kwargs: Any) -> PartitionLog:
        if not gate.reached.is_set():
            gate.held_on_loop_thread = threading.current_thread() is loop_thread
            gate.reached.set()
            gate.release.wait(GATE_HELD_S)
        return original(cls, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(PartitionLog, "open", classmethod(gated_open))
    yield gate
    gate.release.set()


async def _answered_meanwhile(running: RunningBroker, gate: Gate, topic: str) -> list[str]:
    """With the gate reached: what another client gets answered (ApiVersions, a small produce)."""
    with trio.fail_after(GATE_HELD_S * 2):
        await trio.to_thread.run_sync(gate.reached.wait, GATE_HELD_S)
    other = await running.client()
    answered = []
    with trio.move_on_after(GATE_HELD_S / 2):
        versions = await other.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        answered.append(f"ApiVersions {versions.error_code}")
        batch = build_batch([Record(value=b"small")])
        produced = await other.request(0, 9, _produce_body(topic, 0, batch))
        answered.append(f"Produce {produced.responses[0].partition_responses[0].error_code}")
    return answered


async def test_other_clients_are_answered_while_a_thousand_topics_are_created(
    running: RunningBroker, gate: Gate
) -> None:
    admin = await running.client()
    await _create(admin, "busy")
    gate.reached.clear()  # the gate holds the next topic creation
    names = [f"bulk-{i}" for i in range(1000)]
    await admin.send(19, 7, _create_body([_spec(n, 1) for n in names]))

    answered = await _answered_meanwhile(running, gate, "busy")
    created_meanwhile = set(running.broker.controller.image.topics) & set(names)
    gate.release.set()
    with trio.fail_after(60):
        _, response = await admin.receive(19, 7)

    assert not gate.held_on_loop_thread
    assert answered == ["ApiVersions 0", "Produce 0"]
    assert not created_meanwhile, "topics became visible before their partitions were ready"
    assert [t.error_code for t in response.topics] == [0] * 1000
    assert set(names) <= set(running.broker.controller.image.topics)
    assert {f"{n}-0" for n in names} <= _partition_dirs(running)


async def test_metadata_auto_creating_many_answers_at_once_and_others_meanwhile(
    running: RunningBroker, gate: Gate
) -> None:
    client = await running.client()
    await _create(client, "busy")
    gate.reached.clear()
    names = [f"auto-{i}" for i in range(2000)]
    with trio.fail_after(GATE_HELD_S / 2):
        first = await client.request(3, 12, _metadata_body(names, auto_create=True))
    # Kafka's answer while its controller creates them: unknown, ask again.
    assert {t.error_code for t in first.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    answered = await _answered_meanwhile(running, gate, "busy")
    gate.release.set()
    with trio.fail_after(60):
        await running.broker.wait_auto_creations()
    later = await client.request(3, 12, _metadata_body(names, auto_create=False))

    assert not gate.held_on_loop_thread
    assert answered == ["ApiVersions 0", "Produce 0"]
    assert {t.error_code for t in later.topics} == {0}


async def test_a_million_partitions_are_refused_at_once_with_nothing_created(running: RunningBroker) -> None:
    client = await running.client()
    before = _partition_dirs(running)
    for validate_only in (False, True):
        with trio.fail_after(10):
            response = await client.request(19, 7, _create_body([_spec("huge", 1_000_000)], validate_only))
        (topic,) = response.topics
        assert topic.error_code == ErrorCode.POLICY_VIOLATION
        assert topic.error_message == "Excessively large number of partitions per request."
    meta = await client.request(3, 12, _metadata_body(["huge"], auto_create=False))
    assert meta.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _partition_dirs(running) == before


async def test_topics_adding_up_past_the_limit_refuse_every_topic_of_the_request(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "exists")
    # Partitions: 11,000 with the existing topic counted (Kafka counts before looking at any).
    over = [_spec("a", 5000), _spec("b", 5000), _spec("exists", 1000), _spec("bad/name", 1)]
    response = await client.request(19, 7, _create_body(over))
    assert [(t.name, t.error_code) for t in response.topics] == [(s["name"], ErrorCode.POLICY_VIOLATION) for s in over]
    assert {t.error_message for t in response.topics} == {"Excessively large number of partitions per request."}
    # 9,999 partitions pass the count, but with their topic and config records it is 10,002 records.
    records_over = [_spec("c", 4999, {"retention.ms": "60000"}), _spec("d", 5000)]
    response = await client.request(19, 7, _create_body(records_over))
    assert {(t.error_code, t.error_message) for t in response.topics} == {
        (ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
    }
    meta = await client.request(3, 12, _metadata_body(["a", "b", "c", "d"], auto_create=False))
    assert {t.error_code for t in meta.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _partition_dirs(running) == {"exists-0"}


async def test_create_partitions_past_the_limit_grow_nothing(running: RunningBroker) -> None:
    client = await running.client()
    await _create(client, "grow")
    await _create(client, "grow-too")
    body = {
        "topics": [
            {"name": "grow", "count": 20_000, "assignments": None},
            {"name": "grow-too", "count": 2, "assignments": None},
        ],
        "timeout_ms": 5000,
        "validate_only": False,
    }
    with trio.fail_after(10):
        response = await client.request(37, 3, body)
    # As Kafka 4.4 answers: more than 10,000 new partitions in all refuse every topic.
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("grow", ErrorCode.POLICY_VIOLATION, "Excessively large number of additional partitions per request."),
        ("grow-too", ErrorCode.POLICY_VIOLATION, "Excessively large number of additional partitions per request."),
    ]
    assert running.broker.controller.image.topics["grow"].partitions == 1
    assert _partition_dirs(running) == {"grow-0", "grow-too-0"}


async def _produce_error(client: Any, topic: str, partition: int) -> int:
    response = await client.request(0, 9, _produce_body(topic, partition, build_batch([Record(value=b"v")])))
    return int(response.responses[0].partition_responses[0].error_code)


async def test_a_full_disk_while_creating_leaves_the_partitions_offline_until_the_disk_takes_them(
    running: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Kafka's controller answers, the topics are created: their records are committed before
    any broker makes a log. The broker whose disk refuses a log keeps nothing half made and
    answers KAFKA_STORAGE_ERROR for those partitions (Kafka's offline partitions), then opens
    them once the disk takes them, without a restart."""
    client = await running.client()
    original = PartitionLog.open.__func__  # type: ignore[attr-defined]
    calls = 0
    full = threading.Event()
    full.set()

    def filling_open(cls: type[PartitionLog], *args: Any, **kwargs: Any) -> PartitionLog:
        nonlocal calls
        calls += 1
        if calls >= 150 and full.is_set():
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(cls, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(PartitionLog, "open", classmethod(filling_open))
    response = await client.request(19, 7, _create_body([_spec("x", 100), _spec("y", 100)]))
    assert {t.error_code for t in response.topics} == {0}
    publisher = running.broker.publisher
    assert publisher.offline
    assert await _produce_error(client, "x", 0) == ErrorCode.KAFKA_STORAGE_ERROR
    assert await _produce_error(client, "y", 99) == ErrorCode.KAFKA_STORAGE_ERROR
    assert await _produce_error(client, "y", 100) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not any(name in ("x", "y") for name, _ in running.broker.partitions)
    full.clear()  # room on the disk again: the next try opens them
    with trio.fail_after(30):
        await publisher.wait_all_open()
    assert await _produce_error(client, "x", 0) == 0
    assert await _produce_error(client, "y", 99) == 0
    assert _partition_dirs(running) == {f"{t}-{i}" for t in ("x", "y") for i in range(100)}


async def test_deleting_many_topics_removes_their_directories_and_frees_the_names(running: RunningBroker) -> None:
    client = await running.client()
    names = [f"gone-{i}" for i in range(50)]
    await client.request(19, 7, _create_body([_spec(n, 4) for n in names]))
    response = await client.request(
        20, 6, {"topics": [{"name": n, "topic_id": ZERO_UUID} for n in names], "timeout_ms": 5000}
    )
    assert {r.error_code for r in response.responses} == {0}
    assert _partition_dirs(running) == set()
    # Created again at once under the same names: new, empty partitions.
    response = await client.request(19, 7, _create_body([_spec(n, 1) for n in names]))
    assert {t.error_code for t in response.topics} == {0}
    assert _partition_dirs(running) == {f"{n}-0" for n in names}


async def test_metadata_naming_more_topics_than_one_operation_holds_creates_none(running: RunningBroker) -> None:
    client = await running.client()
    names = [f"many-{i}" for i in range(20_000)]
    with trio.fail_after(30):
        response = await client.request(3, 12, _metadata_body(names, auto_create=True))
        await running.broker.wait_auto_creations()
    assert {t.error_code for t in response.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert not set(names) & set(running.broker.controller.image.topics)
    assert _partition_dirs(running) == set()


async def test_the_largest_operation_is_one_metadata_batch_and_replays_whole(tmp_path: Any) -> None:
    from kafkalike.protocol.metadata_records import MetadataRecordType, read_metadata_batches
    from tests.server.conftest import serving

    def batches_naming_topics() -> list[set[str]]:
        """The topic names of each metadata batch that creates topics (other writes, such as a
        broker's heartbeat records on a busy machine, may come between)."""
        found = []
        for path in sorted((tmp_path / "data" / "__cluster_metadata-0").glob("*.log")):
            for batch in read_metadata_batches(path.read_bytes(), partial_ok=True):
                topics = {r.message.name for r in batch.records if r.type == MetadataRecordType.TOPIC_RECORD}
                if topics:
                    found.append(topics)
        return found

    # 4,999 topics of the longest name: 9,998 records as Kafka counts them, ~3 MB written here.
    names = [f"{i:04d}".ljust(249, "n") for i in range(4999)]
    async with serving(tmp_path) as running:
        client = await running.client()
        before = batches_naming_topics()
        with trio.fail_after(60):
            response = await client.request(19, 7, _create_body([_spec(n, 1) for n in names]))
        assert {t.error_code for t in response.topics} == {0}
        # A crash keeps all of the operation or none: every topic in the one batch.
        assert batches_naming_topics() == [*before, set(names)]
    async with serving(tmp_path) as restarted:
        assert set(names) <= set(restarted.broker.publisher.image.topics_by_name)


async def test_a_left_directory_of_another_topic_is_a_storage_error_not_a_closed_connection(
    running: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafkalike.log.checkpoint import format_partition_metadata
    from kafkalike.server import metadata_publisher

    monkeypatch.setattr(metadata_publisher, "PARTITION_RETRY_FIRST_S", 3600.0)  # tried again with the next change
    client = await running.client()
    stale = running.broker.data_dir / "stale-0"  # as a directory that could not be renamed leaves it
    stale.mkdir()
    (stale / "partition.metadata").write_bytes(format_partition_metadata(uuid.uuid4()))
    response = await client.request(19, 7, _create_body([_spec("stale", 1)]))
    assert response.topics[0].error_code == 0
    # Same connection: the partition answers KAFKA_STORAGE_ERROR, the stray files are removed,
    # and it opens when the broker takes its next change.
    assert await _produce_error(client, "stale", 0) == ErrorCode.KAFKA_STORAGE_ERROR
    assert running.broker.publisher.offline
    assert (await _create(client, "next")).error_code == 0
    assert not running.broker.publisher.offline
    assert await _produce_error(client, "stale", 0) == 0
    assert await _produce_error(client, "next", 0) == 0
    topic_id = running.broker.publisher.image.topics_by_name["stale"].topic_id
    assert (stale / "partition.metadata").read_bytes() == format_partition_metadata(topic_id)
