"""Cluster metadata as a log of records, and the image they replay into.

The single-voter quorum controller appends metadata records (topics, partitions, configs,
removals) to the ``__cluster_metadata-0`` log and applies them to an in-memory image; at
start-up the log is replayed. Each record is one Kafka record whose value is a small JSON
document: ``{"type": "topic", ...}``.

This is the single node's path only, until it too runs on the metadata quorum: a node of a
cluster keeps Kafka's records in the quorum's log and its broker follows them through
``server/metadata_publisher.py`` into ``controller/image.py``'s image; a directory written in this
JSON format is migrated to Kafka's records (``server/metadata_migration.py``) by a node that is
its quorum's only voter, and refused by any other.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalike.protocol.errors import ErrorCode

log = logging.getLogger("kafkalike.controller")

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
MAX_TOPIC_NAME = 249
PRODUCER_ID_BLOCK = 1000
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


class ControllerError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class MetadataImage:
    topics: dict[str, TopicImage] = field(default_factory=dict)
    topic_names_by_id: dict[uuid.UUID, str] = field(default_factory=dict)
    # Dynamic broker configs by resource name: "" is the cluster-wide default, "1" broker 1.
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    next_producer_id_block: int = 0  # producer ids below this were handed out in earlier blocks

    def apply(self, record: Mapping[str, Any]) -> None:
        kind = record["type"]
        if kind == "topic":
            topic_id = uuid.UUID(record["id"])
            self.topics[record["name"]] = TopicImage(record["name"], topic_id, 0)
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

    def _config_target(self, record: Mapping[str, Any]) -> dict[str, str]:
        if record["resource_type"] == TOPIC_RESOURCE:
            topic = self.topics.get(record["resource_name"])
            if topic is None:
                # A config of a topic removed before it (written by a change that raced the
                # deletion): nothing holds it, as the removal took the topic's configs with it.
                log.warning(
                    "config %s of topic %s, which does not exist: ignored", record["name"], record["resource_name"]
                )
                return {}
            return topic.configs
        return self.broker_configs.setdefault(record["resource_name"], {})


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: length, legal characters, not '.' or '..'."""
    if not name:
        raise ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME:
        raise ControllerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, topic name: {name}",
        )
    if not _LEGAL_TOPIC.match(name):
        raise ControllerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )


def encode_record(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()


def decode_record(value: bytes) -> dict[str, Any]:
    return json.loads(value)  # type: ignore[no-any-return]


class QuorumController:
    """The single-voter controller: validates changes, appends their records, applies them.

    ``append`` persists a list of encoded records durably (the metadata log) before the image
    changes, so a change acknowledged to a client survives a crash.
    """

    def __init__(self, append: Callable[[list[bytes]], None], new_id: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self.image = MetadataImage()
        self._append = append
        self._new_id = new_id
        self._next_producer_id = 0

    def _start_producer_ids(self) -> None:
        # After a restart, skip the rest of the last block: some of it may have been handed out.
        self._next_producer_id = self.image.next_producer_id_block

    def replay(self, values: Iterable[bytes]) -> None:
        for value in values:
            self.image.apply(decode_record(value))
        self._start_producer_ids()

    def _commit(self, records: list[dict[str, Any]]) -> None:
        self._append([encode_record(r) for r in records])
        for r in records:
            self.image.apply(r)

    def commit(self, records: list[dict[str, Any]]) -> None:
        """Persist records planned by ``plan_topic`` / ``plan_partitions`` (one operation) and apply them."""
        self._commit(records)

    @staticmethod
    def encode(records: list[dict[str, Any]]) -> list[bytes]:
        """The metadata log's values for ``records``: the first half of ``commit``, for a caller
        that persists them itself (off the event loop) and then calls ``apply_durable``."""
        return [encode_record(r) for r in records]

    def apply_durable(self, records: list[dict[str, Any]]) -> None:
        """The second half of ``commit``: apply records the caller has made durable."""
        for r in records:
            self.image.apply(r)

    def plan_producer_ids(self) -> list[dict[str, Any]]:
        """The record of a new producer id block when the current one has no id left (else
        none): committed before ``allocate_producer_id``, which then writes nothing."""
        if self._next_producer_id < self.image.next_producer_id_block:
            return []
        start = max(self._next_producer_id, self.image.next_producer_id_block)
        return [{"type": "producer_ids", "next_block_start": start + PRODUCER_ID_BLOCK}]

    def plan_topic(
        self, name: str, partitions: int, configs: Mapping[str, str]
    ) -> tuple[TopicImage, list[dict[str, Any]]]:
        """Check a new topic and return it with the records that create it, changing nothing."""
        validate_topic_name(name)
        if name in self.image.topics:
            raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions <= 0:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        topic_id = self._new_id()
        records: list[dict[str, Any]] = [
            {"type": "topic", "name": name, "id": str(topic_id)},
            {"type": "partitions", "topic_id": str(topic_id), "count": partitions},
        ]
        records += [
            {"type": "config", "resource_type": TOPIC_RESOURCE, "resource_name": name, "name": k, "value": v}
            for k, v in configs.items()
        ]
        return TopicImage(name, topic_id, partitions, dict(configs)), records

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str], validate_only: bool = False
    ) -> TopicImage:
        planned, records = self.plan_topic(name, partitions, configs)
        if validate_only:
            return planned
        self._commit(records)
        return self.image.topics[name]

    def delete_topic(self, name: str) -> TopicImage:
        topic = self.image.topics.get(name)
        if topic is None:
            raise ControllerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            )
        self._commit([{"type": "remove_topic", "topic_id": str(topic.topic_id)}])
        return topic

    def plan_partitions(self, name: str, count: int) -> tuple[TopicImage, dict[str, Any]]:
        """Check growing a topic to ``count`` partitions; the topic and the record that does it."""
        topic = self.image.topics.get(name)
        if topic is None:
            raise ControllerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            )
        if count < topic.partitions:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {name} currently has {topic.partitions} partition(s); {count} would not be an increase.",
            )
        if count == topic.partitions:
            raise ControllerError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {topic.partitions} partition(s).")
        return topic, {"type": "partitions", "topic_id": str(topic.topic_id), "count": count}

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> TopicImage:
        topic, record = self.plan_partitions(name, count)
        if not validate_only:
            self._commit([record])
        return topic

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, even across restarts (ids go in persisted blocks)."""
        if self._next_producer_id >= self.image.next_producer_id_block:
            start = max(self._next_producer_id, self.image.next_producer_id_block)
            self._commit([{"type": "producer_ids", "next_block_start": start + PRODUCER_ID_BLOCK}])
            self._next_producer_id = start
        self._next_producer_id += 1
        return self._next_producer_id - 1

    def set_configs(self, resource_type: int, resource_name: str, changes: Mapping[str, str | None]) -> None:
        self._commit(self.plan_configs(resource_type, resource_name, changes))

    def plan_configs(
        self, resource_type: int, resource_name: str, changes: Mapping[str, str | None]
    ) -> list[dict[str, Any]]:
        """The records of a config change (a value of None removes the config). A topic must
        still exist when its turn comes: one deleted meanwhile is UNKNOWN_TOPIC_OR_PARTITION."""
        if resource_type == TOPIC_RESOURCE and resource_name not in self.image.topics:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource_name} does not exist")
        return [
            {"type": "config", "resource_type": resource_type, "resource_name": resource_name, "name": k, "value": v}
            for k, v in changes.items()
        ]
