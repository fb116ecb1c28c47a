"""Log compaction against a model, for random workloads and random crash points.

The model is every record ever appended. Whatever the appends (plain, idempotent, in transactions
that commit or abort), rolls, waits, cleaning steps, full offset maps, restarts and crashes part-way
through a clean (stop dead, reopen from storage), the log must keep every record that is the newest
of its key among those not aborted, except a tombstone once delete.retention.ms has passed since it
was written, and then nothing older of its key; never change a record or an offset; keep the active
segment and the log end offset as they are; and read back as sound batches. Aborted records may go.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkalike.log import (
    AppendOrigin,
    FileLogDirectory,
    LogCleaner,
    LogConfig,
    LogDirectory,
    MemoryLogDirectory,
    PartitionLog,
)
from kafkalike.protocol.records import (
    Record,
    batch_crc_ok,
    build_batch,
    build_end_txn_marker,
    decode_records,
    iter_batches,
)

CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=600,
    index_interval_bytes=100,
    file_delete_delay_ms=0,
    delete_retention_ms=500,
    min_cleanable_dirty_ratio=0.3,
)

keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f", b"g"])
values = st.one_of(st.none(), st.binary(max_size=40), st.binary(max_size=40))  # about a third tombstones
IDEMPOTENT, TRANSACTIONAL = 1, 2  # producer ids


class Crash(BaseException):
    """The process dies where this is raised: nothing after it runs, nothing is cleaned up."""


class CleanerMachine(RuleBasedStateMachine):
    memory = True

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="kafkalike-cleaner-")
        self.directory: LogDirectory = MemoryLogDirectory() if self.memory else FileLogDirectory(Path(self.tmp) / "t-0")
        self.now = 0
        self.log = self._open(clean=False)
        self.cleaner = LogCleaner()
        self.written: dict[int, tuple[bytes, bytes | None, int]] = {}  # offset -> key, value, append time
        self.end = 0
        self.sequences = {IDEMPOTENT: 0, TRANSACTIONAL: 0}
        self.open_txn: list[int] = []  # offsets of the records of the transaction in progress
        self.aborted: set[int] = set()

    def teardown(self) -> None:
        self.log.release()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _open(self, *, clean: bool) -> PartitionLog:
        log = PartitionLog.open(self.directory, CONFIG, self.now, clean_shutdown=clean)
        log.high_watermark = log.log_end_offset
        return log

    # ---- the workload ----------------------------------------------------------------------------

    @rule(
        records=st.lists(st.tuples(keys, values), min_size=1, max_size=4),
        codec=st.sampled_from([0, 0, 1, 4]),
        wait_ms=st.integers(0, 300),
        producer=st.sampled_from([-1, -1, IDEMPOTENT, TRANSACTIONAL]),
    )
    def append(self, records: list[tuple[bytes, bytes | None]], codec: int, wait_ms: int, producer: int) -> None:
        self.now += wait_ms
        sequence = self.sequences.get(producer, -1)
        batch = build_batch(
            [Record(key=k, value=v) for k, v in records],
            base_timestamp=self.now,
            compression=codec,
            producer_id=producer,
            producer_epoch=0 if producer >= 0 else -1,
            base_sequence=sequence,
            transactional=producer == TRANSACTIONAL,
        )
        result = self.log.append(bytearray(batch), leader_epoch=0, now_ms=self.now)
        assert result.first_offset == self.end and not result.duplicate
        for i, (key, value) in enumerate(records):
            self.written[self.end + i] = (key, value, self.now)
        if producer == TRANSACTIONAL:
            self.open_txn += range(self.end, self.end + len(records))
        if producer >= 0:
            self.sequences[producer] += len(records)
        self.end += len(records)
        self.log.high_watermark = self.log.log_end_offset

    @precondition(lambda self: self.open_txn)
    @rule(commit=st.booleans())
    def end_transaction(self, commit: bool) -> None:
        marker = build_end_txn_marker(
            commit=commit, producer_id=TRANSACTIONAL, producer_epoch=0, coordinator_epoch=0, timestamp=self.now
        )
        result = self.log.append(bytearray(marker), leader_epoch=0, now_ms=self.now, origin=AppendOrigin.COORDINATOR)
        assert result.first_offset == self.end
        self.end += 1
        if not commit:
            self.aborted.update(self.open_txn)
        self.open_txn = []
        self.log.high_watermark = self.log.log_end_offset

    @rule(batches=st.lists(st.lists(st.tuples(keys, values), min_size=1, max_size=3), min_size=5, max_size=25))
    def append_many(self, batches: list[list[tuple[bytes, bytes | None]]]) -> None:
        for records in batches:
            self.append(records, 0, 10, -1)

    @rule()
    def roll(self) -> None:
        self.log.roll(self.now)

    @rule(wait_ms=st.integers(1, 1_000))
    def wait(self, wait_ms: int) -> None:
        self.now += wait_ms

    @rule(max_bytes=st.integers(50, 3_000))
    def clean_step(self, max_bytes: int) -> None:
        self.cleaner.work([self.log], self.now, max_bytes=max_bytes)

    @rule()
    def clean_whole_log(self) -> None:
        self.cleaner.clean_log(self.log, self.now)

    @rule(entries=st.sampled_from([2, 5, 1_000]))
    def new_cleaner(self, entries: int) -> None:
        self.cleaner.abort()
        self.cleaner = LogCleaner(max_map_entries=entries)

    @rule(stop_at=st.integers(1, 10))
    def crash_while_cleaning(self, stop_at: int) -> None:
        """Run a clean that dies at its ``stop_at``-th swap step (if it gets that far), then restart."""
        try:
            LogCleaner(fault=_stop_at(stop_at)).clean_log(self.log, self.now)
        except Crash:
            self._restart(clean=False)

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        self._restart(clean=clean)

    def _restart(self, *, clean: bool) -> None:
        if clean:
            self.cleaner.abort()
            self.log.close()
        # A dead process leaves its log and cleaner behind untouched: both are simply dropped.
        self.cleaner = LogCleaner()
        self.log = self._open(clean=clean)

    # ---- what must hold after every step -----------------------------------------------------------

    @invariant()
    def only_superseded_records_are_gone(self) -> None:
        found = self._read_all()
        offsets = [offset for offset, _key, _value in found]
        assert offsets == sorted(set(offsets))
        for offset, key, value in found:
            assert self.written[offset][:2] == (key, value), f"record at {offset} changed"
        assert self.log.log_end_offset == self.end
        present = set(offsets)
        newest: dict[bytes, int] = {}
        for offset in sorted(self.written):
            if offset not in self.aborted:
                newest[self.written[offset][0]] = offset
        for key, offset in newest.items():
            if offset in present:
                continue
            _key, value, appended_ms = self.written[offset]
            assert value is None, f"the newest value of {key!r} (offset {offset}) is gone"
            assert self.now - appended_ms >= CONFIG.delete_retention_ms, f"tombstone at {offset} went too early"
            older = [o for o, k, _v in found if k == key and o not in self.aborted]
            assert not older, f"an older value of deleted {key!r} came back"
        active = self.log.active_segment.base_offset
        assert all(offset in present for offset in self.written if offset >= active)

    @invariant()
    def offsets_read_back_from_the_right_batch(self) -> None:
        found = [offset for offset, _key, _value in self._read_all()]
        step = max(1, self.end // 8)
        for offset in range(0, self.end, step):
            header = next(iter_batches(self.log.read_bytes(offset, 1), partial_ok=True))[1]
            assert header.last_offset >= offset
            assert not [o for o in found if offset <= o < header.base_offset]

    def _read_all(self) -> list[tuple[int, bytes | None, bytes | None]]:
        blob = self.log.read_bytes(0, 1 << 30)
        out = []
        for pos, header in iter_batches(blob):
            assert batch_crc_ok(blob, pos, header)
            if not header.is_control:
                out += [(r.offset(header), r.key, r.value) for r in decode_records(blob, pos, header)]
        return out


def _stop_at(count: int) -> Callable[[str], None]:
    calls = 0

    def fault(name: str) -> None:
        nonlocal calls
        calls += 1
        if calls == count:
            raise Crash(name)

    return fault


class FileCleanerMachine(CleanerMachine):
    memory = False


TestCleanerInMemory = CleanerMachine.TestCase
TestCleanerInMemory.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestCleanerOnDisk = FileCleanerMachine.TestCase
TestCleanerOnDisk.settings = settings(
    max_examples=20, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
