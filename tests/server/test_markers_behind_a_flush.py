"""Transaction markers wait for a flush in flight on their partition (the marker would be in the
way if that flush's append had to be cut) — and waiting for it is not an error of the
coordinator's timers."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.protocol.records import Record, build_batch
from tests.server.test_broker_basics import _create, _produce_body
from tests.server.test_transactions import SMALL, Producer, completed, serving

HELD_FSYNC_S = 5.0


class HeldPartitionFsync:
    """``os.fsync`` that holds the fsyncs of one partition's files until released (at most
    HELD_FSYNC_S); every other file syncs at once."""

    def __init__(self, real: Callable[[int], None], partition_dir: str) -> None:
        self.real = real
        self.partition_dir = partition_dir
        self.entered = threading.Event()
        self.release = threading.Event()

    def fsync(self, fd: int) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        if f"/{self.partition_dir}/" in path:
            self.entered.set()
            self.release.wait(HELD_FSYNC_S)
        self.real(fd)


async def test_markers_wait_for_a_flush_in_flight_without_failing_the_coordinator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(tmp_path, **SMALL) as running:
        client, writer = await running.client(), await running.client()
        assert (await _create(client, "slow", flush_messages="1")).error_code == 0
        p = Producer(client, "behind-a-flush")
        assert (await p.init()).error_code == E.NONE
        await p.add("slow", 0)
        assert (await p.send("slow", 0, b"in the transaction")).error_code == E.NONE

        disk = HeldPartitionFsync(os.fsync, "slow-0")
        monkeypatch.setattr(os, "fsync", disk.fsync)
        await writer.send(0, 9, _produce_body("slow", 0, build_batch([Record(value=b"plain")])))
        await trio.to_thread.run_sync(disk.entered.wait, 10)  # that append's flush is held

        with caplog.at_level(logging.ERROR, logger="kafkalike"):
            assert await p.end(commit=True) == E.NONE  # PrepareCommit is durable; the marker must wait
            disk.release.set()
            assert await completed(running, client, "behind-a-flush") == "CompleteCommit"
        _, answer = await writer.receive(0, 9)
        assert answer.responses[0].partition_responses[0].error_code == 0
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
