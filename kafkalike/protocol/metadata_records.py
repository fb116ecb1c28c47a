"""Cluster metadata records and KRaft control records, framed as Kafka frames them.

The ``__cluster_metadata`` log and its snapshots are v2 record batches. Two kinds of batch:

- **Data batches** hold metadata records. Each record has a null key and, as value, an
  ``ApiMessageAndVersion`` frame (Kafka's ``AbstractApiMessageSerde``)::

      frame version  unsigned varint, always 1 (0 was KRaft's 2.8 preview, never readable)
      record type    unsigned varint, the record's api key (TopicRecord 2, PartitionRecord 3, ...)
      version        unsigned varint, the record's version
      message        the record encoded at that version (``protocol_specs/*_record.kspec``)

- **Control batches** (attributes bit 5) hold control records: key ``int16 0, int16 type``
  (LEADER_CHANGE 2, SNAPSHOT_HEADER 3, SNAPSHOT_FOOTER 4, KRAFT_VERSION 5, KRAFT_VOTERS 6), value
  the message at version 0 with no version prefix (Kafka always reads it as version 0; the
  message's own ``version`` field says 0 too).

Every batch carries the leader epoch that wrote it in its partition leader epoch, CreateTime
timestamps equal to the append time, no producer id, and no key on data records.

A snapshot (``<end offset>-<epoch>.checkpoint``) is: a control batch at offset 0 with a
SnapshotHeader (plus KRaftVersion and Voters when kraft.version is 1), data batches with the
image's records, and a control batch with a SnapshotFooter, all at the snapshot's epoch.

Sans-IO: bytes in, records out. Decoding failures raise ``MetadataRecordError``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import Any

from kafkalike.protocol.codec import Message, Schema, schema
from kafkalike.protocol.errors import DecodeError, EncodeError, ProtocolError
from kafkalike.protocol.records import (
    ControlRecordType,
    Record,
    RecordBatchHeader,
    batch_crc_ok,
    build_batch,
    control_record_key,
    control_record_type,
    decode_records,
    iter_batches,
)
from kafkalike.protocol.spec import load_specs
from kafkalike.protocol.wire import FrameReader, encode_uvarint, read_uvarint

METADATA_TOPIC = "__cluster_metadata"
FRAME_VERSION = 1
CONTROL_MESSAGE_VERSION = 0
MAX_BATCH_BYTES = 1024 * 1024  # a data batch is cut here; Kafka's limit is 8 MiB


class MetadataRecordError(DecodeError):
    """Bytes in the metadata log or a snapshot that are not a record Kafka could have written."""


class MetadataRecordType(IntEnum):
    """The api keys of the metadata records (Kafka's MetadataRecordType); names as Kafka prints them."""

    REGISTER_BROKER_RECORD = 0
    UNREGISTER_BROKER_RECORD = 1
    TOPIC_RECORD = 2
    PARTITION_RECORD = 3
    CONFIG_RECORD = 4
    PARTITION_CHANGE_RECORD = 5
    FENCE_BROKER_RECORD = 7
    UNFENCE_BROKER_RECORD = 8
    REMOVE_TOPIC_RECORD = 9
    DELEGATION_TOKEN_RECORD = 10
    USER_SCRAM_CREDENTIAL_RECORD = 11
    FEATURE_LEVEL_RECORD = 12
    CLIENT_QUOTA_RECORD = 14
    PRODUCER_IDS_RECORD = 15
    BROKER_REGISTRATION_CHANGE_RECORD = 17
    ACCESS_CONTROL_ENTRY_RECORD = 18
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19
    NO_OP_RECORD = 20
    ZK_MIGRATION_STATE_RECORD = 21
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22
    BEGIN_TRANSACTION_RECORD = 23
    END_TRANSACTION_RECORD = 24
    ABORT_TRANSACTION_RECORD = 25
    REMOVE_DELEGATION_TOKEN_RECORD = 26
    REGISTER_CONTROLLER_RECORD = 27

    @property
    def spec_name(self) -> str:
        """``TOPIC_RECORD`` -> ``TopicRecord``, the name of its spec and of Kafka's definition."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @property
    def has_spec(self) -> bool:
        """Whether this project reads and writes the record's fields (others are kept as raw bytes)."""
        return self.spec_name in load_specs()


class ControlMessageType(IntEnum):
    """The KRaft control records, by the type in their key."""

    LEADER_CHANGE = ControlRecordType.LEADER_CHANGE
    SNAPSHOT_HEADER = ControlRecordType.SNAPSHOT_HEADER
    SNAPSHOT_FOOTER = ControlRecordType.SNAPSHOT_FOOTER
    KRAFT_VERSION = ControlRecordType.KRAFT_VERSION
    KRAFT_VOTERS = ControlRecordType.KRAFT_VOTERS

    @property
    def spec_name(self) -> str:
        return _CONTROL_SPECS[self]


_CONTROL_SPECS = {
    ControlMessageType.LEADER_CHANGE: "LeaderChangeMessage",
    ControlMessageType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
    ControlMessageType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
    ControlMessageType.KRAFT_VERSION: "KRaftVersionRecord",
    ControlMessageType.KRAFT_VOTERS: "VotersRecord",
}


@dataclass(frozen=True, slots=True)
class ApiMessageAndVersion:
    """One metadata record: its type, the version it is (to be) encoded at, and its fields.

    ``message`` is a decoded message (every field of the spec, defaults filled in). For types this
    project does not model (ACLs, quotas, SCRAM, delegation tokens...) it is None and ``raw`` holds
    the encoded message, so that such records survive a read and a write unchanged.
    """

    type: MetadataRecordType
    version: int
    message: Message
    raw: bytes | None = None

    def __getattr__(self, name: str) -> Any:
        # record.topic_id rather than record.message.topic_id, for the common case.
        if name.startswith("_") or self.message is None:
            raise AttributeError(name)
        try:
            return self.message[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True, slots=True)
class ControlMessage:
    """One KRaft control record: its type and its (version 0) message."""

    type: ControlMessageType
    message: Message


@cache
def latest_version(record_type: MetadataRecordType) -> int:
    """The highest version of a record type this project's spec has."""
    high = load_specs()[record_type.spec_name].versions.high
    assert high is not None, f"{record_type.spec_name}: spec versions must be closed"
    return high


# Versions read but not written unless asked for: RegisterBrokerRecord v4 and
# BrokerRegistrationChangeRecord v3 add the cordoned log directories (metadata.version 4.3-IV0
# on); the controller asks for them by metadata.version where it writes them.
WRITTEN_BELOW_LATEST = {
    MetadataRecordType.REGISTER_BROKER_RECORD: 3,
    MetadataRecordType.BROKER_REGISTRATION_CHANGE_RECORD: 2,
}


def written_version(record_type: MetadataRecordType) -> int:
    """The version ``metadata_record`` writes when none is asked for."""
    return WRITTEN_BELOW_LATEST.get(record_type, latest_version(record_type))


def _record_schema(record_type: MetadataRecordType, version: int) -> Schema:
    return schema(record_type.spec_name, "message", version)


def _complete(schema_: Schema, fields: Mapping[str, Any], what: str) -> Message:
    """``fields`` as a full message with defaults, checked by encoding it (unknown names refused)."""
    unknown = set(fields) - _all_field_names(schema_.name)
    if unknown:
        raise EncodeError(f"{what}: no field {sorted(unknown)}")
    return schema_.decode(schema_.encode(fields))


@cache
def _all_field_names(spec_name: str) -> frozenset[str]:
    return frozenset(f.name for f in load_specs()[spec_name].messages["message"].fields)


def metadata_record(record_type: MetadataRecordType, version: int | None = None, **fields: Any) -> ApiMessageAndVersion:
    """A metadata record with the given fields (others at their defaults), at ``version`` or the
    one written by default (``written_version``)."""
    v = written_version(record_type) if version is None else version
    schema_ = _record_schema(record_type, v)
    return ApiMessageAndVersion(record_type, v, _complete(schema_, fields, f"{record_type.name} v{v}"))


def control_message(message_type: ControlMessageType, **fields: Any) -> ControlMessage:
    """A control record's message; ``version`` is set to 0, the only version Kafka reads."""
    schema_ = schema(message_type.spec_name, "message", CONTROL_MESSAGE_VERSION)
    fields = {"version": CONTROL_MESSAGE_VERSION, **fields}
    return ControlMessage(message_type, _complete(schema_, fields, message_type.name))


# -- one record value --------------------------------------------------------------------------------


def encode_metadata_record(record: ApiMessageAndVersion) -> bytes:
    """The ``ApiMessageAndVersion`` frame that is a data record's value."""
    head = encode_uvarint(FRAME_VERSION) + encode_uvarint(record.type) + encode_uvarint(record.version)
    if record.message is None:
        if record.raw is None:
            raise EncodeError(f"{record.type.name}: neither fields nor raw bytes")
        return head + record.raw
    return head + _record_schema(record.type, record.version).encode(record.message)


def decode_metadata_record(value: bytes | bytearray | memoryview) -> ApiMessageAndVersion:
    """A data record's value back into a record; anything but exactly one record raises."""
    reader = FrameReader(value)
    try:
        frame_version = read_uvarint(reader)
        if frame_version != FRAME_VERSION:
            raise MetadataRecordError(f"metadata record frame version {frame_version}: only {FRAME_VERSION} is known")
        type_id = read_uvarint(reader)
        version = read_uvarint(reader)
    except MetadataRecordError:
        raise
    except DecodeError as exc:
        raise MetadataRecordError(f"metadata record frame: {exc}") from exc
    try:
        record_type = MetadataRecordType(type_id)
    except ValueError:
        raise MetadataRecordError(f"unknown metadata record type {type_id}") from None
    body = bytes(memoryview(value)[len(value) - reader.remaining() :])
    if not record_type.has_spec:
        return ApiMessageAndVersion(record_type, version, None, body)
    if version not in load_specs()[record_type.spec_name].versions:
        raise MetadataRecordError(f"{record_type.name} version {version} is not known")
    try:
        message = _record_schema(record_type, version).decode(body)
    except DecodeError as exc:
        raise MetadataRecordError(f"{record_type.name} v{version}: {exc}") from exc
    return ApiMessageAndVersion(record_type, version, message)


def encode_control_value(message: ControlMessage) -> tuple[bytes, bytes]:
    """A control record's key and value."""
    key = control_record_key(message.type)
    value = schema(message.type.spec_name, "message", CONTROL_MESSAGE_VERSION).encode(message.message)
    return key, value


def decode_control_record(record: Record) -> ControlMessage | None:
    """The KRaft control message a control record holds; None for other control types (markers)."""
    type_id = control_record_type(record)
    try:
        message_type = ControlMessageType(type_id)
    except ValueError:
        return None
    if record.value is None:
        raise MetadataRecordError(f"{message_type.name} control record without a value")
    try:
        # Read as version 0 whatever the version field says, as Kafka does; later versions only add tags.
        reader = FrameReader(record.value)
        message = schema(message_type.spec_name, "message", CONTROL_MESSAGE_VERSION).decode_from(reader)
    except DecodeError as exc:
        raise MetadataRecordError(f"{message_type.name}: {exc}") from exc
    return ControlMessage(message_type, message)


# -- batches ------------------------------------------------------------------------------------------


def build_metadata_batch(
    records: Sequence[ApiMessageAndVersion],
    *,
    base_offset: int,
    leader_epoch: int,
    append_time_ms: int,
    compression: int = 0,
) -> bytes:
    """A data batch of ``records`` as a KRaft leader appends it."""
    if not records:
        raise ValueError("a metadata batch needs at least one record")
    return build_batch(
        [Record(value=encode_metadata_record(r)) for r in records],
        base_offset=base_offset,
        compression=compression,
        partition_leader_epoch=leader_epoch,
        base_timestamp=append_time_ms,
    )


def build_control_batch(
    messages: Sequence[ControlMessage], *, base_offset: int, leader_epoch: int, append_time_ms: int
) -> bytes:
    """A control batch of KRaft control records (LeaderChange, snapshot header or footer...)."""
    if not messages:
        raise ValueError("a control batch needs at least one record")
    records = []
    for m in messages:
        key, value = encode_control_value(m)
        records.append(Record(key=key, value=value))
    return build_batch(
        records,
        base_offset=base_offset,
        control=True,
        partition_leader_epoch=leader_epoch,
        base_timestamp=append_time_ms,
    )


def leader_change_batch(
    *, leader_id: int, voters: Sequence[int], granting_voters: Sequence[int], base_offset: int, epoch: int, now_ms: int
) -> bytes:
    """The LeaderChange control batch a new KRaft leader writes first in its epoch."""
    message = control_message(
        ControlMessageType.LEADER_CHANGE,
        leader_id=leader_id,
        voters=[{"voter_id": v} for v in voters],
        granting_voters=[{"voter_id": v} for v in granting_voters],
    )
    return build_control_batch([message], base_offset=base_offset, leader_epoch=epoch, append_time_ms=now_ms)


@dataclass(frozen=True, slots=True)
class MetadataBatch:
    """A decoded batch of the metadata log: its offsets, epoch and time, and its records."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    append_time_ms: int
    records: tuple[ApiMessageAndVersion, ...] = ()
    control: tuple[ControlMessage, ...] = ()

    @property
    def is_control(self) -> bool:
        return bool(self.control) or not self.records


def read_metadata_batches(buf: bytes | bytearray | memoryview, *, partial_ok: bool = False) -> Iterator[MetadataBatch]:
    """Each batch in ``buf`` (a log segment, a snapshot, a fetch response's records), decoded.

    A bad CRC, a batch cut short, a legacy message set or an undecodable record raises
    ``MetadataRecordError``; ``partial_ok`` stops quietly at a batch cut short at the end.
    """
    try:
        for pos, header in iter_batches(buf, partial_ok=partial_ok):
            if not batch_crc_ok(buf, pos, header):
                raise MetadataRecordError(f"metadata batch at offset {header.base_offset}: CRC mismatch")
            yield _decode_batch(buf, pos, header)
    except MetadataRecordError:
        raise
    except ProtocolError as exc:
        raise MetadataRecordError(str(exc)) from exc


def _decode_batch(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> MetadataBatch:
    records = decode_records(buf, pos, header)
    common = {
        "base_offset": header.base_offset,
        "last_offset": header.last_offset,
        "leader_epoch": header.partition_leader_epoch,
        "append_time_ms": header.max_timestamp,
    }
    if header.is_control:
        control = [m for m in (decode_control_record(r) for r in records) if m is not None]
        return MetadataBatch(**common, control=tuple(control))  # type: ignore[arg-type]
    data = []
    for r in records:
        if r.value is None:
            raise MetadataRecordError(f"metadata record at offset {r.offset(header)} has no value")
        data.append(decode_metadata_record(r.value))
    return MetadataBatch(**common, records=tuple(data))  # type: ignore[arg-type]


# -- snapshots ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotContents:
    """What a snapshot holds besides its id (which is in its file name)."""

    last_contained_log_timestamp: int
    records: tuple[ApiMessageAndVersion, ...]
    kraft_version: int = 0
    voters: Message = None  # the VotersRecord message, when kraft.version is 1


def build_snapshot(
    records: Sequence[ApiMessageAndVersion],
    *,
    epoch: int,
    last_contained_log_timestamp: int,
    now_ms: int,
    kraft_version: int = 0,
    voters: Message = None,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> bytes:
    """The bytes of a ``.checkpoint`` file, laid out as Kafka's RecordsSnapshotWriter lays them out."""
    head = [
        control_message(ControlMessageType.SNAPSHOT_HEADER, last_contained_log_timestamp=last_contained_log_timestamp)
    ]
    if kraft_version >= 1:
        head.append(control_message(ControlMessageType.KRAFT_VERSION, k_raft_version=kraft_version))
        if voters is not None:
            head.append(ControlMessage(ControlMessageType.KRAFT_VOTERS, voters))
    elif voters is not None:
        raise ValueError("a voter set needs kraft.version 1")
    out = [build_control_batch(head, base_offset=0, leader_epoch=epoch, append_time_ms=now_ms)]
    offset = len(head)
    for chunk in _chunks(records, max_batch_bytes):
        out.append(build_metadata_batch(chunk, base_offset=offset, leader_epoch=epoch, append_time_ms=now_ms))
        offset += len(chunk)
    footer = control_message(ControlMessageType.SNAPSHOT_FOOTER)
    out.append(build_control_batch([footer], base_offset=offset, leader_epoch=epoch, append_time_ms=now_ms))
    return b"".join(out)


def _chunks(records: Sequence[ApiMessageAndVersion], max_bytes: int) -> Iterator[list[ApiMessageAndVersion]]:
    chunk: list[ApiMessageAndVersion] = []
    size = 0
    for r in records:
        n = len(encode_metadata_record(r)) + 8  # the record's own framing, roughly
        if chunk and size + n > max_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.append(r)
        size += n
    if chunk:
        yield chunk


def read_snapshot(data: bytes | bytearray | memoryview) -> SnapshotContents:
    """A ``.checkpoint`` file's contents; one without its header first or its footer last raises."""
    batches = list(read_metadata_batches(data))
    if not batches or not batches[0].control or batches[0].control[0].type != ControlMessageType.SNAPSHOT_HEADER:
        raise MetadataRecordError("snapshot does not start with a SnapshotHeader control record")
    last = batches[-1]
    if not last.control or last.control[-1].type != ControlMessageType.SNAPSHOT_FOOTER:
        raise MetadataRecordError("snapshot does not end with a SnapshotFooter control record (incomplete)")
    header = batches[0].control[0].message
    kraft_version = 0
    voters = None
    for batch in batches:
        for m in batch.control:
            if m.type == ControlMessageType.KRAFT_VERSION:
                kraft_version = m.message.k_raft_version
            elif m.type == ControlMessageType.KRAFT_VOTERS:
                voters = m.message
    records = tuple(r for b in batches for r in b.records)
    return SnapshotContents(header.last_contained_log_timestamp, records, kraft_version, voters)
