"""The loop-blocking checker: it records blocking file-system calls made on a trio loop's
thread, with their callers, and none made on worker threads; and it catches the broker when
an fsync goes back onto the loop (the negative control for tests/server/test_loop_io.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import trio

from kafkalike.log.storage import DeferredSyncs, SegmentFile
from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.loop_blocking import LoopBlockingCalls
from tests.server.conftest import serving
from tests.server.test_broker_basics import _create, _produce_body


def _blocking_work(root: Path) -> None:
    fd = os.open(root / "file", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.fsync(fd)
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    os.replace(root / "file", root / "renamed")
    os.mkdir(root / "dir")
    os.listdir(root / "dir")
    with os.scandir(root / "dir"):
        pass
    shutil.rmtree(root / "dir")
    os.unlink(root / "renamed")


WORK = f"{_blocking_work.__module__}.{_blocking_work.__qualname__}"  # as the checker names it


async def test_calls_on_the_loop_are_recorded_with_their_callers_and_worker_threads_are_not(tmp_path: Path) -> None:
    with LoopBlockingCalls(roots=[tmp_path]) as calls:
        await trio.to_thread.run_sync(_blocking_work, tmp_path)
        assert calls.calls == []
        _blocking_work(tmp_path)
    names = [c.call.split("(", 1)[0] for c in calls.calls]
    expected_calls = ("os.open", "os.fsync", "os.ftruncate", "os.replace", "os.mkdir", "os.listdir", "os.scandir")
    for expected in (*expected_calls, "shutil.rmtree", "os.unlink"):
        assert expected in names
    # Each call names its caller first (the functions shutil.rmtree calls, rmtree itself).
    callers = {c.stack[0].split(" ", 1)[0] for c in calls.calls}
    assert WORK in callers
    assert all(any("_blocking_work" in frame for frame in c.stack) for c in calls.calls)
    with pytest.raises(AssertionError, match=r"blocking file-system call\(s\) on the event loop") as failure:
        calls.check()
    assert "os.fsync" in str(failure.value)
    assert "_blocking_work" in str(failure.value)


async def test_an_allowed_caller_and_paths_outside_the_roots_are_not_reported(tmp_path: Path) -> None:
    watched, elsewhere = tmp_path / "watched", tmp_path / "elsewhere"
    watched.mkdir()
    elsewhere.mkdir()
    with LoopBlockingCalls(roots=[watched]) as calls:
        with open(elsewhere / "not-watched", "wb"):
            pass
        assert calls.calls == []
        _blocking_work(watched)
    assert calls.calls
    calls.check(allow={WORK: "this test's own blocking work"})
    # Uninstalled: the real functions are back.
    assert os.fsync.__module__ in ("posix", "os", "nt")


def test_outside_a_trio_loop_nothing_is_recorded(tmp_path: Path) -> None:
    with LoopBlockingCalls(roots=[tmp_path]) as calls:
        _blocking_work(tmp_path)
    assert calls.calls == []


async def test_it_catches_the_broker_fsyncing_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: an append's flush (flush.messages=1) fsyncs on the loop again, as if
    ``DeferredSyncs`` ran each fsync where it is collected; the checker names the call and
    the broker's frames it came through."""

    def fsync_at_once(self: DeferredSyncs, file: SegmentFile) -> None:
        file.flush()

    async with serving(tmp_path) as running:
        client = await running.client()
        assert (await _create(client, "durable", flush_messages="1")).error_code == 0
        batch = build_batch([Record(value=b"x")])
        with LoopBlockingCalls(roots=[tmp_path]) as calls:
            answer = await client.request(0, 9, _produce_body("durable", 0, batch))
            assert answer.responses[0].partition_responses[0].error_code == 0
            calls.check()  # as it is: the fsync runs on a worker thread
            monkeypatch.setattr(DeferredSyncs, "file", fsync_at_once)
            answer = await client.request(0, 9, _produce_body("durable", 0, batch))
            assert answer.responses[0].partition_responses[0].error_code == 0
        with pytest.raises(AssertionError) as failure:
            calls.check()
        report = str(failure.value)
        assert "os.fsync(" in report
        assert "kafkalike.server.appends.PartitionWriter.append" in report
