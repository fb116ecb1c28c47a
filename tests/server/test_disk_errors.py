"""A broker whose disk fails: KAFKA_STORAGE_ERROR for the writes, answers for everything else,
background jobs that survive, and produce working again once the disk does."""

from __future__ import annotations

import errno
import logging
import os
import resource
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from kafkalike.log import LogManager
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.testing.faulty_storage import DiskFaults
from tests.server.conftest import RunningBroker, init_producer_id, make_config, serving
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body


@pytest.fixture
async def faulty(tmp_path: Path) -> AsyncIterator[tuple[RunningBroker, DiskFaults]]:
    faults = DiskFaults()
    logs = LogManager(make_config(tmp_path).log_dirs, wrap_directory=faults.wrap)
    async with serving(
        tmp_path, logs=logs, log_retention_check_interval_ms="20", log_flush_offset_checkpoint_interval_ms="0"
    ) as running:
        try:
            yield running, faults
        finally:
            faults.clear()


def values(fetched: object) -> list[bytes | None]:
    return partition_values(fetched.responses[0].partitions[0])  # type: ignore[attr-defined]


def partition_values(partition: object) -> list[bytes | None]:
    data = bytes(partition.records or b"")  # type: ignore[attr-defined]
    return [r.value for pos, h in iter_batches(data) for r in decode_records(data, pos, h)]


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO, errno.EMFILE, errno.EROFS], ids=errno.errorcode.get)
async def test_produce_gets_kafka_storage_error_and_works_again_after(
    faulty: tuple[RunningBroker, DiskFaults], err: int, caplog: pytest.LogCaptureFixture
) -> None:
    running, faults = faulty
    client = await running.client()
    assert (await _create(client, "full")).error_code == 0
    acked = await client.request(0, 9, _produce_body("full", 0, build_batch([Record(value=b"acked")])))
    assert acked.responses[0].partition_responses[0].error_code == 0

    rule = faults.fail("append", err, name=".log")
    with caplog.at_level(logging.INFO):
        for _ in range(5):
            refused = await client.request(0, 9, _produce_body("full", 0, build_batch([Record(value=b"lost")])))
            answer = refused.responses[0].partition_responses[0]
            assert (answer.error_code, answer.base_offset, answer.log_start_offset) == (
                ErrorCode.KAFKA_STORAGE_ERROR,
                -1,
                -1,
            )
    storage_lines = [r for r in caplog.records if r.name == "kafkalike.log.storage"]
    assert len(storage_lines) <= 1  # five refusals, at most one line (none if an earlier test just logged one)
    assert not any(r.exc_info for r in caplog.records)

    # Everything that does not write still works on the same connection.
    metadata = await client.request(3, 12, {"topics": [{"name": "full"}], "allow_auto_topic_creation": False})
    assert metadata.topics[0].error_code == 0
    assert values(await client.request(1, 12, _fetch_body("full", 0, 0))) == [b"acked"]

    faults.remove(rule)
    again = await client.request(0, 9, _produce_body("full", 0, build_batch([Record(value=b"after")])))
    assert (
        again.responses[0].partition_responses[0].error_code,
        again.responses[0].partition_responses[0].base_offset,
    ) == (0, 1)
    assert values(await client.request(1, 12, _fetch_body("full", 0, 0))) == [b"acked", b"after"]


async def test_the_broker_survives_its_background_checkpoint_job_hitting_enospc(
    faulty: tuple[RunningBroker, DiskFaults],
) -> None:
    running, faults = faulty
    client = await running.client()
    assert (await _create(client, "cp")).error_code == 0
    fired = trio.Semaphore(0)
    token = trio.lowlevel.current_trio_token()  # checkpoints are written on a worker thread
    faults.on_inject = lambda _op, _name: token.run_sync_soon(fired.release)
    faults.fail("write_document", errno.ENOSPC, name="offset-checkpoint")
    with trio.fail_after(10):
        for _ in range(3):  # three failed rounds: the job kept running after each
            await fired.acquire()
    answer = await client.request(0, 9, _produce_body("cp", 0, build_batch([Record(value=b"still here")])))
    assert answer.responses[0].partition_responses[0].error_code == 0
    faults.clear()
    faults.on_inject = None


