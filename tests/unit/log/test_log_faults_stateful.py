"""Random appends, rolls, flushes, DeleteRecords, retention and crashes on a disk that fails at
random: every acknowledged record above the log start stays readable, in order, before and after a restart, and a refused append leaves nothing
behind (unless the log went offline because even undoing it failed: then the restart may keep
that never-acknowledged append, after everything acknowledged)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from logtest_batches import batch_values, make_batch

from kafkalike.log import FileLogDirectory, LogConfig, PartitionLog
from kafkalike.log.errors import KafkaStorageError
from kafkalike.testing.faulty_storage import DiskFaults

CONFIG = LogConfig(
    segment_bytes=700,
    index_interval_bytes=150,
    segment_index_bytes=64,
    file_delete_delay_ms=0,
    flush_interval_messages=4,
)
OPERATIONS = ["append", "flush", "open", "write_document", "sync", "rename", "delete", "truncate"]
ERRNOS = [errno.ENOSPC, errno.EIO, errno.EMFILE, errno.EROFS]
values_st = st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=6)


class FaultyLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="kafkalike-faults-")
        self.path = Path(self.tmp) / "t-0"
        self.faults = DiskFaults()
        self.log = self._open()
        self.acked: list[tuple[int, bytes]] = []
        self.offline = False
        self.now = 0

    def _open(self) -> PartitionLog:
        return PartitionLog.open(self.faults.wrap(FileLogDirectory(self.path)), CONFIG, 0)

    def teardown(self) -> None:
        self.log.release()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(values=values_st)
    def append(self, values: list[bytes]) -> None:
        self.now += 10
        end = self.log.log_end_offset
        try:
            result = self.log.append(make_batch(values, base_timestamp=self.now), leader_epoch=0, now_ms=self.now)
        except KafkaStorageError:
            self.offline = self.log.offline is not None
            if not self.offline:
                assert self.log.log_end_offset == end  # refused: nothing of it in the log
            return
        assert result.first_offset == end
        self.acked += [(end + i, v) for i, v in enumerate(values)]
        self.log.high_watermark = self.log.log_end_offset

    @rule(operation=st.sampled_from(OPERATIONS), err=st.sampled_from(ERRNOS), times=st.integers(1, 3))
    def break_disk(self, operation: str, err: int, times: int) -> None:
        self.faults.fail(operation, err, times=times)

    @rule()
    def mend_disk(self) -> None:
        self.faults.clear()

    @rule()
    def roll(self) -> None:
        with contextlib.suppress(OSError):  # a roll on its own is no append: the next append rolls again
            self.log.roll(self.now)

    @rule()
    def flush(self) -> None:
        with contextlib.suppress(OSError):  # the recovery point stays; the data is still there
            self.log.flush(self.now)

    @rule(data=st.data())
    def delete_records_and_retention(self, data: st.DataObject) -> None:
        start, end = self.log.log_start_offset, self.log.high_watermark
        offset = data.draw(st.integers(start, end))
        self.log.delete_records_before(offset, now_ms=self.now)  # a disk error here is reported, not raised
        with contextlib.suppress(OSError):  # renames or unlinks the disk refuses: the next round
            self.log.apply_retention(self.now)
        assert self.log.log_start_offset == max(start, offset)
        self.acked = [(o, v) for o, v in self.acked if o >= self.log.log_start_offset]

    @rule()
    def crash_and_restart(self) -> None:
        start = self.log.log_start_offset
        self.log.release()  # nothing flushed, nothing snapshotted
        self.faults.clear()
        self.log = PartitionLog.open(self.faults.wrap(FileLogDirectory(self.path)), CONFIG, 0, log_start_offset=start)
        found = self._readable()
        assert found[: len(self.acked)] == self.acked
        if not self.offline:
            assert found == self.acked  # no refused append came back
        # What an offline log left behind was never acknowledged, but it is in the log now.
        self.acked = found
        self.offline = False
        self.log.high_watermark = self.log.log_end_offset

    def _readable(self) -> list[tuple[int, bytes]]:
        start = self.log.log_start_offset
        return [(o, v) for o, v in batch_values(self.log.read_bytes(start, 1 << 30)) if o >= start]

    @invariant()
    def acknowledged_records_are_readable(self) -> None:
        found = self._readable()
        if self.offline:
            assert found[: len(self.acked)] == self.acked
        else:
            assert found == self.acked
            assert self.acked == [] or self.log.log_end_offset == self.acked[-1][0] + 1


TestFaultyLog = FaultyLogMachine.TestCase
TestFaultyLog.settings = settings(
    max_examples=int(os.environ.get("LOG_STATEFUL_EXAMPLES", "60")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
