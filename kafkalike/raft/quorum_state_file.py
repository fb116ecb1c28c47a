"""The ``quorum-state`` file, byte for byte as Apache Kafka's FileQuorumStateStore keeps it.

One line of JSON, Kafka's QuorumStateData at ``data_version`` 1 (kraft.version 1) or 0, the fields
in the definition's order and ``data_version`` last, as Jackson prints it (no spaces)::

    {"leaderId":2,"leaderEpoch":5,"votedId":3,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}

A directory id is Kafka's Uuid text (URL-safe base64 of its 16 bytes, unpadded). A write goes to
``quorum-state.tmp`` (a leftover one is removed first), is fsynced, renamed over ``quorum-state``
and the directory fsynced, so that a crash leaves the old file or the new one, whole. The write
blocks: a trio driver runs :meth:`QuorumStateFile.write` on a worker thread.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

from kafkalike.raft.config import NO_DIRECTORY_ID, VoterKey
from kafkalike.raft.state import QuorumStateRecord

FILE_NAME = "quorum-state"  # Kafka's FileQuorumStateStore.DEFAULT_FILE_NAME
DATA_VERSION = "data_version"
LOWEST_VERSION = 0
HIGHEST_VERSION = 1
NO_LEADER = -1
NOT_VOTED = -1


class QuorumStateFileError(Exception):
    """A quorum-state file that cannot be read (Kafka refuses to start on one too)."""


def kafka_uuid_text(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a 16-byte uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def encode(record: QuorumStateRecord, version: int = HIGHEST_VERSION) -> bytes:
    """The file's bytes for ``record``. Version 0 (kraft.version 0) has no directory id: the empty
    cluster id, applied offset and voter list Kafka writes there are placeholders it never reads."""
    voted = record.voted_for
    fields: dict[str, Any] = {}
    if version == 0:
        fields["clusterId"] = ""
    fields["leaderId"] = record.leader_id if record.leader_id >= 0 else NO_LEADER
    fields["leaderEpoch"] = record.epoch
    fields["votedId"] = voted.node_id if voted is not None else NOT_VOTED
    if version == 0:
        fields["appliedOffset"] = 0
        fields["currentVoters"] = []
    elif version == 1:
        fields["votedDirectoryId"] = kafka_uuid_text(voted.directory_id if voted is not None else NO_DIRECTORY_ID)
    else:
        raise ValueError(f"quorum-state data version {version} is not within {LOWEST_VERSION}-{HIGHEST_VERSION}")
    fields[DATA_VERSION] = version
    return json.dumps(fields, separators=(",", ":")).encode("utf-8")


def decode(data: bytes) -> QuorumStateRecord:
    """The record of a file's bytes (its first line, as Kafka reads it)."""
    line = data.split(b"\n", 1)[0]
    if not line:
        raise QuorumStateFileError("the file ended prematurely")
    try:
        doc = json.loads(line)
    except (UnicodeDecodeError, ValueError) as exc:
        raise QuorumStateFileError(f"not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise QuorumStateFileError(f"{line!r} is not an object")
    version = doc.get(DATA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        raise QuorumStateFileError(f"{line!r} does not have a {DATA_VERSION} field")
    if not LOWEST_VERSION <= version <= HIGHEST_VERSION:
        raise QuorumStateFileError(
            f"data_version ({version}) is not within the min ({LOWEST_VERSION}) and max ({HIGHEST_VERSION}) "
            "supported version"
        )
    leader_id = _int32(doc, "leaderId")
    epoch = _int32(doc, "leaderEpoch")
    voted_id = _int32(doc, "votedId")
    directory = NO_DIRECTORY_ID
    if version >= 1:
        text = doc.get("votedDirectoryId")
        if not isinstance(text, str):
            raise QuorumStateFileError("votedDirectoryId, mandatory in version 1, is missing or not a string")
        try:
            directory = parse_kafka_uuid(text)
        except ValueError as exc:
            raise QuorumStateFileError(f"votedDirectoryId: {exc}") from exc
    voted = VoterKey(voted_id, directory) if voted_id != NOT_VOTED else None
    return QuorumStateRecord(epoch, leader_id if leader_id != NO_LEADER else -1, voted)


def _int32(doc: dict[str, Any], name: str) -> int:
    value = doc.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31:
        raise QuorumStateFileError(f"{name} is missing or not an int32: {value!r}")
    return value


class QuorumStateFile:
    """``quorum-state`` in a directory (the metadata log's, ``__cluster_metadata-0``, as Kafka's)."""

    def __init__(self, directory: str | os.PathLike[str], version: int = HIGHEST_VERSION) -> None:
        self.path = Path(directory) / FILE_NAME
        self.temp_path = Path(directory) / (FILE_NAME + ".tmp")
        self.version = version

    def read(self) -> QuorumStateRecord | None:
        """The record on disk, or None when there is no file (a node that never wrote one)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return decode(data)
        except QuorumStateFileError as exc:
            raise QuorumStateFileError(f"{self.path}: {exc}") from exc

    def write(self, record: QuorumStateRecord) -> None:
        """Write ``record`` durably (blocking: for a worker thread)."""
        data = encode(record, self.version)
        with contextlib.suppress(FileNotFoundError):
            self.temp_path.unlink()
        try:
            fd = os.open(self.temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(self.temp_path, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.temp_path.unlink()
        directory_fd = os.open(self.path.parent, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)
