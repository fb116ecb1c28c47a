"""AlterConfigs and IncrementalAlterConfigs when the metadata log's disk refuses a write: the
quorum writes it again (nothing unflushed counts as written), so the change is answered once it
is durable, on the same connection. A change that waited its turn behind the deletion of its
topic answers UNKNOWN_TOPIC_OR_PARTITION and writes nothing, so the broker starts again."""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkalike.controller.image import TOPIC_RESOURCE
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.metadata_migration import JsonImage
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, serving
from tests.server.test_broker_basics import _create
from tests.server.test_coordinator_off_loop import HOLD_S, METADATA_DIR, Answer, GatedFsync
from tests.server.test_segment_bytes import incremental_alter, legacy_alter


def _topic_configs(running: RunningBroker, topic: str) -> dict[str, str]:
    return dict(running.broker.publisher.image.topic_configs(topic))


@pytest.mark.parametrize("alter", [legacy_alter, incremental_alter])
async def test_a_config_change_whose_metadata_fsync_fails_is_written_again_and_answered_once_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alter: Callable[[AsyncWireClient, str, str, str], Awaitable[Any]]
) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "configured")).error_code == 0
        gate = GatedFsync(METADATA_DIR, failures=1)
        gate.release.set()
        monkeypatch.setattr(os, "fsync", gate.fsync)
        with trio.fail_after(HOLD_S):
            accepted = await alter(client, "configured", "retention.ms", "1234")
        assert gate.failed == 1
        assert accepted.error_code == 0
        assert _topic_configs(running, "configured")["retention.ms"] == "1234"
    async with serving(tmp_path) as restarted:  # and it was written once
        assert _topic_configs(restarted, "configured")["retention.ms"] == "1234"


ZERO_UUID = uuid.UUID(int=0)
DELETE_TOPICS = 20


async def test_a_config_change_queued_behind_its_topics_deletion_answers_unknown_topic_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as running:
        assert running.node is not None
        host = running.node.controller
        client, deleter, alterer = await running.client(), await running.client(), await running.client()
        assert (await _create(client, "doomed")).error_code == 0
        gate = GatedFsync(METADATA_DIR)
        monkeypatch.setattr(os, "fsync", gate.fsync)
        deleted = Answer()
        async with trio.open_nursery() as nursery:
            body = {"topics": [{"name": "doomed", "topic_id": ZERO_UUID}], "timeout_ms": 5000}
            await deleter.send(DELETE_TOPICS, 6, body)
            nursery.start_soon(deleted.receive, deleter, DELETE_TOPICS, 6)
            await gate.wait_entered()  # the deletion's records appended, not yet durable
            altered = Answer()
            nursery.start_soon(_alter_and_receive, alterer, altered)
            # The change has run against the controller's latest state (the topic gone) and, having
            # written nothing, waits for what was appended before it, as Kafka's controller does.
            with trio.fail_after(HOLD_S / 2):
                while len(host._pending) < 2:
                    await trio.sleep(0.001)
            assert not altered.arrived.is_set()
            gate.release.set()
            assert (await deleted.get()).responses[0].error_code == 0
            assert (await altered.get()).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    async with serving(tmp_path) as restarted:
        assert "doomed" not in restarted.broker.publisher.image.topics_by_name


async def _alter_and_receive(client: AsyncWireClient, answer: Answer) -> None:
    answer.message = await legacy_alter(client, "doomed", "retention.ms", "1234")
    answer.arrived.set()


def test_a_config_record_of_a_removed_topic_replays_as_nothing() -> None:
    # Written by a change that raced the deletion before changes checked their topic in turn.
    image = JsonImage()
    image.apply({"type": "topic", "name": "t", "id": str(uuid.UUID(int=1))})
    image.apply({"type": "remove_topic", "topic_id": str(uuid.UUID(int=1))})
    config = {"type": "config", "resource_type": TOPIC_RESOURCE, "resource_name": "t", "name": "retention.ms"}
    image.apply({**config, "value": "1234"})
    assert image.topics == {} and image.broker_configs == {}
