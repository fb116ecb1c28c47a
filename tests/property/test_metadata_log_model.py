"""The metadata log under random input: decoding never lets anything but MetadataRecordError
escape, and images built from random operations agree however the records are cut into deltas,
and with the image rebuilt from their own snapshot.

``KAFKALIKE_HYPOTHESIS_PROFILE=thorough`` runs 20,000 examples per test.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalike.controller.delta import MetadataDelta, replay_records
from kafkalike.controller.image import EMPTY_IMAGE, MetadataImage
from kafkalike.controller.loader import MetadataLoader, build_image_snapshot
from kafkalike.protocol.metadata_records import (
    ApiMessageAndVersion,
    MetadataRecordError,
    MetadataRecordType,
    build_metadata_batch,
    decode_metadata_record,
    encode_metadata_record,
    metadata_record,
    read_metadata_batches,
)
from kafkalike.protocol.records import Record, build_batch

settings.register_profile("md-fast", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("md-thorough", settings.get_profile("md-fast"), max_examples=20_000)
PROFILE = settings.get_profile("md-" + os.environ.get("KAFKALIKE_HYPOTHESIS_PROFILE", "fast"))

T = MetadataRecordType


# -- a random cluster history, always valid against the image it is replayed on


@st.composite
def histories(draw: st.DrawFn) -> list[ApiMessageAndVersion]:
    """Records a controller could write: brokers come and go, topics are created, changed, deleted."""
    records: list[ApiMessageAndVersion] = []
    brokers: dict[int, int] = {}  # id -> epoch
    topics: dict[uuid.UUID, tuple[str, int]] = {}  # id -> (name, partitions)
    next_id = 1
    for _ in range(draw(st.integers(0, 40))):
        op = draw(st.sampled_from(["broker", "fence", "topic", "change", "delete", "config", "pids", "feature"]))
        if op == "broker" or not brokers:
            broker_id = draw(st.integers(1, 4))
            epoch = brokers.get(broker_id, 0) + draw(st.integers(1, 3))
            brokers[broker_id] = epoch
            records.append(
                metadata_record(
                    T.REGISTER_BROKER_RECORD,
                    broker_id=broker_id,
                    broker_epoch=epoch,
                    incarnation_id=uuid.UUID(int=next_id),
                    rack=draw(st.sampled_from([None, "a", "b"])),
                    fenced=draw(st.booleans()),
                )
            )
            next_id += 1
        elif op == "fence":
            broker_id = draw(st.sampled_from(sorted(brokers)))
            kind = draw(st.sampled_from([T.FENCE_BROKER_RECORD, T.UNFENCE_BROKER_RECORD, T.UNREGISTER_BROKER_RECORD]))
            if kind == T.UNREGISTER_BROKER_RECORD:
                records.append(metadata_record(kind, broker_id=broker_id, broker_epoch=brokers.pop(broker_id)))
            else:
                records.append(metadata_record(kind, id=broker_id, epoch=brokers[broker_id]))
        elif op == "topic" or not topics:
            topic_id = uuid.UUID(int=next_id)
            next_id += 1
            name = f"t{draw(st.integers(0, 5))}"
            if any(n == name for n, _ in topics.values()):
                continue
            count = draw(st.integers(1, 3))
            topics[topic_id] = (name, count)
            records.append(metadata_record(T.TOPIC_RECORD, name=name, topic_id=topic_id))
            for p in range(count):
                replicas = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True))
                records.append(
                    metadata_record(
                        T.PARTITION_RECORD,
                        partition_id=p,
                        topic_id=topic_id,
                        replicas=replicas,
                        isr=replicas,
                        leader=replicas[0],
                        leader_epoch=0,
                        partition_epoch=0,
                    )
                )
        elif op == "change":
            topic_id = draw(st.sampled_from(sorted(topics)))
            fields: dict[str, Any] = {
                "topic_id": topic_id,
                "partition_id": draw(st.integers(0, topics[topic_id][1] - 1)),
            }
            if draw(st.booleans()):
                fields["leader"] = draw(st.integers(-1, 4))
            if draw(st.booleans()):
                fields["isr"] = draw(st.lists(st.integers(1, 4), max_size=3, unique=True))
            if draw(st.booleans()):
                fields["replicas"] = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True))
            if draw(st.booleans()):
                fields["eligible_leader_replicas"] = draw(st.lists(st.integers(1, 4), max_size=2, unique=True))
            records.append(metadata_record(T.PARTITION_CHANGE_RECORD, **fields))
        elif op == "delete":
            topic_id = draw(st.sampled_from(sorted(topics)))
            del topics[topic_id]
            records.append(metadata_record(T.REMOVE_TOPIC_RECORD, topic_id=topic_id))
        elif op == "config":
            resource_type, resource_name = draw(
                st.sampled_from([(4, ""), (4, "1")] + [(2, n) for n, _ in topics.values()])
            )
            records.append(
                metadata_record(
                    T.CONFIG_RECORD,
                    resource_type=resource_type,
                    resource_name=resource_name,
                    name=draw(st.sampled_from(["a", "b"])),
                    value=draw(st.sampled_from([None, "1", "2"])),
                )
            )
        elif op == "pids":
            records.append(
                metadata_record(T.PRODUCER_IDS_RECORD, broker_id=1, next_producer_id=draw(st.integers(0, 10**6)))
            )
        else:
            name = draw(st.sampled_from(["metadata.version", "group.version"]))
            records.append(metadata_record(T.FEATURE_LEVEL_RECORD, name=name, feature_level=draw(st.integers(0, 25))))
    return records


@PROFILE
@given(histories(), st.lists(st.integers(0, 40), max_size=6))
def test_images_agree_however_the_history_is_cut_and_rebuild_from_a_snapshot(
    records: list[ApiMessageAndVersion], cuts: list[int]
) -> None:
    whole = replay_records(EMPTY_IMAGE, records)
    image: MetadataImage = EMPTY_IMAGE
    seen: list[tuple[MetadataImage, list[ApiMessageAndVersion]]] = []
    bounds = sorted({0, len(records), *(c for c in cuts if c <= len(records))})
    for start, end in itertools.pairwise(bounds):
        image = MetadataDelta(image).replay_all(records[start:end]).apply()
        seen.append((image, image.records()))
    assert image == whole
    # No later delta changed an earlier image.
    for earlier, its_records in seen:
        assert earlier.records() == its_records
    # A snapshot of the image, read back, is the same image.
    snapshot_id, data = build_image_snapshot(whole, now_ms=0)
    loader = MetadataLoader()
    loader.load_snapshot(snapshot_id, data)
    assert replay_records(EMPTY_IMAGE, whole.records()) == whole
    assert loader.image.records() == whole.records()


# -- decoding anything


@PROFILE
@given(st.binary(max_size=64))
def test_any_value_decodes_or_raises_metadata_record_error(value: bytes) -> None:
    with contextlib.suppress(MetadataRecordError):
        decode_metadata_record(value)


@PROFILE
@given(histories(), st.data())
def test_damaged_values_in_valid_batches_decode_or_raise_metadata_record_error(
    records: list[ApiMessageAndVersion], data: st.DataObject
) -> None:
    values = [encode_metadata_record(r) for r in records] or [encode_metadata_record(metadata_record(T.NO_OP_RECORD))]
    i = data.draw(st.integers(0, len(values) - 1))
    value = bytearray(values[i])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(value)))
        action = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        if action == "insert" or not value:
            value[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
        elif action == "delete":
            del value[min(pos, len(value) - 1)]
        else:
            value[min(pos, len(value) - 1)] ^= data.draw(st.integers(1, 255))
    values[i] = bytes(value)
    # A batch with a valid CRC around the damaged value, so that decoding reaches it.
    batch = build_batch([Record(value=v) for v in values], base_offset=0, partition_leader_epoch=1, base_timestamp=0)
    with contextlib.suppress(MetadataRecordError):
        list(read_metadata_batches(batch))


@PROFILE
@given(st.binary(max_size=200), st.integers(0, 120))
def test_damaged_batches_raise_metadata_record_error(noise: bytes, at: int) -> None:
    good = build_metadata_batch([metadata_record(T.NO_OP_RECORD)] * 3, base_offset=0, leader_epoch=1, append_time_ms=0)
    damaged = good[:at] + noise + good[at + len(noise) :]
    with contextlib.suppress(MetadataRecordError):
        list(read_metadata_batches(damaged))
