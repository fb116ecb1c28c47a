"""Shared by the controller operation tests: requests as the codec decodes them, and images
with registered brokers and topics, built by replaying records (the one way images are made)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafkalike.controller.delta import ControllerResult, replay_records
from kafkalike.controller.features import default_bootstrap_records
from kafkalike.controller.image import EMPTY_IMAGE, MetadataImage
from kafkalike.controller.quorum_controller import QuorumController
from kafkalike.protocol.codec import Message, request_schema
from kafkalike.protocol.metadata_records import MetadataRecordType, metadata_record

T = MetadataRecordType
INCARNATION = uuid.UUID(int=0xC0FFEE)


def request(api_key: int, version: int, body: Mapping[str, Any]) -> Message:
    """``body`` as a broker receives it: encoded and decoded by the request's schema."""
    schema = request_schema(api_key, version)
    return schema.decode(schema.encode(body))


def topic_spec(
    name: str,
    partitions: int = 1,
    rf: int = 1,
    configs: Mapping[str, str | None] | None = None,
    assignments: Sequence[Sequence[int]] | Sequence[tuple[int, Sequence[int]]] = (),
) -> dict[str, Any]:
    """One CreateTopics topic; ``assignments`` lists replicas per partition, or (index, replicas)."""
    listed = [
        {"partition_index": a[0], "broker_ids": list(a[1])}
        if isinstance(a, tuple)
        else {"partition_index": i, "broker_ids": list(a)}
        for i, a in enumerate(assignments)
    ]
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": rf,
        "assignments": listed,
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def create_topics(*topics: dict[str, Any], validate_only: bool = False, version: int = 7) -> Message:
    return request(19, version, {"topics": list(topics), "timeout_ms": 5000, "validate_only": validate_only})


def create_partitions(
    *grow: tuple[str, int] | tuple[str, int, Sequence[Sequence[int]]], validate_only: bool = False
) -> Message:
    topics = [
        {
            "name": g[0],
            "count": g[1],
            "assignments": None if len(g) < 3 else [{"broker_ids": list(a)} for a in g[2]],  # type: ignore[misc]
        }
        for g in grow
    ]
    return request(37, 3, {"topics": topics, "timeout_ms": 5000, "validate_only": validate_only})


def broker_records(
    broker_ids: Iterable[int],
    *,
    racks: Mapping[int, str] | None = None,
    fenced: Iterable[int] = (),
    shutting_down: Iterable[int] = (),
    epoch: int = 100,
) -> list[Any]:
    fenced, shutting_down, racks = set(fenced), set(shutting_down), racks or {}
    return [
        metadata_record(
            T.REGISTER_BROKER_RECORD,
            broker_id=b,
            broker_epoch=epoch + b,
            incarnation_id=INCARNATION,
            end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092 + b, "security_protocol": 0}],
            rack=racks.get(b),
            fenced=b in fenced,
            in_controlled_shutdown=b in shutting_down,
        )
        for b in broker_ids
    ]


def cluster(broker_ids: Iterable[int] = (1,), **kwargs: Any) -> MetadataImage:
    """An image at the default bootstrap metadata.version with these brokers registered."""
    return replay_records(EMPTY_IMAGE, [*default_bootstrap_records(), *broker_records(broker_ids, **kwargs)])


def commit(image: MetadataImage, result: ControllerResult[Any]) -> MetadataImage:
    """The image after ``result``'s records are committed and replayed."""
    return replay_records(image, result.records)


def controller(image: MetadataImage, seed: int = 7, **kwargs: Any) -> QuorumController:
    return QuorumController(node_id=1, rng=random.Random(seed), image=image, **kwargs)


class JavaRandom(random.Random):
    """Draws as ``java.util.Random`` does (its 48-bit LCG, nextInt and Collections.shuffle), so
    that code given it makes the choices Kafka's makes with ``new Random(seed)``."""

    _MULTIPLIER, _MASK = 0x5DEECE66D, (1 << 48) - 1

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self._state = (seed ^ self._MULTIPLIER) & self._MASK

    def _next(self, bits: int) -> int:
        self._state = (self._state * self._MULTIPLIER + 0xB) & self._MASK
        return self._state >> (48 - bits)

    def next_int(self, bound: int) -> int:
        if bound & -bound == bound:  # a power of two
            return (bound * self._next(31)) >> 31
        while True:
            bits = self._next(31)
            value = bits % bound
            if bits - value + (bound - 1) < 2**31:  # Java's int overflow test
                return value

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:  # type: ignore[override]
        assert stop is None and step == 1, "the placer draws randrange(n) only"
        return self.next_int(start)

    def shuffle(self, x: list[Any]) -> None:  # type: ignore[override]
        for i in range(len(x), 1, -1):
            j = self.next_int(i)
            x[i - 1], x[j] = x[j], x[i - 1]
