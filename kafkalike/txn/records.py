"""The records of ``__transaction_state``, in Apache Kafka's layout, so the topic reads the same.

Key: int16 version 0, then TransactionLogKey (the transactional id). Value: int16 version, then
TransactionLogValue (``protocol_specs/transaction_log_value.kspec``); a null value is a
tombstone, written when a transactional id expires. Values are written at v0, as Kafka does
until transaction.version 1 is finalized, and read at v0 or v1.

A transactional id lives in partition ``abs(hash(id)) % partitions`` of the topic, with Java's
String.hashCode, so the layout matches Kafka's for the same partition count.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kafkalike.log.coordinator_log import CoordinatorRecord, decode_versioned, encode_versioned, key_version
from kafkalike.log.coordinator_log import RecordError as RecordError
from kafkalike.log.coordinator_log import java_string_hash as java_string_hash
from kafkalike.log.coordinator_log import partition_for as partition_for
from kafkalike.txn.metadata import TxnTransit
from kafkalike.txn.state import TxnState

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0

TxnRecord = CoordinatorRecord


@dataclass(frozen=True)
class LoadedTxn:
    transactional_id: str
    transit: TxnTransit | None  # None: a tombstone


def key_bytes(transactional_id: str) -> bytes:
    return encode_versioned("TransactionLogKey", KEY_VERSION, {"transactional_id": transactional_id})


def value_bytes(transit: TxnTransit) -> bytes:
    if transit.state is TxnState.EMPTY and transit.partitions:
        raise ValueError(f"an Empty transaction cannot hold partitions: {transit}")
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(transit.partitions):
        by_topic[topic].append(partition)
    body = {
        "producer_id": transit.producer_id,
        "producer_epoch": transit.producer_epoch,
        "transaction_timeout_ms": transit.timeout_ms,
        "transaction_status": transit.state.id,
        "transaction_partitions": None
        if transit.state is TxnState.EMPTY
        else [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
        "transaction_last_update_timestamp_ms": transit.last_update_ms,
        "transaction_start_timestamp_ms": transit.start_ms,
    }
    return encode_versioned("TransactionLogValue", VALUE_VERSION, body)


def state_record(transactional_id: str, transit: TxnTransit) -> TxnRecord:
    return key_bytes(transactional_id), value_bytes(transit)


def tombstone(transactional_id: str) -> TxnRecord:
    return key_bytes(transactional_id), None


def decode_record(key: bytes | None, value: bytes | None) -> LoadedTxn | None:
    """What a key/value pair of the topic holds; None for a key version this broker does not know
    (Kafka skips those too: leftovers of an aborted upgrade)."""
    if key_version(key) != KEY_VERSION:
        return None
    assert key is not None  # key_version refuses a null key
    _, k = decode_versioned("TransactionLogKey", key)
    return LoadedTxn(k.transactional_id, None if value is None else _transit(value))


def _transit(value: bytes) -> TxnTransit:
    version, v = decode_versioned("TransactionLogValue", value)
    try:
        state = TxnState.from_id(v.transaction_status)
    except ValueError as exc:
        raise RecordError(f"TransactionLogValue v{version}: {exc}") from exc
    # Nothing the coordinator writes has these (its transitions refuse them), and a transaction
    # loaded with them could never be completed: refused here, the loader logs and skips it.
    if v.producer_id < 0 or (state is not TxnState.DEAD and v.producer_epoch < 0):
        raise RecordError(
            f"TransactionLogValue v{version}: producer id {v.producer_id} epoch {v.producer_epoch} in state {state}"
        )
    partitions = frozenset((p.topic, pid) for p in (v.transaction_partitions or []) for pid in p.partition_ids)
    return TxnTransit(
        producer_id=v.producer_id,
        prev_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id,
        producer_epoch=v.producer_epoch,
        last_producer_epoch=-1,
        timeout_ms=v.transaction_timeout_ms,
        state=state,
        partitions=frozenset() if state is TxnState.EMPTY else partitions,
        start_ms=v.transaction_start_timestamp_ms,
        last_update_ms=v.transaction_last_update_timestamp_ms,
    )
