"""Kafka's small text files: offset checkpoints and ``partition.metadata``.

Checkpoint files (``leader-epoch-checkpoint`` in a partition directory; ``recovery-point-offset-checkpoint``
and ``log-start-offset-checkpoint`` in a log dir) share one format, so Kafka's own tooling reads ours::

    0                      <- format version
    2                      <- number of entries
    0 0                    <- one entry per line, fields separated by single spaces
    3 1200

``partition.metadata`` is::

    version: 0
    topic_id: <topic UUID, URL-safe base64 without padding, as Kafka's Uuid.toString()>
"""

from __future__ import annotations

import base64
import uuid

from kafkalike.log.errors import LogError

CHECKPOINT_VERSION = 0


class CheckpointError(LogError):
    """A checkpoint or metadata file that does not parse; callers fall back to rebuilding."""


def format_checkpoint(entries: list[tuple[str, ...]]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries)), *(" ".join(entry) for entry in entries)]
    return ("\n".join(lines) + "\n").encode()


def parse_checkpoint(data: bytes, fields: int) -> list[list[str]]:
    """Entries of a checkpoint file, each split into exactly ``fields`` strings."""
    try:
        lines = data.decode().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
            raise CheckpointError("unrecognised checkpoint version")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise CheckpointError(f"checkpoint says {count} entries but has {len(lines) - 2}")
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"malformed checkpoint: {exc}") from exc
    entries = [line.split(" ") for line in lines[2:]]
    if any(len(entry) != fields for entry in entries):
        raise CheckpointError("malformed checkpoint entry")
    return entries


def format_epoch_checkpoint(entries: list[tuple[int, int]]) -> bytes:
    return format_checkpoint([(str(epoch), str(offset)) for epoch, offset in entries])


def parse_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    try:
        return [(int(epoch), int(offset)) for epoch, offset in parse_checkpoint(data, 2)]
    except ValueError as exc:
        raise CheckpointError(f"malformed epoch checkpoint: {exc}") from exc


def format_offset_checkpoint(offsets: dict[tuple[str, int], int]) -> bytes:
    """Topic names cannot contain spaces (Kafka's legal characters are [a-zA-Z0-9._-]), so splitting is safe."""
    return format_checkpoint(
        [(topic, str(partition), str(offset)) for (topic, partition), offset in sorted(offsets.items())]
    )


def parse_offset_checkpoint(data: bytes) -> dict[tuple[str, int], int]:
    try:
        return {(topic, int(partition)): int(offset) for topic, partition, offset in parse_checkpoint(data, 3)}
    except ValueError as exc:
        raise CheckpointError(f"malformed offset checkpoint: {exc}") from exc


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: the 16 bytes in URL-safe base64 with the padding stripped."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_string(text: str) -> uuid.UUID:
    """Accepts Kafka's base64 form and, for hand-written files, the dashed hex form."""
    try:
        if len(text) == 22:
            return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        return uuid.UUID(text)
    except ValueError as exc:
        raise CheckpointError(f"malformed topic id {text!r}") from exc


def format_partition_metadata(topic_id: uuid.UUID) -> bytes:
    return f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n".encode()


def parse_partition_metadata(data: bytes) -> uuid.UUID:
    try:
        lines = data.decode().splitlines()
    except UnicodeDecodeError as exc:
        raise CheckpointError("partition.metadata is not text") from exc
    if len(lines) < 2 or lines[0].strip() != "version: 0" or not lines[1].startswith("topic_id: "):
        raise CheckpointError("malformed partition.metadata")
    return topic_id_from_string(lines[1][len("topic_id: ") :].strip())
