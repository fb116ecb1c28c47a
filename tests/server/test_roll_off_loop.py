"""A segment roll's files are made on a worker thread: the appends behind it wait, in order,
everyone else is answered meanwhile, and a roll the disk refuses loses nothing."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkalike.log.segment import PreparedRoll
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from tests.server.conftest import RunningBroker, serving
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body

GATE_S = 10.0
HALF = build_batch([Record(value=b"h" * 600)])  # two of them do not fit a 1 KiB segment


def produced(answer: Any) -> tuple[int, int]:
    part = answer.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


async def values(running: RunningBroker, topic: str) -> list[bytes]:
    client = await running.client()
    data = bytes((await client.request(1, 12, _fetch_body(topic, 0, 0))).responses[0].partitions[0].records)
    return [r.value or b"" for pos, h in iter_batches(data) for r in decode_records(data, pos, h)]


async def test_appends_behind_a_roll_on_a_worker_thread_wait_in_order_and_others_are_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as running:
        broker = running.broker
        first, second, other = await running.client(), await running.client(), await running.client()
        assert (await _create(other, "rolling", internal_segment_bytes="1024")).error_code == 0
        assert (await _create(other, "calm")).error_code == 0
        assert produced(await first.request(0, 9, _produce_body("rolling", 0, HALF))) == (0, 0)
        entered, release = threading.Event(), threading.Event()
        create = PreparedRoll.create

        def held_create(self: PreparedRoll) -> None:
            if threading.current_thread() is threading.main_thread():
                raise AssertionError("a roll's files made on the event loop")
            entered.set()
            release.wait(GATE_S)
            create(self)

        monkeypatch.setattr(PreparedRoll, "create", held_create)
        await first.send(0, 9, _produce_body("rolling", 0, HALF))  # needs a new segment
        await trio.to_thread.run_sync(entered.wait, GATE_S)
        await second.send(0, 9, _produce_body("rolling", 0, build_batch([Record(value=b"behind")])))
        with trio.fail_after(GATE_S / 2):  # all answered while the roll's thread is held
            versions = await other.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert versions.error_code == 0
            assert produced(await other.request(0, 9, _produce_body("calm", 0, build_batch([Record(value=b"x")])))) == (
                0,
                0,
            )
            fetched = await other.request(1, 12, _fetch_body("rolling", 0, 0))
            assert fetched.responses[0].partitions[0].high_watermark == 1
        release.set()
        _, rolled = await first.receive(0, 9)
        _, behind = await second.receive(0, 9)
        assert (produced(rolled), produced(behind)) == ((0, 1), (0, 2))
        assert await values(running, "rolling") == [b"h" * 600, b"h" * 600, b"behind"]
        assert len(broker.partitions[("rolling", 0)].log.segments) == 2


async def test_a_roll_the_disk_refuses_answers_storage_error_and_the_next_append_rolls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as running:
        broker = running.broker
        client = await running.client()
        assert (await _create(client, "rolling", internal_segment_bytes="1024")).error_code == 0
        assert produced(await client.request(0, 9, _produce_body("rolling", 0, HALF))) == (0, 0)
        create = PreparedRoll.create
        failures = [OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))]

        def full_disk(self: PreparedRoll) -> None:
            if failures:
                create(self)  # the files are made, then the disk fills up: all of it is undone
                self.discard()
                raise failures.pop()
            create(self)

        monkeypatch.setattr(PreparedRoll, "create", full_disk)
        refused = await client.request(0, 9, _produce_body("rolling", 0, build_batch([Record(value=b"r" * 600)])))
        assert produced(refused) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        assert len(broker.partitions[("rolling", 0)].log.segments) == 1
        kept = await client.request(0, 9, _produce_body("rolling", 0, build_batch([Record(value=b"k" * 600)])))
        assert produced(kept) == (0, 1)
        assert await values(running, "rolling") == [b"h" * 600, b"k" * 600]

    async with serving(tmp_path) as running:
        log = running.broker.partitions[("rolling", 0)].log
        assert (log.log_end_offset, len(log.segments), log.truncated_bytes) == (2, 2, 0)