def _commit_body(group: str, topic: str, offset: int) -> dict[str, object]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }


async def test_coordinator_writes_on_a_full_disk_answer_not_coordinator_and_work_again_after(
    faulty: tuple[RunningBroker, DiskFaults],
) -> None:
    running, faults = faulty
    client = await running.client()
    assert (await _create(client, "committed")).error_code == 0
    first = await client.request(8, 8, _commit_body("g", "committed", 1))
    assert first.topics[0].partitions[0].error_code == 0  # __consumer_offsets exists from here on
    init = {"transactional_id": "tx", "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    assert (await init_producer_id(client, init)).error_code == 0

    rule = faults.fail("append", errno.ENOSPC, name=".log")
    refused = await client.request(8, 8, _commit_body("g", "committed", 2))
    assert refused.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR  # as Kafka, for a storage error
    assert (await client.request(22, 4, init)).error_code == ErrorCode.NOT_COORDINATOR
    faults.remove(rule)

    again = await client.request(8, 8, _commit_body("g", "committed", 3))
    assert again.topics[0].partitions[0].error_code == 0
    fetched = await client.request(
        9,
        8,
        {
            "groups": [{"group_id": "g", "topics": [{"name": "committed", "partition_indexes": [0]}]}],
            "require_stable": False,
        },
    )
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == 3
    assert (await client.request(22, 4, init)).error_code == 0


@pytest.mark.parametrize("err", [errno.EMFILE, errno.EIO], ids=errno.errorcode.get)
async def test_a_read_the_disk_refuses_is_that_partitions_storage_error_only(
    faulty: tuple[RunningBroker, DiskFaults], err: int
) -> None:
    running, faults = faulty
    client = await running.client()
    for topic in ("unreadable", "readable"):
        assert (await _create(client, topic)).error_code == 0
        produced = await client.request(0, 9, _produce_body(topic, 0, build_batch([Record(value=topic.encode())])))
        assert produced.responses[0].partition_responses[0].error_code == 0
    rule = faults.fail("read", err, name=".log", directory="unreadable-0")
    both = _fetch_body("unreadable", 0, 0)
    both["topics"].append(_fetch_body("readable", 0, 0)["topics"][0])  # type: ignore[attr-defined]
    fetched = await client.request(1, 12, both)
    bad, good = (t.partitions[0] for t in fetched.responses)
    assert (bad.error_code, bad.high_watermark) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
    assert good.error_code == 0 and partition_values(good) == [b"readable"]
    faults.remove(rule)
    assert values(await client.request(1, 12, _fetch_body("unreadable", 0, 0))) == [b"unreadable"]


async def test_file_descriptors_running_out_refuse_a_roll_and_writes_resume_once_they_are_back(
    running: RunningBroker,
) -> None:
    """Real EMFILE from the kernel: this process's descriptors all taken while a produce needs
    new segment files."""
    client = await running.client()
    assert (await _create(client, "fds", segment_bytes="1048576")).error_code == 0
    big = build_batch([Record(value=b"f" * 1000) for _ in range(600)])  # two of them do not fit one segment
    first = await client.request(0, 9, _produce_body("fds", 0, big))
    assert first.responses[0].partition_responses[0].error_code == 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 64, hard))
    hogs: list[int] = []
    try:
        for _ in range(10_000):
            try:
                hogs.append(os.open(os.devnull, os.O_RDONLY))
            except OSError as exc:
                assert exc.errno == errno.EMFILE
                break
        else:
            pytest.fail("descriptors never ran out")
        refused = await client.request(0, 9, _produce_body("fds", 0, big))
        assert refused.responses[0].partition_responses[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        versions = await client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert versions.error_code == 0
        fetched = await client.request(1, 12, _fetch_body("fds", 0, 0))
        assert len(values(fetched)) == 600
    finally:
        for fd in hogs:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    again = await client.request(0, 9, _produce_body("fds", 0, big))
    assert (
        again.responses[0].partition_responses[0].error_code,
        again.responses[0].partition_responses[0].base_offset,
    ) == (0, 600)
