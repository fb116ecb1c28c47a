"""A real full filesystem under ``kafkalike serve``: a 4 MiB tmpfs as its data directory.

Produce until the disk is full: KAFKA_STORAGE_ERROR answers, the broker alive and answering
Metadata and Fetch with every acknowledged record, its background checkpoint job failing and
the broker staying up; then space freed and produce working again; after a restart everything
acknowledged is still there and ``kafkalike storage verify`` finds nothing wrong.

Mounting needs root (CI runs as root); elsewhere the test is skipped, saying so.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalike.log.checkpoint import CheckpointError, parse_offset_checkpoint
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.testing.process import BrokerProcess
from kafkalike.testing.wire_client import WireClient
from tests.server.test_broker_basics import _fetch_body, _produce_body

DISK_BYTES = 4 << 20
RECORD = b"r" * 1000
BATCH_RECORDS = 16
MAX_BATCHES = DISK_BYTES // (len(RECORD) * BATCH_RECORDS) + 10  # the disk is full well before this


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill_but(path: Path, spare_bytes: int) -> None:
    """Take all the filesystem's free space into ``path``, then give ``spare_bytes`` back."""
    with open(path, "ab", buffering=0) as f:
        chunk = b"\0" * 65536
        for _ in range(DISK_BYTES // len(chunk) + 1):
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        else:
            pytest.fail("the filesystem never filled up")
    os.truncate(path, max(path.stat().st_size - spare_bytes, 0))


def create_topic(client: WireClient, name: str) -> int:
    body = {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000,
        "validate_only": False,
    }
    return int(client.request(19, 7, body).topics[0].error_code)


def produce(client: WireClient, values: list[bytes], topic: str = "fill") -> Any:
    batch = build_batch([Record(value=v) for v in values], base_timestamp=int(time.time() * 1000))
    return client.request(0, 9, _produce_body(topic, 0, batch)).responses[0].partition_responses[0]


def fetch_all(client: WireClient, topic: str = "fill") -> list[bytes | None]:
    values: list[bytes | None] = []
    for _ in range(MAX_BATCHES * BATCH_RECORDS):
        answer = client.request(1, 12, _fetch_body(topic, 0, len(values))).responses[0].partitions[0]
        assert answer.error_code == 0
        data = bytes(answer.records or b"")
        got = [r.value for pos, h in iter_batches(data) for r in decode_records(data, pos, h)]
        if not got:
            return values
        values += got
    pytest.fail("fetching never reached the end of the log")


def wait_until(broker: BrokerProcess, what: str, condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Until ``condition()`` holds (the broker's output, or a file it writes), with a deadline."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert broker.running, "".join(broker.output)
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s} s:\n" + "".join(broker.output[-30:]))
        time.sleep(0.05)  # polling a file another process writes, bounded by the deadline above


def logged(broker: BrokerProcess, text: str) -> Callable[[], bool]:
    return lambda: any(text in line for line in broker.output)


def checkpointed(data_dir: Path, topic: str, offset: int) -> Callable[[], bool]:
    def check() -> bool:
        try:
            checkpoint = parse_offset_checkpoint((data_dir / "recovery-point-offset-checkpoint").read_bytes())
        except (FileNotFoundError, CheckpointError):
            return False
        return checkpoint.get((topic, 0)) == offset

    return check


def test_a_full_disk_refuses_produce_keeps_serving_and_recovers_when_space_returns(small_disk: Path) -> None:
    data_dir = small_disk / "data"
    filler = small_disk / "filler"
    overrides = [
        "log.retention.check.interval.ms=100",
        "log.flush.interval.ms=100",
        "log.flush.offset.checkpoint.interval.ms=100",
    ]
    with BrokerProcess(data_dir, overrides) as broker, WireClient(broker.host, broker.port) as client:
        assert create_topic(client, "fill") == 0
        # A partition whose one small batch leaves most of its file's last page unused: once the
        # disk is full, a tiny append there still fits, and moves a recovery point to checkpoint.
        assert create_topic(client, "slack") == 0
        assert produce(client, [b"slack-0"], "slack").error_code == 0
        wait_until(broker, "first checkpoint", checkpointed(data_dir, "slack", 1))
        fill_but(filler, 256 << 10)

        acked: list[bytes] = []
        refused = None
        for n in range(MAX_BATCHES):
            values = [b"%d-%d-" % (n, i) + RECORD for i in range(BATCH_RECORDS)]
            answer = produce(client, values)
            if answer.error_code != 0:
                refused = answer
                break
            assert answer.base_offset == len(acked)
            acked += values
        assert refused is not None, "the disk never filled up"
        assert (refused.error_code, refused.base_offset) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        assert acked, "nothing fitted before the disk was full"
        for _ in range(3):  # as big as the refused one (a smaller one may still fit the last page)
            assert produce(client, [RECORD] * BATCH_RECORDS).error_code == ErrorCode.KAFKA_STORAGE_ERROR

        # Then the background job's checkpoint write hits ENOSPC too; the broker carries on.
        fill_but(filler, 0)
        assert produce(client, [b"slack-1"], "slack").error_code == 0
        wait_until(broker, "a failed checkpoint", logged(broker, "storage error: checkpoint write"))
        assert produce(client, [RECORD] * BATCH_RECORDS).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        metadata = client.request(3, 12, {"topics": [{"name": "fill"}], "allow_auto_topic_creation": False})
        assert metadata.topics[0].error_code == 0
        assert fetch_all(client) == acked

        filler.unlink()  # space again
        answer = produce(client, [b"after"])
        assert (answer.error_code, answer.base_offset) == (0, len(acked))
        acked.append(b"after")
        assert fetch_all(client) == acked
        wait_until(broker, "the checkpoint written again", checkpointed(data_dir, "slack", 2))

    assert broker.proc is not None and broker.proc.returncode == 0  # stopped cleanly by SIGTERM
    errors = broker.logged_errors()
    assert all("storage error" in line for line in errors), errors
    assert len(errors) <= 6, errors  # one line per kind of failure, not one per request or per tick

    with BrokerProcess(data_dir) as again, WireClient(again.host, again.port) as client:
        assert fetch_all(client) == acked
        assert fetch_all(client, "slack") == [b"slack-0", b"slack-1"]
    verify = subprocess.run(
        [sys.executable, "-m", "kafkalike", "storage", "verify", str(data_dir)], capture_output=True, text=True
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
