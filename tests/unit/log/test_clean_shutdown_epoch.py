"""The broker epoch in the clean shutdown files (KIP-966): written at a clean close, read back as
the previous broker epoch only when every log dir has it and agrees; -1 after a crash."""

from __future__ import annotations

import json
from pathlib import Path

from kafkalike.log import LogManager

MARKER = ".kafka_cleanshutdown"


def test_the_epoch_of_a_clean_shutdown_is_the_next_start_s_previous_epoch(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    assert manager.previous_broker_epoch() == -1  # nothing there yet
    manager.broker_epoch = 42
    manager.close_all()
    assert [json.loads((d / MARKER).read_text()) for d in dirs] == [{"version": 0, "brokerEpoch": 42}] * 2
    assert (dirs[0] / MARKER).read_bytes() == b'{"version":0,"brokerEpoch":42}'  # Kafka's bytes
    again = LogManager(dirs)
    assert again.previous_broker_epoch() == 42
    # This start did not end cleanly: the next one has no epoch to claim.
    assert LogManager(dirs).previous_broker_epoch() == -1


def test_dirs_that_disagree_or_cannot_be_read_give_no_epoch(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    manager.broker_epoch = 7
    manager.close_all()
    (dirs[1] / MARKER).write_text('{"version":0,"brokerEpoch":8}')
    assert LogManager(dirs).previous_broker_epoch() == -1
    for content in ('{"version":0}', "not json", '{"version":0,"brokerEpoch":"7"}'):
        for d in dirs:
            (d / MARKER).write_text(content if d == dirs[0] else '{"version":0,"brokerEpoch":7}')
        reopened = LogManager(dirs)
        assert reopened.previous_broker_epoch() == -1, content
        assert reopened._dirs[0].clean_shutdown  # still a clean shutdown: only the epoch is unknown


def test_memory_logs_have_no_previous_epoch() -> None:
    manager = LogManager(["/nonexistent-memory-dir"], storage="memory")
    manager.broker_epoch = 3
    manager.close_all()
    assert manager.previous_broker_epoch() == -1
