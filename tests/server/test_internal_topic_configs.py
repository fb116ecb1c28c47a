"""The coordinators' internal topics are made with the broker's settings for them, and a
setting the topic refuses leaves FindCoordinator answering COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from pathlib import Path

from kafkalike.group import OFFSETS_TOPIC
from kafkalike.protocol.errors import ErrorCode
from kafkalike.txn import TRANSACTION_STATE_TOPIC
from tests.server.conftest import find_coordinator, serving
from tests.server.test_transactions import Producer

FIND_COORDINATOR = 10
ONE_PARTITION = {"offsets_topic_num_partitions": "1", "transaction_state_log_num_partitions": "1"}


async def test_internal_topics_take_their_segment_bytes_from_the_broker_settings(tmp_path: Path) -> None:
    sizes = {"offsets_topic_segment_bytes": "2097152", "transaction_state_log_segment_bytes": "3145728"}
    async with serving(tmp_path, **ONE_PARTITION, **sizes) as running:
        client = await running.client()
        found = await find_coordinator(running.broker, client, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        assert found.coordinators[0].error_code == 0
        assert (await Producer(client, "tx").init()).error_code == 0  # the first write makes its topic
        topics = running.broker.controller.image.topics
        assert topics[OFFSETS_TOPIC].configs["segment.bytes"] == "2097152"
        assert topics[TRANSACTION_STATE_TOPIC].configs["segment.bytes"] == "3145728"


async def test_internal_topics_default_to_the_declared_segment_bytes(tmp_path: Path) -> None:
    async with serving(tmp_path, **ONE_PARTITION) as running:
        client = await running.client()
        found = await find_coordinator(running.broker, client, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        assert found.coordinators[0].error_code == 0
        assert (await Producer(client, "tx").init()).error_code == 0
        topics = running.broker.controller.image.topics
        assert topics[OFFSETS_TOPIC].configs["segment.bytes"] == "104857600"  # Kafka's default for both
        assert topics[TRANSACTION_STATE_TOPIC].configs["segment.bytes"] == "104857600"


async def test_an_offsets_topic_the_settings_make_invalid_answers_coordinator_not_available(tmp_path: Path) -> None:
    # offsets.topic.segment.bytes accepts 1 byte; the topic's segment.bytes takes 1 MiB at least.
    async with serving(tmp_path, **ONE_PARTITION, offsets_topic_segment_bytes="2048") as running:
        client = await running.client()
        found = await client.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g", "h"]})
        assert [c.error_code for c in found.coordinators] == [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
        assert [(c.node_id, c.host, c.port) for c in found.coordinators] == [(-1, "", -1)] * 2
        old = await client.request(FIND_COORDINATOR, 3, {"key_type": 0, "key": "g"})  # the connection stays open
        assert (old.error_code, old.error_message) == (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "The coordinator is not available.",
        )
        assert OFFSETS_TOPIC not in running.broker.controller.image.topics
