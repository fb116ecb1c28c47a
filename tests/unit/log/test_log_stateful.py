"""Random appends, rolls, truncations, deletions and reopens never lose or reorder a record."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from logtest_batches import batch_values, make_batch

from kafkalike.log import LogConfig, LogDirectory, MemoryLogDirectory, PartitionLog

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=150, segment_index_bytes=64, file_delete_delay_ms=0)

values_st = st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=6)


class LogMachine(RuleBasedStateMachine):
    memory = False

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="kafkalike-log-")
        self.directory: LogDirectory | str = MemoryLogDirectory() if self.memory else str(Path(self.tmp) / "t-0")
        self.log = PartitionLog.open(self.directory, CONFIG, 0)
        self.batches: list[tuple[int, list[bytes]]] = []  # (base offset, values) as the model
        self.start = 0
        self.now = 0

    def teardown(self) -> None:
        self.log.release()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def end(self) -> int:
        return self.batches[-1][0] + len(self.batches[-1][1]) if self.batches else self.start

    def expected_from(self, offset: int) -> list[tuple[int, bytes]]:
        out = []
        for base, values in self.batches:
            if base + len(values) > offset:
                out += [(base + i, v) for i, v in enumerate(values)]
        return out

    @rule(batches=st.lists(values_st, min_size=1, max_size=3), epoch=st.integers(0, 3))
    def append(self, batches: list[list[bytes]], epoch: int) -> None:
        self.now += 10
        buf = bytearray()
        for values in batches:
            buf += make_batch(values, base_timestamp=self.now)
        result = self.log.append(buf, leader_epoch=epoch, now_ms=self.now)
        assert result.first_offset == self.end
        for values in batches:
            self.batches.append((self.end, values))
        assert result.last_offset == self.end - 1
        self.log.high_watermark = self.log.log_end_offset

    @rule()
    def roll(self) -> None:
        self.log.roll(self.now)

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
        else:
            self.log.release()  # as if the process died: nothing flushed, nothing snapshotted
        self.log = PartitionLog.open(
            self.directory, CONFIG, self.now, clean_shutdown=clean, log_start_offset=self.start
        )
        self.log.high_watermark = self.log.log_end_offset

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.batches) - 1))
        base = self.batches[index][0]
        if base < self.start:
            return
        self.log.truncate_to(base, now_ms=self.now)
        del self.batches[index:]

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        self.start = self.log.delete_records_before(offset, now_ms=self.now)
        assert self.start == offset
        self.log.apply_retention(self.now)

    @rule(data=st.data(), max_bytes=st.integers(0, 2000))
    def read_some(self, data: st.DataObject, max_bytes: int) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        got = batch_values(self.log.read_bytes(offset, max_bytes))
        expected = self.expected_from(offset)
        assert got == expected[: len(got)]
        if expected:
            assert got  # min-one-batch

    @rule(data=st.data())
    def read_below_limit(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        limit = data.draw(st.integers(self.start, self.end))
        got = batch_values(self.log.read_bytes(offset, 1 << 30, max_offset=limit))
        whole = [(b, v) for b, v in self.batches if b + len(v) <= limit]  # batches wholly below the limit
        expected = [(b + i, x) for b, v in whole if b + len(v) > offset for i, x in enumerate(v)]
        assert got == expected

    @invariant()
    def everything_readable(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start
        assert batch_values(self.log.read_bytes(self.start, 1 << 30)) == self.expected_from(self.start)


class MemoryLogMachine(LogMachine):
    memory = True


SETTINGS = settings(
    max_examples=int(os.environ.get("LOG_STATEFUL_EXAMPLES", "100")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestFileLog = LogMachine.TestCase
TestFileLog.settings = SETTINGS
TestMemoryLog = MemoryLogMachine.TestCase
TestMemoryLog.settings = SETTINGS
