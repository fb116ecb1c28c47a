"""AlterConfigs and IncrementalAlterConfigs when the metadata log's disk refuses the change:
the resource answers KAFKA_STORAGE_ERROR, nothing changes, the connection stays open, and the
same change goes through once the disk takes it."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import serving
from tests.server.test_broker_basics import _create
from tests.server.test_coordinator_off_loop import METADATA_DIR, GatedFsync
from tests.server.test_segment_bytes import incremental_alter, legacy_alter


@pytest.mark.parametrize("alter", [legacy_alter, incremental_alter])
async def test_a_config_change_the_metadata_disk_refuses_answers_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alter: Callable[[AsyncWireClient, str, str, str], Awaitable[Any]]
) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "configured")).error_code == 0
        gate = GatedFsync(METADATA_DIR, failures=1)
        gate.release.set()
        monkeypatch.setattr(os, "fsync", gate.fsync)
        refused = await alter(client, "configured", "retention.ms", "1234")
        assert gate.failed == 1
        assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "retention.ms" not in running.broker.controller.image.topics["configured"].configs
        accepted = await alter(client, "configured", "retention.ms", "1234")
        assert accepted.error_code == 0
        assert running.broker.controller.image.topics["configured"].configs["retention.ms"] == "1234"
