"""The metadata log is never aged out: Kafka deletes `__cluster_metadata` only below its latest
snapshot, so retention by time or size must not remove the records a restart replays."""

from __future__ import annotations

from pathlib import Path

from kafkalike.server.broker import METADATA_TOPIC, Broker
from tests.server.conftest import make_config

DAY_MS = 86_400_000


def _opened(tmp_path: Path) -> Broker:
    broker = Broker(make_config(tmp_path, log_retention_ms="60000", log_retention_bytes="1"))
    broker.open()
    return broker


def test_retention_keeps_the_metadata_log_and_its_topics_survive_a_restart(tmp_path: Path) -> None:
    first = _opened(tmp_path)
    first.create_topic("kept", 1, {})
    first.close()

    # Reloaded, the metadata log's records are all committed (below its high watermark), as
    # they are after any restart: retention may delete what it judges expired.
    second = _opened(tmp_path)
    metadata_log = second.logs.get(METADATA_TOPIC, 0)
    assert metadata_log is not None and metadata_log.high_watermark == metadata_log.log_end_offset
    metadata_log.roll(second.clock.wall_ms())  # the first topic's records now sit in an inactive segment
    second.create_topic("later", 1, {})
    second.logs.run_retention(second.clock.wall_ms() + 30 * DAY_MS)
    assert metadata_log.log_start_offset == 0
    second.close()

    third = _opened(tmp_path)
    try:
        assert {"kept", "later"} <= set(third.controller.image.topics)
    finally:
        third.close()
