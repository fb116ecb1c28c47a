"""A transaction coordinator on an in-memory store with a hand-driven clock, for scripted tests.

Markers are answered by the test (``markers()``): by default every partition gets its marker;
``restart()`` builds a new coordinator from the records written so far, as a broker does at
start-up.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from kafkalike.protocol.errors import ErrorCode
from kafkalike.txn import InitResult, MarkerJob, StoreError, TopicPartition, TransactionCoordinator, TxnConfig
from kafkalike.txn.metadata import TxnMetadata, TxnTransit
from kafkalike.txn.records import TxnRecord, decode_record

PARTITIONS = 4
E = ErrorCode


class MemoryTxnStore:
    """Records by partition; ``failing`` makes every append raise StoreError."""

    def __init__(self) -> None:
        self.records: dict[int, list[TxnRecord]] = defaultdict(list)
        self.failing = False

    def append(self, partition: int, records: Sequence[TxnRecord], now_ms: int) -> None:
        if self.failing:
            raise StoreError("disk on fire")
        self.records[partition].extend(records)

    def transits(self, transactional_id: str) -> list[TxnTransit | None]:
        """Every state written for the id, in order (None: a tombstone)."""
        out = []
        for records in self.records.values():
            for key, value in records:
                loaded = decode_record(key, value)
                if loaded is not None and loaded.transactional_id == transactional_id:
                    out.append(loaded.transit)
        return out


class Harness:
    def __init__(self, **config: Any) -> None:
        self.config = TxnConfig(**{"state_log_partitions": PARTITIONS, **config})
        self.now = 1_000_000
        self.store = MemoryTxnStore()
        self.next_pid = 1000
        self.coordinator = self._new()
        self.coordinator.on_loaded(self.now)

    def _allocate(self) -> int:
        self.next_pid += 1
        return self.next_pid - 1

    def _new(self) -> TransactionCoordinator:
        return TransactionCoordinator(self.config, self.store, self._allocate)

    def restart(self) -> list[MarkerJob]:
        """A new coordinator from the records written so far; the marker jobs it starts with."""
        self.coordinator = self._new()
        for partition in sorted(self.store.records):
            for key, value in self.store.records[partition]:
                self.coordinator.replay(key, value)
        self.coordinator.on_loaded(self.now)
        return self.coordinator.take_marker_jobs()

    # -- requests -------------------------------------------------------------------------------

    def init(self, tid: str, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1) -> InitResult:
        return self.coordinator.init_producer_id(tid, timeout_ms, pid, epoch, self.now)

    def begin(self, tid: str, *partitions: TopicPartition, timeout_ms: int = 60_000) -> tuple[int, int]:
        """InitProducerId then AddPartitionsToTxn; (producer id, epoch)."""
        result = self.init(tid, timeout_ms)
        assert result.error is E.NONE, result
        if partitions:
            assert self.add(tid, result.producer_id, result.producer_epoch, *partitions) is E.NONE
        return result.producer_id, result.producer_epoch

    def add(self, tid: str, pid: int, epoch: int, *partitions: TopicPartition) -> ErrorCode:
        return self.coordinator.add_partitions(tid, pid, epoch, partitions, self.now)

    def end(self, tid: str, pid: int, epoch: int, commit: bool = True) -> ErrorCode:
        return self.coordinator.end_transaction(tid, pid, epoch, commit, self.now)

    def markers(self, answer: Callable[[MarkerJob, TopicPartition], ErrorCode] | None = None) -> list[MarkerJob]:
        """Take the pending marker jobs and answer each partition (NONE unless ``answer`` says)."""
        jobs = self.coordinator.take_marker_jobs()
        for job in jobs:
            errors = {tp: E.NONE if answer is None else answer(job, tp) for tp in job.partitions}
            self.coordinator.on_markers_written(job, errors, self.now)
        return jobs

    def advance(self, ms: int) -> None:
        """Move the clock, polling at every deadline on the way (and answering the markers the
        coordinator asks for), as the adapter does."""
        target = self.now + ms
        while True:
            deadline = self.coordinator.poll(self.now)
            self.markers()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
        self.now = target

    def txn(self, tid: str) -> TxnMetadata:
        return self.coordinator.txns[tid]
