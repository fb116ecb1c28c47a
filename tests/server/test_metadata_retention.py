"""The metadata log is never aged out: Kafka deletes `__cluster_metadata` only below its latest
snapshot, so retention by time or size must not remove the records a restart replays."""

from __future__ import annotations

from pathlib import Path

from kafkalike.server.broker import METADATA_TOPIC
from tests.server.conftest import serving
from tests.server.test_broker_basics import _create

DAY_MS = 86_400_000
RETENTION = {"log_retention_ms": "60000", "log_retention_bytes": "1"}


async def _topics(tmp_path: Path) -> set[str]:
    async with serving(tmp_path, **RETENTION) as running:
        client = await running.client()
        metadata = await client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
        return {t.name for t in metadata.topics}


async def test_retention_keeps_the_metadata_log_and_its_topics_survive_a_restart(tmp_path: Path) -> None:
    async with serving(tmp_path, **RETENTION) as running:
        assert (await _create(await running.client(), "kept")).error_code == 0

    async with serving(tmp_path, **RETENTION) as running:
        broker = running.broker
        # The metadata log is the quorum's, never one of the partitions the broker's retention runs over.
        assert broker.logs.get(METADATA_TOPIC, 0) is None
        assert (await _create(await running.client(), "later")).error_code == 0
        broker.logs.run_retention(broker.clock.wall_ms() + 30 * DAY_MS)

    assert {"kept", "later"} <= await _topics(tmp_path)
