"""The broker's fsyncs run on a worker thread: a slow disk stalls no request but the one that
waits for its own flush (flush.messages / flush.ms), which is answered once the flush is done."""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from kafkalike.log.checkpoint import parse_offset_checkpoint
from kafkalike.log.storage_errors import reporter
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from tests.server.conftest import serving
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body

SLOW_FSYNC_S = 3.0
BIG = build_batch([Record(value=b"v" * 1000) for _ in range(600)])  # 600 KB: a second one rolls a 1 MiB segment


class SlowDisk:
    """``os.fsync`` that waits until released (at most SLOW_FSYNC_S) and counts calls made on
    the event loop's thread before the release."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self.real = real
        self.entered = threading.Event()
        self.release = threading.Event()
        self.on_event_loop = 0

    def fsync(self, fd: int) -> None:
        if threading.current_thread() is threading.main_thread() and not self.release.is_set():
            self.on_event_loop += 1
        self.entered.set()
        self.release.wait(SLOW_FSYNC_S)
        self.real(fd)


def produced(answer: object) -> tuple[int, int]:
    part = answer.responses[0].partition_responses[0]  # type: ignore[attr-defined]
    return part.error_code, part.base_offset


# (topic configs of "slow", broker configs, batches that make the fsync happen)
CASES = {
    "flush.messages": ({"flush_messages": "1"}, {}, [BIG]),
    "flush.ms": ({"flush_ms": "0"}, {}, [BIG]),
    "rolled segment": ({"segment_bytes": "1048576"}, {"log_retention_check_interval_ms": "20"}, [BIG, BIG]),
}


@pytest.mark.parametrize("case", CASES)
async def test_a_slow_fsync_stalls_no_other_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    topic_configs, broker_configs, batches = CASES[case]
    async with serving(tmp_path, **broker_configs) as running:
        writer, other = await running.client(), await running.client()
        assert (await _create(other, "slow", **topic_configs)).error_code == 0
        assert (await _create(other, "fast")).error_code == 0
        disk = SlowDisk(os.fsync)
        monkeypatch.setattr(os, "fsync", disk.fsync)  # from here on every fsync is slow

        for batch in batches[:-1]:
            assert produced(await writer.request(0, 9, _produce_body("slow", 0, batch))) == (0, 0)
        await writer.send(0, 9, _produce_body("slow", 0, batches[-1]))  # its answer may wait for its flush
        await trio.to_thread.run_sync(disk.entered.wait, 10)  # a flush is inside its fsync
        with trio.fail_after(SLOW_FSYNC_S / 2):  # all answered long before that fsync returns
            versions = await other.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert versions.error_code == 0
            assert produced(await other.request(0, 9, _produce_body("fast", 0, build_batch([Record(value=b"x")])))) == (
                0,
                0,
            )
            fetched = await other.request(1, 12, _fetch_body("slow", 0, 0))
            assert fetched.responses[0].partitions[0].error_code == 0
        disk.release.set()
        _, answer = await writer.receive(0, 9)
        assert produced(answer) == (0, 600 * (len(batches) - 1))
        assert disk.on_event_loop == 0


class FailingDisk(SlowDisk):
    """A slow ``os.fsync`` whose first call then fails with EIO."""

    failed = False

    def fsync(self, fd: int) -> None:
        self.entered.set()
        self.release.wait(SLOW_FSYNC_S)
        if not self.failed:
            self.failed = True
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.real(fd)


async def test_a_failed_flush_answers_storage_error_and_the_append_waiting_behind_it_takes_its_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as running:
        first, second, reader = await running.client(), await running.client(), await running.client()
        assert (await _create(reader, "durable", flush_messages="1")).error_code == 0
        assert produced(await first.request(0, 9, _produce_body("durable", 0, build_batch([Record(value=b"ok")])))) == (
            0,
            0,
        )
        disk = FailingDisk(os.fsync)
        monkeypatch.setattr(os, "fsync", disk.fsync)

        await first.send(0, 9, _produce_body("durable", 0, build_batch([Record(value=b"lost")])))
        await trio.to_thread.run_sync(disk.entered.wait, 10)
        await second.send(0, 9, _produce_body("durable", 0, build_batch([Record(value=b"kept")])))
        with trio.fail_after(SLOW_FSYNC_S / 2):  # the unflushed record is not visible meanwhile
            fetched = await reader.request(1, 12, _fetch_body("durable", 0, 1))
            assert fetched.responses[0].partitions[0].high_watermark == 1
        disk.release.set()
        _, refused = await first.receive(0, 9)
        assert produced(refused) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        _, kept = await second.receive(0, 9)
        assert produced(kept) == (0, 1)  # the refused append was cut; the one behind it took its place
        fetched = await reader.request(1, 12, _fetch_body("durable", 0, 0))
        data = bytes(fetched.responses[0].partitions[0].records)
        assert [r.value for pos, h in iter_batches(data) for r in decode_records(data, pos, h)] == [b"ok", b"kept"]


async def test_segment_files_are_unlinked_on_a_worker_thread_and_a_failure_there_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(tmp_path, log_retention_check_interval_ms="20") as running:
        client = await running.client()
        configs = {"segment_bytes": "1048576", "retention_bytes": "1048576", "file_delete_delay_ms": "0"}
        assert (await _create(client, "old", **configs)).error_code == 0
        unlinked = trio.Event()
        token = trio.lowlevel.current_trio_token()
        threads: list[bool] = []

        def failing_unlink(path: str, *args: object, **kwargs: object) -> None:
            if str(path).endswith(".deleted"):
                threads.append(threading.current_thread() is threading.main_thread())
                token.run_sync_soon(unlinked.set)
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        reporter.forget()  # an earlier test's line for the same failure must not hold this one back
        reported = trio.Event()

        class Reported(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "segment deletion" in record.getMessage():
                    reported.set()  # logged on the event loop's thread

        handler = Reported()
        logging.getLogger("kafkalike.log.storage").addHandler(handler)
        with caplog.at_level(logging.INFO):
            for _ in range(3):  # two rolls: retention deletes the oldest segment
                assert produced(await client.request(0, 9, _produce_body("old", 0, BIG)))[0] == 0
            monkeypatch.setattr(os, "unlink", failing_unlink)
            with trio.fail_after(10):
                await unlinked.wait()
                await reported.wait()
            monkeypatch.undo()
            logging.getLogger("kafkalike.log.storage").removeHandler(handler)
            answer = await client.request(0, 9, _produce_body("old", 0, build_batch([Record(value=b"alive")])))
            assert produced(answer)[0] == 0
        assert threads and not any(threads)  # on a worker thread, never on the event loop
        assert not [r for r in caplog.records if r.exc_info]  # reported, not a traceback and a restarted job


async def test_delete_records_answers_once_the_log_start_is_checkpointed_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "dr")).error_code == 0
        for _ in range(4):
            await client.request(0, 9, _produce_body("dr", 0, build_batch([Record(value=b"x")] * 5)))
        on_loop: list[bool] = []
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            on_loop.append(threading.current_thread() is threading.main_thread())
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        body = {"topics": [{"name": "dr", "partitions": [{"partition_index": 0, "offset": 10}]}], "timeout_ms": 1000}
        answer = await client.request(21, 2, body)
        assert answer.topics[0].partitions[0].low_watermark == 10
        checkpoint = parse_offset_checkpoint((tmp_path / "data" / "log-start-offset-checkpoint").read_bytes())
        assert checkpoint[("dr", 0)] == 10
        assert on_loop and not any(on_loop)
        monkeypatch.undo()
