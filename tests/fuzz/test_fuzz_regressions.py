"""Inputs the fuzzers found that broke a target, kept so that the bug stays fixed.

Every file under ``tests/fuzz/regressions/<target>/`` is replayed through its target; the tests
below pin down what the fixed code does with each.
"""

from __future__ import annotations

import logging
import struct
import zlib
from pathlib import Path

import pytest

from kafkalike.log import LogConfig, MemoryLogDirectory, PartitionLog
from kafkalike.log.coordinator_log import RecordError
from kafkalike.protocol import records as rec
from kafkalike.protocol.errors import ErrorCode
from kafkalike.testing import InProcessBroker, fuzz
from kafkalike.testing.wire_client import WireClient
from kafkalike.txn import TransactionCoordinator, TxnConfig
from kafkalike.txn import records as txn_records
from kafkalike.txn.metadata import TxnTransit
from kafkalike.txn.state import TxnState
from kafkalike.txn.store import LogTxnStore

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
CASES = sorted(p for p in REGRESSIONS.glob("*/*") if p.is_file())


@pytest.fixture(autouse=True)
def _stop_request_path_broker() -> object:
    yield
    fuzz.stop_request_path()


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def test_found_input_keeps_the_invariant(path: Path) -> None:
    crash = fuzz.run_one(fuzz.target(path.parent.name), path.read_bytes())
    assert crash is None, crash.error


def _legacy(offset: int, value: bytes) -> bytes:
    body = struct.pack(">bbq", 1, 0, 1_700_000_000_000) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


def test_legacy_offsets_further_apart_than_an_int32_are_renumbered() -> None:
    """Found by the records target: rising offsets 2**31 apart made the up-converted batch's
    last offset delta overflow its int32 (a struct.error)."""
    blob = _legacy(0, b"a") + _legacy(1, b"b") + _legacy(5_260_204_364_768_739_328, b"c")
    batch = rec.convert_legacy_to_v2(blob)
    ((pos, header),) = rec.iter_batches(batch)
    rec.validate_batch(batch, pos, header, from_client=False)
    assert (header.base_offset, header.last_offset_delta) == (0, 2)
    assert [r.value for r in rec.decode_records(batch, pos, header)] == [b"a", b"b", b"c"]
    # Still kept as they are when they fit.
    kept = rec.convert_legacy_to_v2(_legacy(10, b"a") + _legacy(10 + 2**31 - 1, b"b"))
    ((_, kept_header),) = rec.iter_batches(kept)
    assert (kept_header.base_offset, kept_header.last_offset_delta) == (10, 2**31 - 1)


def _transit(producer_id: int, producer_epoch: int, state: TxnState) -> TxnTransit:
    return TxnTransit(producer_id, -1, -1, producer_epoch, -1, 60_000, state, frozenset({("t", 0)}), 1, 2)


@pytest.mark.parametrize(("producer_id", "producer_epoch"), [(7, -32768), (7, -1), (-2594073385365313792, 0)])
def test_transaction_records_no_transition_could_write_are_skipped_on_load(
    producer_id: int, producer_epoch: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the coordinator_records target: a PrepareCommit record with a negative producer id
    or epoch was loaded, and completing it raised IllegalTransition out of ``on_loaded``."""
    key, value = txn_records.state_record("g", _transit(producer_id, producer_epoch, TxnState.PREPARE_COMMIT))
    with pytest.raises(RecordError, match="producer id"):
        txn_records.decode_record(key, value)
    coordinator = TransactionCoordinator(TxnConfig(state_log_partitions=1), LogTxnStore(_memory_log), lambda: 1)
    with caplog.at_level(logging.WARNING, "kafkalike.txn"):
        coordinator.replay(key, value)
    coordinator.on_loaded(1_000)
    assert "g" not in coordinator.txns
    assert "skipping an unreadable record in the transaction state topic" in caplog.text


def test_dead_transactions_keep_their_negative_epoch() -> None:
    key, value = txn_records.state_record("g", _transit(7, -1, TxnState.DEAD))
    loaded = txn_records.decode_record(key, value)
    assert loaded is not None and loaded.transit is not None and loaded.transit.producer_epoch == -1


def _memory_log(partition: int) -> tuple[PartitionLog, int]:
    return PartitionLog.open(MemoryLogDirectory(f"txn-{partition}"), LogConfig(), 0), 0


def test_a_join_listing_one_protocol_twice_completes_and_the_broker_lives() -> None:
    """Found by the request_path target: the name counted twice for one member looked supported by
    two members of a group of one, so no protocol was a candidate, and the ValueError from the
    vote, raised in the group coordinator's timer, stopped the broker's event loop."""
    join = {
        "group_id": "dup-protocols",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"a"}, {"name": "range", "metadata": b"b"}],
        "reason": None,
    }
    with InProcessBroker() as broker, WireClient(broker.host, broker.port) as client:
        first = client.request(11, 7, join)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = client.request(11, 7, {**join, "member_id": first.member_id})
        assert (joined.error_code, joined.protocol_name, joined.leader) == (0, "range", first.member_id)
        assert client.request(18, 0, {}).error_code == 0
        assert broker.running and not broker.logged_errors
