"""The quorum-state file against Apache Kafka's own FileQuorumStateStore (from the jars in
$KAFKALIKE_AK_LIB): what Kafka writes we read, byte for byte as we would write it; what we write
Kafka reads."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from compat_tests.differential.conftest import AK_LIB
from kafkalike.raft.config import VoterKey
from kafkalike.raft.quorum_state_file import FILE_NAME, QuorumStateFile, encode, kafka_uuid_text
from kafkalike.raft.state import QuorumStateRecord
from kafkalike.testing.apache_kafka import java_executable

pytestmark = pytest.mark.differential

TOOL = Path(__file__).parent / "java" / "QuorumStateTool.java"
DIRECTORY = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
RECORDS = [
    (QuorumStateRecord(5, 2, VoterKey(3)), 1),
    (QuorumStateRecord(7, -1, VoterKey(3, DIRECTORY)), 1),
    (QuorumStateRecord(12, 3, VoterKey(3, DIRECTORY)), 1),
    (QuorumStateRecord(9), 1),
    (QuorumStateRecord(4, 1), 0),
]


def run_tool(*args: str) -> str:
    done = subprocess.run(
        [java_executable(), "-cp", str(Path(AK_LIB) / "*"), str(TOOL), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def as_kafka_prints(record: QuorumStateRecord) -> str:
    voted = record.voted_for
    directory = "-" if voted is None or voted.directory_id.int == 0 else kafka_uuid_text(voted.directory_id)
    voted_id = -1 if voted is None else voted.node_id
    return f"epoch={record.epoch} leader={record.leader_id} voted={voted_id} directory={directory}"


@pytest.mark.parametrize(("record", "version"), RECORDS)
def test_kafka_writes_what_we_read_and_write(tmp_path: Path, record: QuorumStateRecord, version: int) -> None:
    voted = record.voted_for
    run_tool(
        "write",
        str(tmp_path / FILE_NAME),
        str(version),
        str(record.epoch),
        str(record.leader_id),
        str(-1 if voted is None else voted.node_id),
        "-" if voted is None or voted.directory_id.int == 0 else kafka_uuid_text(voted.directory_id),
    )
    assert QuorumStateFile(tmp_path).read() == record
    assert (tmp_path / FILE_NAME).read_bytes() == encode(record, version)
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME]


@pytest.mark.parametrize(("record", "version"), RECORDS)
def test_kafka_reads_what_we_write(tmp_path: Path, record: QuorumStateRecord, version: int) -> None:
    QuorumStateFile(tmp_path, version).write(record)
    assert run_tool("read", str(tmp_path / FILE_NAME)) == as_kafka_prints(record)


def test_kafka_refuses_a_file_we_refuse(tmp_path: Path) -> None:
    """Negative control: the tool reports Kafka's refusal rather than passing anything."""
    (tmp_path / FILE_NAME).write_bytes(b'{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":7}')
    assert run_tool("read", str(tmp_path / FILE_NAME)).startswith("error ")
