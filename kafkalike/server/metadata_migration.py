"""The metadata log of an earlier release, moved to Kafka's records on first start.

Releases before the cluster wrote ``__cluster_metadata-0`` with one small JSON document per record
(``{"type": "topic", ...}``, replayed here by ``JsonImage``). A node that runs the metadata quorum reads
Kafka's metadata records there, so such a directory is never opened as it is:

- ``inspect(directory)`` reads the log's segment files without changing them and says what they
  hold: nothing, Kafka's records, or JSON records (their values, in offset order);
- ``migrate(directory, node_id)`` replays the JSON records into the image they made and writes
  that image as a snapshot of Kafka's records (features, topics with their ids, one partition
  registration per partition led by this node, topic and broker configs, the next producer id)
  in a new directory, fsynced, then swaps it in: the old log is kept beside it as
  ``__cluster_metadata-0.json-backup``. A crash half-way is finished (or begun again) at the next
  start: the new directory is only ever renamed into place complete;
- what cannot be migrated (a record this release does not know, a log with both kinds of
  records) raises :class:`MigrationRefused`, whose message is the one line the start-up prints.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from kafkalike.controller.delta import MetadataDelta
from kafkalike.controller.features import default_bootstrap_records
from kafkalike.controller.image import BROKER_RESOURCE, EMPTY_IMAGE, TOPIC_RESOURCE, MetadataImage, MetadataProvenance
from kafkalike.controller.loader import build_image_snapshot
from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record
from kafkalike.protocol.records import batch_crc_ok, decode_records, iter_batches

log = logging.getLogger("kafkalike.metadata")
T = MetadataRecordType
METADATA_DIR = "__cluster_metadata-0"
BACKUP_SUFFIX = ".json-backup"
MIGRATING_SUFFIX = ".migrating"
SNAPSHOT_NAME = "{offset:020d}-{epoch:010d}.checkpoint"


@dataclass
class JsonTopic:
    name: str
    topic_id: uuid.UUID
    partitions: int = 0
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class JsonImage:
    """What an earlier release's JSON records made, replayed as that release replayed them."""

    topics: dict[str, JsonTopic] = field(default_factory=dict)
    topic_names_by_id: dict[uuid.UUID, str] = field(default_factory=dict)
    # Dynamic broker configs by resource name: "" is the cluster-wide default, "1" broker 1.
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    next_producer_id_block: int = 0  # producer ids below this were handed out in earlier blocks

    def apply(self, record: dict[str, Any]) -> None:
        """One record; ValueError, KeyError or TypeError for one this release never wrote."""
        kind = record["type"]
        if kind == "topic":
            topic_id = uuid.UUID(record["id"])
            self.topics[record["name"]] = JsonTopic(record["name"], topic_id)
            self.topic_names_by_id[topic_id] = record["name"]
        elif kind == "partitions":
            name = self.topic_names_by_id[uuid.UUID(record["topic_id"])]
            self.topics[name].partitions = record["count"]
        elif kind == "config":
            target = self._config_target(record)
            if record["value"] is None:
                target.pop(record["name"], None)
            else:
                target[record["name"]] = record["value"]
        elif kind == "producer_ids":
            self.next_producer_id_block = record["next_block_start"]
        elif kind == "remove_topic":
            name = self.topic_names_by_id.pop(uuid.UUID(record["topic_id"]))
            del self.topics[name]
        else:
            raise ValueError(f"unknown metadata record type {kind!r}")

    def _config_target(self, record: dict[str, Any]) -> dict[str, str]:
        if record["resource_type"] == TOPIC_RESOURCE:
            topic = self.topics.get(record["resource_name"])
            # A config of a topic removed before it (a change that raced the deletion): nothing
            # holds it, as the removal took the topic's configs with it.
            return {} if topic is None else topic.configs
        return self.broker_configs.setdefault(record["resource_name"], {})


class MigrationRefused(Exception):
    """A metadata directory that cannot be used or migrated; the message says what to do."""


class LogKind(Enum):
    EMPTY = "empty"
    KRAFT = "kraft"  # Kafka's metadata records
    JSON = "json"  # an earlier release's JSON records


@dataclass(frozen=True)
class Inspected:
    kind: LogKind
    json_values: tuple[bytes, ...] = ()
    end_offset: int = 0


