"""Exactly-once against a model: whatever the interleaving of transactional writes, commits,
aborts, producers fenced by a new instance, transactions timing out, markers delayed, and broker
restarts (clean, or a crash with some markers written and others not), a read_committed reader of
every partition gets exactly the records of the committed transactions, in log order, up to the
last stable offset; and once every transaction has ended, all of them.

The pieces are the real ones: the transaction coordinator with ``__transaction_state`` in
partition logs, partition logs with producer state and transaction indexes, markers appended as a
partition leader appends them, and the produce path's transaction verification. The reader fetches
in small chunks and drops aborted batches with the Java consumer's rule, from the aborted
transactions each chunk reports.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkalike.log import AppendOrigin, LogConfig, MemoryLogDirectory, PartitionLog, ProducerStateError
from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.protocol.records import Record, build_batch, build_end_txn_marker, decode_records, iter_batches
from kafkalike.txn import LogTxnStore, MarkerJob, TransactionCoordinator, TxnConfig, read_records

PARTITIONS = 3
STATE_PARTITIONS = 2
TIMEOUT_MS = 5_000
CONFIG = LogConfig(segment_bytes=500, index_interval_bytes=100, file_delete_delay_ms=0)
TXN_CONFIG = TxnConfig(state_log_partitions=STATE_PARTITIONS, abort_timed_out_interval_ms=1_000, retry_backoff_ms=100)
READ_CHUNK_BYTES = 150


@dataclass
class Instance:
    """A producer instance: its id and epoch, its open transaction (model serial), sequences."""

    producer_id: int
    epoch: int
    serial: int | None = None
    added: set[int] = field(default_factory=set)
    sequences: dict[int, int] = field(default_factory=dict)
    fenced: bool = False


def read_committed(log: PartitionLog) -> list[bytes]:
    """What a read_committed consumer gets from the log start, fetching small chunks."""
    out: list[bytes] = []
    offset = log.log_start_offset
    lso = log.last_stable_offset
    while offset < lso:
        result = log.read(offset, READ_CHUNK_BYTES, max_offset=lso)
        if not result.ranges:
            break
        aborted = [(a.first_offset, a.producer_id) for a in log.aborted_transactions(offset, result)]
        heapq.heapify(aborted)
        aborting: set[int] = set()
        blob = result.read_all()
        for pos, header in iter_batches(blob):
            offset = header.last_offset + 1
            if header.producer_id >= 0:
                while aborted and aborted[0][0] <= header.last_offset:
                    aborting.add(heapq.heappop(aborted)[1])
                if header.is_control:
                    aborting.discard(header.producer_id)
                    continue
                if header.is_transactional and header.producer_id in aborting:
                    continue
            out += [r.value or b"" for r in decode_records(blob, pos, header)]
    return out


class TransactionsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000_000
        self.next_pid = 100
        self.data_dirs = [MemoryLogDirectory(f"d-{p}") for p in range(PARTITIONS)]
        self.state_dirs = [MemoryLogDirectory(f"__transaction_state-{p}") for p in range(STATE_PARTITIONS)]
        self.data: list[PartitionLog] = []
        self.state: list[PartitionLog] = []
        self._open_logs(clean=True)
        self.coordinator = self._coordinator()
        self.instances: dict[str, Instance | None] = {"tx-0": None, "tx-1": None, "tx-2": None}
        self.serials = 0
        self.committed: set[int] = set()
        self.appended: list[list[tuple[int, int, bytes]]] = [[] for _ in range(PARTITIONS)]  # offset, serial, value
        self.counter = 0

    # -- plumbing -------------------------------------------------------------------------------

    def _allocate(self) -> int:
        self.next_pid += 1  # the controller's blocks are durable: no id comes back after a restart
        return self.next_pid

    def _open_logs(self, *, clean: bool) -> None:
        self.data = [PartitionLog.open(d, CONFIG, self.now, clean_shutdown=clean) for d in self.data_dirs]
        for log in self.data:
            log.high_watermark = log.log_end_offset
        self.state = [PartitionLog.open(d, LogConfig(), self.now, clean_shutdown=clean) for d in self.state_dirs]

    def _coordinator(self) -> TransactionCoordinator:
        store = LogTxnStore(lambda p: (self.state[p], 0))
        coordinator = TransactionCoordinator(TXN_CONFIG, store, self._allocate)
        for log in self.state:
            for key, value in read_records(log):
                coordinator.replay(key, value)
        coordinator.on_loaded(self.now)
        return coordinator

    def _write_marker(self, job: MarkerJob, partition: int) -> E:
        batch = build_end_txn_marker(
            commit=job.commit,
            producer_id=job.producer_id,
            producer_epoch=job.producer_epoch,
            coordinator_epoch=job.coordinator_epoch,
            timestamp=self.now,
        )
        try:
            log = self.data[partition]
            log.append(bytearray(batch), leader_epoch=0, now_ms=self.now, origin=AppendOrigin.COORDINATOR)
        except ProducerStateError as exc:
            return E(exc.error_code)
        log.high_watermark = log.log_end_offset  # one replica: acknowledged once written
        return E.NONE

    def _deliver(self) -> None:
        """Write the markers the coordinator asks for and report back, as the broker does."""
        for _ in range(10):
            jobs = self.coordinator.take_marker_jobs()
            if not jobs:
                return
            for job in jobs:
                errors = {tp: self._write_marker(job, tp[1]) for tp in job.partitions}
                self.coordinator.on_markers_written(job, errors, self.now)

    def _poll(self) -> None:
        self.coordinator.poll(self.now)
        self._deliver()

    def _new_serial(self) -> int:
        self.serials += 1
        return self.serials

    # -- producers ------------------------------------------------------------------------------

    @rule(tid=st.sampled_from(["tx-0", "tx-1", "tx-2"]))
    def init(self, tid: str) -> None:
        """A new producer instance: fences the previous one, whose open transaction is aborted."""
        for _ in range(20):
            result = self.coordinator.init_producer_id(tid, TIMEOUT_MS, -1, -1, self.now)
            self._deliver()
            if result.error is not E.CONCURRENT_TRANSACTIONS:
                break
            self.now += 100
            self._poll()
        assert result.error is E.NONE, result
        self.instances[tid] = Instance(result.producer_id, result.producer_epoch)

    @rule(tid=st.sampled_from(["tx-0", "tx-1", "tx-2"]), partition=st.integers(0, PARTITIONS - 1), n=st.integers(1, 4))
    def write(self, tid: str, partition: int, n: int) -> None:
        inst = self.instances[tid]
        if inst is None or inst.fenced:
            return
        if partition not in inst.added:
            error = self.coordinator.add_partitions(tid, inst.producer_id, inst.epoch, [("d", partition)], self.now)
            if error is not E.NONE:
                assert error in (E.PRODUCER_FENCED, E.CONCURRENT_TRANSACTIONS), error
                inst.fenced = error is E.PRODUCER_FENCED
                return
            inst.added.add(partition)
        if inst.serial is None:
            inst.serial = self._new_serial()
        log = self.data[partition]
        entry = log.producer_state.producers.get(inst.producer_id)
        ongoing = entry is not None and entry.current_txn_first_offset is not None and entry.epoch == inst.epoch
        if not ongoing:  # the produce path's verification of a first transactional batch
            verdict = self.coordinator.verify_partitions(tid, inst.producer_id, inst.epoch, [("d", partition)])
            if verdict[("d", partition)] is not E.NONE:
                inst.fenced = verdict[("d", partition)] is E.PRODUCER_FENCED
                return
        values = []
        for _ in range(n):
            self.counter += 1
            values.append(b"%s-%d" % (tid.encode(), self.counter))
        seq = inst.sequences.get(partition, 0)
        batch = build_batch(
            [Record(value=v) for v in values],
            producer_id=inst.producer_id,
            producer_epoch=inst.epoch,
            base_sequence=seq,
            transactional=True,
            base_timestamp=self.now,
        )
        try:
            result = log.append(bytearray(batch), leader_epoch=0, now_ms=self.now)
        except ProducerStateError:
            inst.fenced = True
            return
        log.high_watermark = log.log_end_offset
        inst.sequences[partition] = seq + n
        for i, value in enumerate(values):
            self.appended[partition].append((result.first_offset + i, inst.serial, value))

    @rule(tid=st.sampled_from(["tx-0", "tx-1", "tx-2"]), commit=st.booleans(), deliver=st.booleans())
    def end(self, tid: str, commit: bool, deliver: bool) -> None:
        """EndTxn; the markers go out now, or later (another rule delivers them)."""
        inst = self.instances[tid]
        if inst is None or inst.fenced or inst.serial is None:
            return
        error = self.coordinator.end_transaction(tid, inst.producer_id, inst.epoch, commit, self.now)
        if error is E.NONE:
            if commit:
                self.committed.add(inst.serial)
            inst.serial = None
            inst.added.clear()
        elif error in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_ID_MAPPING):
            inst.fenced = True
        else:
            assert error in (E.CONCURRENT_TRANSACTIONS, E.INVALID_TXN_STATE), error
        if deliver:
            self._deliver()

    @rule()
    def deliver(self) -> None:
        self._deliver()

    @rule(ms=st.sampled_from([100, 1_000, 3_000, 6_000]))
    def advance(self, ms: int) -> None:
        """Time passes: transactions open longer than their timeout are aborted."""
        target = self.now + ms
        while self.now < target:
            self.now = min(target, self.now + 500)
            self._poll()

    # -- the broker -----------------------------------------------------------------------------

    @rule(clean=st.booleans(), written=st.integers(0, 3))
    def restart(self, clean: bool, written: int) -> None:
        """Stop (cleanly, or by crashing with only ``written`` markers of the pending ones out and
        nothing reported), then start again: recover the logs, replay the coordinator."""
        if not clean:
            for job in self.coordinator.take_marker_jobs():
                for tp in sorted(job.partitions)[:written]:
                    self._write_marker(job, tp[1])
            for log in self.data + self.state:
                log.release()
        else:
            for log in self.data + self.state:
                log.close()
        self._open_logs(clean=clean)
        self.coordinator = self._coordinator()
        self._deliver()

    @rule()
    def finish(self) -> None:
        """Let every transaction end (time runs past every timeout): all committed data shows."""
        for _ in range(4):
            self.advance(6_000)
        for p, log in enumerate(self.data):
            assert log.last_stable_offset == log.log_end_offset, p
        for inst in self.instances.values():
            if inst is not None and inst.serial is not None:
                inst.fenced = True  # its transaction timed out

    # -- the property -----------------------------------------------------------------------------

    @invariant()
    def read_committed_sees_exactly_the_committed_records_in_order(self) -> None:
        for p, log in enumerate(self.data):
            lso = log.last_stable_offset
            expected = [v for offset, serial, v in self.appended[p] if serial in self.committed and offset < lso]
            assert read_committed(log) == expected, p


TransactionsMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestTransactions = TransactionsMachine.TestCase
