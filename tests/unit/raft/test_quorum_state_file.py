"""The quorum-state file in Kafka's format (FileQuorumStateStore), against a real temp directory."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from kafkalike.raft.config import VoterKey
from kafkalike.raft.quorum_state_file import QuorumStateFile, QuorumStateFileError, decode, encode
from kafkalike.raft.state import QuorumStateRecord

DIRECTORY = uuid.UUID("12345678-1234-5678-1234-567812345678")

# Files Apache Kafka 4.0.2's FileQuorumStateStore wrote (compat_tests/differential/java/QuorumStateTool.java),
# byte for byte, with what they hold.
WRITTEN_BY_KAFKA = [
    (
        b'{"leaderId":2,"leaderEpoch":5,"votedId":3,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}',
        QuorumStateRecord(5, 2, VoterKey(3)),
        1,
    ),
    (
        b'{"leaderId":-1,"leaderEpoch":7,"votedId":3,"votedDirectoryId":"EjRWeBI0VngSNFZ4EjRWeA","data_version":1}',
        QuorumStateRecord(7, -1, VoterKey(3, DIRECTORY)),
        1,
    ),
    (
        b'{"leaderId":-1,"leaderEpoch":9,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}',
        QuorumStateRecord(9),
        1,
    ),
    (
        b'{"clusterId":"","leaderId":1,"leaderEpoch":4,"votedId":-1,"appliedOffset":0,"currentVoters":[],'
        b'"data_version":0}',
        QuorumStateRecord(4, 1),
        0,
    ),
]


@pytest.mark.parametrize(("data", "record", "version"), WRITTEN_BY_KAFKA)
def test_files_kafka_wrote_read_back_and_ours_are_the_same_bytes(
    data: bytes, record: QuorumStateRecord, version: int
) -> None:
    assert decode(data) == record
    assert encode(record, version) == data


def test_write_replaces_the_file_whole_and_leaves_no_temp_file(tmp_path: Path) -> None:
    store = QuorumStateFile(tmp_path)
    assert store.read() is None
    store.write(QuorumStateRecord(3, -1, VoterKey(2, DIRECTORY)))
    store.write(QuorumStateRecord(4, 1))
    assert store.read() == QuorumStateRecord(4, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quorum-state"]
    assert QuorumStateFile(tmp_path).read() == QuorumStateRecord(4, 1)  # a restart reads it


def test_a_write_torn_by_a_crash_leaves_the_previous_state(tmp_path: Path) -> None:
    """A crash before the rename leaves the temp file half-written; the state is the old one, and
    the next write starts over the leftover."""
    store = QuorumStateFile(tmp_path)
    store.write(QuorumStateRecord(3, -1, VoterKey(2)))
    store.temp_path.write_bytes(b'{"leaderId":-1,"leader')
    assert QuorumStateFile(tmp_path).read() == QuorumStateRecord(3, -1, VoterKey(2))
    store.write(QuorumStateRecord(4, 2))
    assert store.read() == QuorumStateRecord(4, 2)
    assert not store.temp_path.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "ended prematurely"),
        (b'{"leaderId":1', "not JSON"),
        (b"[1,2]", "not an object"),
        (b'{"leaderId":1,"leaderEpoch":2,"votedId":-1}', "does not have a data_version"),
        (
            # Kafka's FileQuorumStateStoreTest.testCantReadVersionQuorumState
            b'{"leaderId":9990,"leaderEpoch":3012,"votedId":-1,"appliedOffset": 0,"currentVoters":'
            b'[{"voterId":9990},{"voterId":9991},{"voterId":9992}],"data_version":2}',
            "data_version (2) is not within",
        ),
        (b'{"leaderId":1,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}', "leaderEpoch"),
        (b'{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":1}', "votedDirectoryId"),
        (b'{"leaderId":1,"leaderEpoch":2,"votedId":3,"votedDirectoryId":"AAAA","data_version":1}', "16-byte"),
    ],
)
def test_a_file_kafka_would_not_read_is_refused(tmp_path: Path, data: bytes, message: str) -> None:
    (tmp_path / "quorum-state").write_bytes(data)
    with pytest.raises(QuorumStateFileError, match=re.escape(message)):
        QuorumStateFile(tmp_path).read()
