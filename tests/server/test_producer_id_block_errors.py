"""InitProducerId while the metadata log cannot take a new producer id block: Kafka's answer,
COORDINATOR_LOAD_IN_PROGRESS (retriable: "Producer ID block is full. Waiting for next block"),
and the connection stays open; once the disk takes the block the next call gets an id."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalike.protocol.errors import ErrorCode
from tests.server.conftest import init_producer_id, serving
from tests.server.test_coordinator_off_loop import METADATA_DIR, SMALL, GatedFsync

INIT_PRODUCER_ID = 22


def init_body(transactional_id: str | None) -> dict[str, object]:
    return {
        "transactional_id": transactional_id,
        "transaction_timeout_ms": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }


@pytest.mark.parametrize("transactional_id", [None, "tx"])
async def test_a_producer_id_block_the_disk_refuses_answers_coordinator_load_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transactional_id: str | None
) -> None:
    async with serving(tmp_path, **SMALL) as running:
        client = await running.client()
        if transactional_id is not None:  # __transaction_state made first, on a healthy disk
            await running.broker.txn._ensure_state_topic()
        gate = GatedFsync(METADATA_DIR, failures=1)
        gate.release.set()
        monkeypatch.setattr(os, "fsync", gate.fsync)
        refused = await client.request(INIT_PRODUCER_ID, 4, init_body(transactional_id))
        assert (refused.error_code, refused.producer_id) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1)
        # Retried as a client retries: an id once the block's record is durable.
        granted = await init_producer_id(client, init_body(transactional_id))
        assert granted.error_code == 0 and granted.producer_id >= 0
        assert gate.failed == 1
