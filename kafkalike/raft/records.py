"""What the quorum itself writes into its log: data batches from ``append``, and the LeaderChange
control record a new leader writes first in its epoch.

A LeaderChange batch is a control batch (attribute bit 5) with one record whose key is the control
key (version 0, type 2, :class:`~kafkalike.protocol.records.ControlRecordType`) and whose value is a
LeaderChangeMessage (``protocol_specs/leader_change_message.kspec``) at version 0, as Kafka's
``ControlRecordUtils`` writes it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafkalike.protocol.codec import schema
from kafkalike.protocol.records import (
    ControlRecordType,
    Record,
    build_batch,
    control_record_type,
    decode_records,
    read_batch_header,
)

LEADER_CHANGE_VERSION = 0
_CONTROL_KEY = struct.Struct(">hh")


@dataclass(frozen=True, slots=True)
class LeaderChange:
    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


def data_batch(values: Sequence[bytes], *, base_offset: int, epoch: int, timestamp_ms: int) -> bytes:
    """One batch of plain records (no key) written by the leader of ``epoch``."""
    records = [Record(value=v) for v in values]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch, base_timestamp=timestamp_ms)


def leader_change_batch(change: LeaderChange, *, base_offset: int, epoch: int, timestamp_ms: int) -> bytes:
    value = schema("LeaderChangeMessage", "message", LEADER_CHANGE_VERSION).encode(
        {
            "version": LEADER_CHANGE_VERSION,
            "leader_id": change.leader_id,
            "voters": [{"voter_id": v} for v in change.voters],
            "granting_voters": [{"voter_id": v} for v in change.granting_voters],
        }
    )
    record = Record(key=_CONTROL_KEY.pack(0, ControlRecordType.LEADER_CHANGE), value=value)
    return build_batch(
        [record], base_offset=base_offset, partition_leader_epoch=epoch, control=True, base_timestamp=timestamp_ms
    )


def parse_leader_change(batch: bytes) -> LeaderChange | None:
    """The LeaderChange a control batch holds; None for any other batch."""
    header = read_batch_header(batch)
    if not header.is_control:
        return None
    (record,) = decode_records(batch, 0, header)
    if control_record_type(record) != ControlRecordType.LEADER_CHANGE or record.value is None:
        return None
    message = schema("LeaderChangeMessage", "message", LEADER_CHANGE_VERSION).decode(record.value)
    return LeaderChange(
        message["leader_id"],
        tuple(v["voter_id"] for v in message["voters"]),
        tuple(v["voter_id"] for v in message["granting_voters"]),
    )


def record_values(batch: bytes) -> Iterable[bytes | None]:
    header = read_batch_header(batch)
    return [r.value for r in decode_records(batch, 0, header)]