def inspect(directory: Path) -> Inspected:
    """What the metadata log in ``directory`` (the ``__cluster_metadata-0`` directory) holds,
    read from its segment files (nothing is written). A torn last batch is ignored, as the
    log's recovery would cut it."""
    if not directory.is_dir():
        return Inspected(LogKind.EMPTY)
    segments = sorted(directory.glob("*.log"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
    json_values: list[bytes] = []
    kraft = 0
    end_offset = 0
    for segment in segments:
        data = segment.read_bytes()
        try:
            for pos, header in iter_batches(data, partial_ok=True):
                if not batch_crc_ok(data, pos, header):
                    break  # a torn or corrupt tail: recovery cuts it
                end_offset = header.base_offset + header.last_offset_delta + 1
                if header.is_control:
                    continue
                for record in decode_records(data, pos, header):
                    value = record.value or b""
                    if value[:1] == b"{":
                        json_values.append(bytes(value))
                    else:
                        kraft += 1
        except ProtocolError as exc:
            raise MigrationRefused(
                f"The metadata log in {directory} cannot be read ({exc}); restore it from a backup"
            ) from None
    if json_values and kraft:
        raise MigrationRefused(
            f"The metadata log in {directory} holds both JSON records of an earlier kafkalike release and "
            "Kafka metadata records; restore the directory from a backup or move it aside to start empty"
        )
    if json_values:
        return Inspected(LogKind.JSON, tuple(json_values), end_offset)
    return Inspected(LogKind.KRAFT if kraft or end_offset else LogKind.EMPTY, end_offset=end_offset)


def translate(json_values: tuple[bytes, ...] | list[bytes], node_id: int) -> list[ApiMessageAndVersion]:
    """The Kafka records of the image the JSON records made (MigrationRefused if one is unknown)."""
    image = JsonImage()
    for offset, value in enumerate(json_values):
        try:
            image.apply(json.loads(value))
        except (ValueError, KeyError, TypeError) as exc:
            raise MigrationRefused(
                f"JSON metadata record #{offset} cannot be migrated ({exc}); start the release that wrote it, "
                "or move the metadata directory aside to start empty"
            ) from None
    records = list(default_bootstrap_records())
    for topic in sorted(image.topics.values(), key=lambda t: t.name):
        records.append(metadata_record(T.TOPIC_RECORD, name=topic.name, topic_id=topic.topic_id))
        records += [
            metadata_record(
                T.PARTITION_RECORD,
                partition_id=index,
                topic_id=topic.topic_id,
                replicas=[node_id],
                isr=[node_id],
                removing_replicas=[],
                adding_replicas=[],
                leader=node_id,
                leader_recovery_state=0,
                leader_epoch=0,
                partition_epoch=0,
                directories=[uuid.UUID(int=0)],
            )
            for index in range(topic.partitions)
        ]
        records += [
            metadata_record(T.CONFIG_RECORD, resource_type=TOPIC_RESOURCE, resource_name=topic.name, name=k, value=v)
            for k, v in sorted(topic.configs.items())
        ]
    for resource_name, values in sorted(image.broker_configs.items()):
        records += [
            metadata_record(
                T.CONFIG_RECORD, resource_type=BROKER_RESOURCE, resource_name=resource_name, name=k, value=v
            )
            for k, v in sorted(values.items())
        ]
    if image.next_producer_id_block:
        records.append(
            metadata_record(
                T.PRODUCER_IDS_RECORD, broker_id=node_id, broker_epoch=-1, next_producer_id=image.next_producer_id_block
            )
        )
    return records


def migrated_image(records: list[ApiMessageAndVersion], end_offset: int) -> MetadataImage:
    return MetadataDelta(EMPTY_IMAGE).replay_all(records).apply(MetadataProvenance(end_offset - 1, 0, -1))


def finish_interrupted(directory: Path) -> None:
    """A migration a crash interrupted after the old log was moved aside: the new one, complete,
    renamed into place. One interrupted before that: its partial new directory removed."""
    migrating = directory.with_name(directory.name + MIGRATING_SUFFIX)
    backup = directory.with_name(directory.name + BACKUP_SUFFIX)
    if migrating.exists() and not directory.exists() and backup.exists():
        migrating.rename(directory)
        _sync_dir(directory.parent)
    elif migrating.exists():
        shutil.rmtree(migrating)


def migrate(directory: Path, node_id: int, now_ms: int) -> MetadataImage | None:
    """Move an earlier release's JSON metadata log in ``directory`` to Kafka's records (see the
    module docstring); the image it now holds, or None when there was nothing to migrate.
    Disk work: call it on a worker thread. MigrationRefused: the one line to print."""
    finish_interrupted(directory)
    found = inspect(directory)
    if found.kind is not LogKind.JSON:
        return None
    records = translate(found.json_values, node_id)
    # The log's offsets go on past the old log's end; epoch 0, as a bootstrap snapshot's.
    end_offset = max(found.end_offset, 1)
    image = migrated_image(records, end_offset)
    _, data = build_image_snapshot(image, now_ms=now_ms)
    migrating = directory.with_name(directory.name + MIGRATING_SUFFIX)
    backup = directory.with_name(directory.name + BACKUP_SUFFIX)
    if backup.exists():
        raise MigrationRefused(
            f"{backup} exists from an earlier migration while {directory} holds JSON records again; "
            "move one of them aside"
        )
    migrating.mkdir()
    snapshot = migrating / SNAPSHOT_NAME.format(offset=end_offset, epoch=0)
    with snapshot.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    _sync_dir(migrating)
    directory.rename(backup)
    _sync_dir(directory.parent)
    migrating.rename(directory)
    _sync_dir(directory.parent)
    log.warning(
        "migrated the JSON metadata log of an earlier release in %s (%d record(s), %d topic(s)) to Kafka's "
        "metadata records; the old log is kept in %s",
        directory,
        len(found.json_values),
        len(image.topics_by_id),
        backup,
    )
    return image


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
