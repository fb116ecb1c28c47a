"""All partition logs of a broker, spread over one or more log dirs (Kafka's LogManager).

Each log dir holds, besides one ``<topic>-<partition>/`` directory per partition:

- ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (the high watermarks: Kafka's ReplicaManager keeps it) and (for
  compacted logs) ``cleaner-offset-checkpoint``: Kafka's checkpoint format with
  ``<topic> <partition> <offset>`` entries (see ``checkpoint.py``);
- ``.kafka_cleanshutdown`` (``{"version":0,"brokerEpoch":N}``), written after every log closed
  cleanly and removed at start-up, so its absence at the next start means "recover"; N is the
  broker epoch the broker held (``broker_epoch``, -1 outside a cluster), which it registers
  with again as its previous epoch (KIP-966: ``previous_broker_epoch()``);
- transiently ``<topic>-<partition>.<uuid hex>-delete/``, a partition being deleted.

With ``storage="memory"`` the same bookkeeping runs on in-memory directories and nothing touches
the disk (the checkpoints are simply kept in memory).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kafkalike.log.checkpoint import (
    CheckpointError,
    format_offset_checkpoint,
    parse_offset_checkpoint,
)
from kafkalike.log.cleaner import CLEANER_OFFSET_CHECKPOINT, DEFAULT_STEP_BYTES, LogCleaner
from kafkalike.log.config import LogConfig
from kafkalike.log.loader import TMP_SUFFIX
from kafkalike.log.partition_log import FlushTicket, PartitionLog
from kafkalike.log.storage import IMMEDIATE, DeferredSyncs, FileLogDirectory, LogDirectory, MemoryLogDirectory, Syncs
from kafkalike.log.storage_errors import describe, reporter

log = logging.getLogger("kafkalike.log.manager")
DirectoryWrapper = Callable[[LogDirectory], LogDirectory]
# Kafka's log.flush.offset.checkpoint.interval.ms default.
DEFAULT_CHECKPOINT_INTERVAL_MS = 60_000
# Kafka's replica.high.watermark.checkpoint.interval.ms default.
DEFAULT_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS = 5_000

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")

TopicPartition = tuple[str, int]


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    return match["topic"], int(match["partition"])


class _LogDir:
    """One log dir's checkpoints and whether it was shut down cleanly last time."""

    def __init__(self, path: Path, memory: bool, wrap: DirectoryWrapper | None = None) -> None:
        self.path = path
        self.memory = memory
        self._wrap = wrap
        self.clean_shutdown = memory
        self.shutdown_broker_epoch: int | None = None  # as the clean shutdown file had it
        self.recovery_points: dict[TopicPartition, int] = {}
        self.log_start_offsets: dict[TopicPartition, int] = {}
        self.cleaner_offsets: dict[TopicPartition, int] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}
        self._written: tuple[dict[TopicPartition, int], ...] = ({}, {}, {}, {})
        if memory:
            return
        path.mkdir(parents=True, exist_ok=True)
        marker = path / CLEAN_SHUTDOWN_FILE
        self.clean_shutdown = marker.exists()
        if self.clean_shutdown:
            self.shutdown_broker_epoch = _read_broker_epoch(marker)
        self.recovery_points = self._read(RECOVERY_POINT_CHECKPOINT)
        self.log_start_offsets = self._read(LOG_START_OFFSET_CHECKPOINT)
        self.cleaner_offsets = self._read(CLEANER_OFFSET_CHECKPOINT)
        self.high_watermarks = self._read(HIGH_WATERMARK_CHECKPOINT)
        self._written = (
            dict(self.recovery_points),
            dict(self.log_start_offsets),
            dict(self.cleaner_offsets),
            dict(self.high_watermarks),
        )
        # From now on a crash must be seen as unclean.
        marker.unlink(missing_ok=True)
        for entry in path.iterdir():
            if entry.is_dir() and entry.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.name.endswith(TMP_SUFFIX) and entry.is_file():
                entry.unlink(missing_ok=True)  # a checkpoint write a crash interrupted

    def _read(self, name: str) -> dict[TopicPartition, int]:
        """A checkpoint's offsets; none when it is missing or does not parse (then each log starts
        without one: recovered from its start, its high watermark at its log start)."""
        try:
            return parse_offset_checkpoint((self.path / name).read_bytes())
        except FileNotFoundError:
            return {}
        except CheckpointError as exc:
            log.warning("%s in %s does not parse, read as empty: %s", name, self.path, exc)
            return {}

    def _documents(self) -> LogDirectory:
        directory: LogDirectory = FileLogDirectory(self.path)
        return directory if self._wrap is None else self._wrap(directory)

    def pending_checkpoints(
        self, force: bool = False, *, recovery_points: bool = True, high_watermarks: bool = True
    ) -> list[tuple[int, str, bytes]]:
        """(slot, file name, content) of each checkpoint file whose offsets changed since it was
        last written (every one but the cleaner's with ``force``), leaving out the recovery points
        or the high watermarks when told to (not due); ``checkpoint_written(slot, data)`` records
        one as written."""
        if self.memory:
            return []
        current = (self.recovery_points, self.log_start_offsets, self.cleaner_offsets, self.high_watermarks)
        names = (
            RECOVERY_POINT_CHECKPOINT,
            LOG_START_OFFSET_CHECKPOINT,
            CLEANER_OFFSET_CHECKPOINT,
            HIGH_WATERMARK_CHECKPOINT,
        )
        wanted = {0: recovery_points or force, 1: True, 2: True, 3: high_watermarks or force}
        return [
            (slot, names[slot], format_offset_checkpoint(current[slot]))
            for slot in range(4)
            if wanted[slot] and (current[slot] != self._written[slot] or (force and slot != 2))
        ]

    def write_document(self, name: str, data: bytes) -> None:
        self._documents().write_document(name, data)

    def write_checkpoints(self, force: bool = False) -> None:
        """Rewrite the checkpoint files when an offset changed (they are tiny, but fsynced).

        Each file is written on its own: on OSError the ones before it count as written and the
        failed one is tried again next time (its old content is still in place)."""
        pending = self.pending_checkpoints(force)
        directory = self._documents() if pending else None
        for slot, name, data in pending:
            assert directory is not None
            directory.write_document(name, data)
            self.checkpoint_written(slot, data)

    def checkpoint_written(self, slot: int, data: bytes) -> None:
        written = list(self._written)
        written[slot] = parse_offset_checkpoint(data)
        self._written = tuple(written)

    def mark_clean_shutdown(self, broker_epoch: int = -1) -> None:
        if not self.memory:
            content = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":"))
            self._documents().write_document(CLEAN_SHUTDOWN_FILE, content.encode())


def _read_broker_epoch(marker: Path) -> int | None:
    """The epoch in a clean shutdown file; None when it cannot be read (Kafka then registers as if
    the shutdown were unclean)."""
    try:
        epoch = json.loads(marker.read_bytes())["brokerEpoch"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


class PreparedFlush(NamedTuple):
    log: PartitionLog
    ticket: FlushTicket
    syncs: DeferredSyncs


class PendingCheckpoint(NamedTuple):
    log_dir: _LogDir
    slot: int
    name: str
    data: bytes


def run_flushes(prepared: list[PreparedFlush]) -> list[OSError | None]:
    """The blocking part of ``prepare_due_flushes``' flushes (thread-safe: syscalls only)."""
    errors: list[OSError | None] = []
    for flush in prepared:
        try:
            flush.syncs.run()
            errors.append(None)
        except OSError as exc:
            errors.append(exc)
    return errors


def write_checkpoints(pending: list[PendingCheckpoint]) -> list[OSError | None]:
    """Write ``prepare_checkpoints``' files, each durably (thread-safe: file I/O only)."""
    errors: list[OSError | None] = []
    for checkpoint in pending:
        try:
            checkpoint.log_dir.write_document(checkpoint.name, checkpoint.data)
            errors.append(None)
        except OSError as exc:
            errors.append(exc)
    return errors


@dataclass
class NewPartition:
    """A partition about to get its log: where it goes and what the log dir remembers of it.

    Made by ``LogManager.plan_new`` on the thread that owns the manager; ``open_new`` then
    creates the directory and files on any thread; ``adopt`` (owning thread again) registers
    the log. Only ``adopt`` and ``unplan`` change the manager's tables.
    """

    tp: TopicPartition
    home: _LogDir
    directory: LogDirectory | None  # the in-memory directory; None: a file directory, made by open_new
    recovery_point: int | None = None
    log_start_offset: int | None = None
    cleaner_offset: int | None = None
    high_watermark: int = 0  # none checkpointed: from the log start, as Kafka's Partition.createLog
    wrap: DirectoryWrapper | None = None  # applied to the file directory open_new makes

    @property
    def path(self) -> Path:
        return self.home.path / partition_dir_name(*self.tp)


class LogManager:
    def __init__(
        self,
        log_dirs: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
        *,
        storage: str = "file",
        wrap_directory: DirectoryWrapper | None = None,
        checkpoint_interval_ms: int = DEFAULT_CHECKPOINT_INTERVAL_MS,
        high_watermark_checkpoint_interval_ms: int = DEFAULT_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS,
    ):
        """``wrap_directory`` sees every directory the logs and checkpoints are written through
        (a fault-injecting disk in tests); ``checkpoint_interval_ms`` is how often ``flush_due``
        rewrites the recovery-point and log-start checkpoints (Kafka's
        log.flush.offset.checkpoint.interval.ms), ``high_watermark_checkpoint_interval_ms`` how
        often the high watermarks' (Kafka's replica.high.watermark.checkpoint.interval.ms)."""
        if storage not in ("file", "memory"):
            raise ValueError(f"storage must be 'file' or 'memory', not {storage!r}")
        paths = [log_dirs] if isinstance(log_dirs, str | os.PathLike) else list(log_dirs)
        if not paths:
            raise ValueError("at least one log dir is needed")
        self.memory = storage == "memory"
        self._wrap = wrap_directory
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._next_checkpoint_ms: int | None = None
        self.high_watermark_checkpoint_interval_ms = high_watermark_checkpoint_interval_ms
        self._next_high_watermark_checkpoint_ms: int | None = None
        # What the last ``checkpoint_due`` found due, for the ``prepare_checkpoints`` it led to.
        self._high_watermarks_due = False
        self._only_high_watermarks_due = False
        self._dirs = [_LogDir(Path(p), self.memory, wrap_directory) for p in paths]
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._homes: dict[TopicPartition, _LogDir] = {}
        self._memory_dirs: dict[TopicPartition, MemoryLogDirectory] = {}
        self._found: dict[TopicPartition, _LogDir] | None = None
        # The broker epoch written into the clean shutdown files at close (set once registered).
        self.broker_epoch = -1

    def previous_broker_epoch(self) -> int:
        """The broker epoch every log dir's clean shutdown file agrees on, else -1 (Kafka's
        readBrokerEpochFromCleanShutdownFiles: one dir without a readable epoch, or two
        different, and the shutdown counts as unclean)."""
        epochs = {d.shutdown_broker_epoch for d in self._dirs}
        if self.memory or len(epochs) != 1 or None in epochs:
            return -1
        (epoch,) = epochs
        return -1 if epoch is None else epoch

    # ---- finding and opening ------------------------------------------------------------------

    def _existing(self) -> dict[TopicPartition, _LogDir]:
        """Partition directories present on disk (scanned once; kept current by create/delete)."""
        if self._found is None:
            self._found = self._scan()
        return self._found

    def _scan(self) -> dict[TopicPartition, _LogDir]:
        found: dict[TopicPartition, _LogDir] = {}
        if self.memory:
            return {tp: self._dirs[0] for tp in self._memory_dirs}
        for log_dir in self._dirs:
            for entry in sorted(log_dir.path.iterdir()):
                tp = parse_partition_dir(entry.name)
                if tp is not None and entry.is_dir():
                    found.setdefault(tp, log_dir)
        return found

    def _directory(self, tp: TopicPartition, home: _LogDir) -> LogDirectory:
        directory: LogDirectory
        if self.memory:
            directory = self._memory_dirs.setdefault(tp, MemoryLogDirectory(partition_dir_name(*tp)))
        else:
            directory = FileLogDirectory(home.path / partition_dir_name(*tp))
        return directory if self._wrap is None else self._wrap(directory)

    def _choose_home(self) -> _LogDir:
        """The log dir with the fewest partitions, as Kafka places new partitions."""
        counts = {id(d): 0 for d in self._dirs}
        for home in self._existing().values():
            counts[id(home)] += 1
        return min(self._dirs, key=lambda d: counts[id(d)])

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self, topic: str, partition: int, config: LogConfig, now_ms: int, topic_id: uuid.UUID | None = None
    ) -> PartitionLog:
        """The open log for the partition, opening (and recovering) or creating it first.

        An already open log takes ``config`` as its new configuration.
        """
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is not None:
            log.config = config
            return log
        home = self._existing().get(tp) or self._choose_home()
        log = PartitionLog.open(
            self._directory(tp, home),
            config,
            now_ms,
            topic_id,
            clean_shutdown=home.clean_shutdown,
            recovery_point=home.recovery_points.get(tp),
            log_start_offset=home.log_start_offsets.get(tp),
            high_watermark=home.high_watermarks.get(tp, 0),
        )
        log.cleaner_checkpoint = home.cleaner_offsets.get(tp)
        self._logs[tp] = log
        self._homes[tp] = home
        self._existing()[tp] = home
        self._record_offsets(tp)
        return log

    def plan_new(self, tps: Iterable[TopicPartition]) -> list[NewPartition]:
        """Place partitions that have no open log yet: each goes to the log dir with the fewest
        partitions (counted once, not once per partition), or to the one already holding its
        directory. Reserves the places; give them back with ``unplan`` if they are not adopted."""
        counts = {id(d): 0 for d in self._dirs}
        for placed in self._existing().values():
            counts[id(placed)] += 1
        planned = []
        for tp in tps:
            if tp in self._logs:
                raise ValueError(f"partition {tp} already has a log")
            found = self._existing().get(tp)
            home = found or min(self._dirs, key=lambda d: counts[id(d)])
            counts[id(home)] += 1
            self._existing()[tp] = home
            new = NewPartition(tp, home, self._directory(tp, home) if self.memory else None, wrap=self._wrap)
            if found is not None:  # a directory left from before: its offsets still stand
                new.recovery_point = home.recovery_points.get(tp)
                new.log_start_offset = home.log_start_offsets.get(tp)
                new.cleaner_offset = home.cleaner_offsets.get(tp)
                new.high_watermark = home.high_watermarks.get(tp, 0)
            planned.append(new)
        return planned

    @staticmethod
    def open_new(new: NewPartition, config: LogConfig, now_ms: int, topic_id: uuid.UUID | None) -> PartitionLog:
        """Create (or recover) the planned partition's directory and files. Safe on a worker
        thread: it touches only that partition's own directory."""
        directory = new.directory
        if directory is None:
            directory = FileLogDirectory(new.path)
            if new.wrap is not None:
                directory = new.wrap(directory)
        log = PartitionLog.open(
            directory,
            config,
            now_ms,
            topic_id,
            clean_shutdown=new.home.clean_shutdown,
            recovery_point=new.recovery_point,
            log_start_offset=new.log_start_offset,
            high_watermark=new.high_watermark,
        )
        log.cleaner_checkpoint = new.cleaner_offset
        return log

    def adopt(self, new: NewPartition, log: PartitionLog) -> None:
        """Register a log ``open_new`` made (on the owning thread)."""
        self._logs[new.tp] = log
        self._homes[new.tp] = new.home
        self._existing()[new.tp] = new.home
        self._record_offsets(new.tp)

    def unplan(self, new: NewPartition) -> None:
        """Give back a planned place whose log was never adopted (its directory, if made, goes
        with ``remove_directory``)."""
        if new.tp not in self._logs:
            self._existing().pop(new.tp, None)
            self._memory_dirs.pop(new.tp, None)

    def load_all(self, now_ms: int, config_for: Callable[[str, int], LogConfig] | None = None) -> list[PartitionLog]:
        """Open every partition directory found in the log dirs (at start-up)."""
        for topic, partition in sorted(self._existing()):
            config = config_for(topic, partition) if config_for is not None else LogConfig()
            self.get_or_create(topic, partition, config, now_ms)
        return list(self._logs.values())

    def partitions(self) -> list[TopicPartition]:
        return sorted(self._logs)

    # ---- removal ------------------------------------------------------------------------------

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close the partition's log and remove its directory (renamed to ``*-delete`` first, so
        a crash half-way leaves a name start-up knows to finish deleting). False if absent."""
        tp = (topic, partition)
        home = self._homes.pop(tp, None) or self._existing().get(tp)
        self._existing().pop(tp, None)
        log = self._logs.pop(tp, None)
        if home is None and log is None:
            return False
        if log is not None:
            log.release()
        if self.memory:
            memory_dir = self._memory_dirs.pop(tp, None)
            if memory_dir is not None:
                memory_dir.remove_all()
        elif home is not None:
            source = home.path / partition_dir_name(topic, partition)
            target = home.path / f"{partition_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            with contextlib.suppress(FileNotFoundError):
                source.rename(target)
                shutil.rmtree(target, ignore_errors=True)
        for log_dir in self._dirs:
            log_dir.recovery_points.pop(tp, None)
            log_dir.log_start_offsets.pop(tp, None)
            log_dir.cleaner_offsets.pop(tp, None)
            log_dir.high_watermarks.pop(tp, None)
            with contextlib.suppress(OSError):  # the next periodic checkpoint tries again
                log_dir.write_checkpoints()
        return True

    def detach_partition(self, topic: str, partition: int) -> Path | None:
        """Close the partition's log and forget it, leaving its directory to ``remove_directory``
        (on a worker thread); returns that directory, or None when there is nothing on disk.
        The checkpoints drop the partition at the next periodic checkpoint."""
        tp = (topic, partition)
        home = self._homes.pop(tp, None) or self._existing().get(tp)
        self._existing().pop(tp, None)
        log = self._logs.pop(tp, None)
        if log is not None:
            log.release()
        for log_dir in self._dirs:
            log_dir.recovery_points.pop(tp, None)
            log_dir.log_start_offsets.pop(tp, None)
            log_dir.cleaner_offsets.pop(tp, None)
            log_dir.high_watermarks.pop(tp, None)
        if self.memory:
            memory_dir = self._memory_dirs.pop(tp, None)
            if memory_dir is not None:
                memory_dir.remove_all()
            return None
        return None if home is None else home.path / partition_dir_name(topic, partition)

    @staticmethod
    def rename_for_removal(path: Path) -> Path | None:
        """Rename a detached partition directory to ``*-delete`` (a name start-up finishes deleting,
        should a crash come first) and return the new name; None if it was already gone. Safe on
        a worker thread. Once it returns, a new partition of the same name can be created."""
        target = path.with_name(f"{path.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            path.rename(target)
        except FileNotFoundError:
            return None
        return target

    @staticmethod
    def remove_directory(path: Path) -> None:
        """Delete a directory and everything in it; safe on a worker thread."""
        shutil.rmtree(path, ignore_errors=True)

    def remove_orphans(self, keep: set[TopicPartition]) -> list[TopicPartition]:
        """Delete every partition directory not in ``keep`` (topics deleted while we were down)."""
        doomed = sorted((set(self._existing()) | set(self._logs)) - keep)
        for topic, partition in doomed:
            self.delete_partition(topic, partition)
        return doomed

    # ---- periodic work ------------------------------------------------------------------------
    #
    # These run from the broker's background tasks, where an exception would take the broker
    # down: a disk error is reported (rate-limited) and the work is tried again next time.

    def _record_offsets(self, tp: TopicPartition) -> None:
        log, home = self._logs[tp], self._homes[tp]
        home.recovery_points[tp] = log.recovery_point
        home.log_start_offsets[tp] = log.log_start_offset
        home.high_watermarks[tp] = log.high_watermark
        if log.cleaner_checkpoint is not None:
            home.cleaner_offsets[tp] = log.cleaner_checkpoint

    def record_offsets(self) -> None:
        """Copy every log's recovery point, log start, high watermark and cleaner offset into its
        log dir's checkpoint state."""
        for tp in self._logs:
            self._record_offsets(tp)

    def _checkpoint(self, now_ms: int) -> None:
        pending = self.prepare_checkpoints()
        self.complete_checkpoints(pending, write_checkpoints(pending), now_ms)

    def checkpoint_due(self, now_ms: int) -> bool:
        """True once every ``checkpoint_interval_ms`` and once every
        ``high_watermark_checkpoint_interval_ms`` (the first intervals counted from the first
        call). The ``prepare_checkpoints`` that follows writes the high watermarks only when
        their interval is what came due, and the recovery points not when only that one did."""
        if self._next_checkpoint_ms is None:
            self._next_checkpoint_ms = now_ms + self.checkpoint_interval_ms
        if self._next_high_watermark_checkpoint_ms is None:
            self._next_high_watermark_checkpoint_ms = now_ms + self.high_watermark_checkpoint_interval_ms
        offsets_due = now_ms >= self._next_checkpoint_ms
        if offsets_due:
            self._next_checkpoint_ms = now_ms + self.checkpoint_interval_ms
        high_watermarks_due = now_ms >= self._next_high_watermark_checkpoint_ms
        if high_watermarks_due:
            self._next_high_watermark_checkpoint_ms = now_ms + self.high_watermark_checkpoint_interval_ms
        self._high_watermarks_due = self._high_watermarks_due or high_watermarks_due
        self._only_high_watermarks_due = high_watermarks_due and not offsets_due
        return offsets_due or high_watermarks_due

    # Each periodic job comes in three steps, so the broker can run the middle one, the blocking
    # disk calls, on a worker thread: prepare (on the event loop: decide, write what is small,
    # collect the syncs), run (anywhere: only syscalls, no log state), complete (on the event
    # loop: apply what succeeded, report what failed). The one-call forms below do all three.

    def prepare_due_flushes(self, now_ms: int) -> list[PreparedFlush]:
        """The flushes due now (flush.ms, rolled segments), their fsyncs collected."""
        prepared = []
        for plog in self._logs.values():
            target = plog.due_flush(now_ms)
            if target is None:
                continue
            syncs = DeferredSyncs()
            try:
                ticket = plog.prepare_flush(syncs, target)
            except OSError as exc:
                syncs.discard()
                reporter.report("flush of", plog.directory.path, exc, now_ms)
                continue
            prepared.append(PreparedFlush(plog, ticket, syncs))
        return prepared

    def complete_flushes(self, prepared: list[PreparedFlush], errors: list[OSError | None], now_ms: int) -> None:
        for flush, error in zip(prepared, errors, strict=True):
            if error is None:
                flush.log.complete_flush(flush.ticket, now_ms)
            else:
                reporter.report("flush of", flush.log.directory.path, error, now_ms)

    def prepare_checkpoints(self, force: bool = False) -> list[PendingCheckpoint]:
        """The checkpoint files whose offsets changed since they were written, with their content:
        the high watermarks' only when ``checkpoint_due`` found their interval due (or ``force``),
        the recovery points' not when that was all it found due."""
        high_watermarks, recovery_points = self._high_watermarks_due, not self._only_high_watermarks_due
        self._high_watermarks_due = self._only_high_watermarks_due = False
        self.record_offsets()
        return [
            PendingCheckpoint(log_dir, slot, name, data)
            for log_dir in self._dirs
            for slot, name, data in log_dir.pending_checkpoints(
                force, recovery_points=recovery_points, high_watermarks=high_watermarks
            )
        ]

    def complete_checkpoints(self, pending: list[PendingCheckpoint], errors: list[OSError | None], now_ms: int) -> None:
        for checkpoint, error in zip(pending, errors, strict=True):
            if error is None:
                checkpoint.log_dir.checkpoint_written(checkpoint.slot, checkpoint.data)
            else:  # the old file is still in place; the next round writes it again
                reporter.report("checkpoint write in", str(checkpoint.log_dir.path), error, now_ms)

    def flush_due(self, now_ms: int) -> None:
        """Time-based flushes (flush.ms) and flushes of rolled segments; the checkpoints on their interval."""
        prepared = self.prepare_due_flushes(now_ms)
        self.complete_flushes(prepared, run_flushes(prepared), now_ms)
        if self.checkpoint_due(now_ms):
            self._checkpoint(now_ms)

    def flush_all(self, now_ms: int | None = None) -> None:
        for plog in self._logs.values():
            plog.flush(now_ms)
        self._checkpoint(now_ms or 0)

    def run_retention(self, now_ms: int, syncs: Syncs = IMMEDIATE) -> int:
        """Retention for every log; returns how many segments were deleted. ``syncs`` may defer
        the unlinks of deleted files; the log start checkpoint is then the caller's to write
        (``prepare_checkpoints``) once they ran, else it is written here."""
        deleted = 0
        for plog in self._logs.values():
            try:
                deleted += plog.apply_retention(now_ms, syncs)
            except OSError as exc:
                reporter.report("retention of", plog.directory.path, exc, now_ms)
        if syncs is IMMEDIATE:
            self._checkpoint(now_ms)
        return deleted

    def run_cleaner(
        self, cleaner: LogCleaner, now_ms: int, *, max_bytes: int = DEFAULT_STEP_BYTES, checkpoint: bool = True
    ) -> bool:
        """One bounded step of log compaction over the open logs, then checkpoint what moved
        (unless ``checkpoint`` is False: the caller writes them, see ``prepare_checkpoints``).

        True while there is more to do (call again after letting other work run); False when no
        compacted log needs cleaning (wait log.cleaner.backoff.ms, 15 s in Kafka, before the next)
        and after a disk error (the step is abandoned; the next one starts it again).
        """
        try:
            more = cleaner.work(self._logs.values(), now_ms, max_bytes=max_bytes)
        except OSError as exc:
            reporter.report("log cleaning in", str(self._dirs[0].path), exc, now_ms)
            if cleaner.cleaning is not None:
                cleaner.abort(cleaner.cleaning)
            more = False
        if checkpoint:
            self._checkpoint(now_ms)
        return more

    def delete_records(
        self, topic: str, partition: int, offset: int, now_ms: int, *, checkpoint: bool = True, syncs: Syncs = IMMEDIATE
    ) -> int:
        """DeleteRecords, with the new log start offset checkpointed before returning (if the disk
        takes it), unless ``checkpoint`` is False: the caller writes it (``prepare_checkpoints``).
        ``syncs`` may defer the renames and unlinks of the files (``apply_retention``)."""
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is None:
            raise KeyError(tp)
        start = log.delete_records_before(offset, now_ms=now_ms, syncs=syncs)
        if checkpoint:
            self._checkpoint(now_ms)
        return start

    def close_all(self) -> None:
        """Close every log, checkpoint, and mark each log dir as cleanly shut down.

        A log that cannot be closed for a disk error leaves its log dir unmarked, so the next
        start recovers it; the others still close cleanly."""
        failed: set[int] = set()
        for tp, plog in self._logs.items():
            try:
                plog.close()
            except OSError as exc:
                log.error("closing %s-%d failed, it will be recovered at the next start: %s", *tp, describe(exc))
                failed.add(id(self._homes[tp]))
        self.record_offsets()
        for log_dir in self._dirs:
            try:
                log_dir.write_checkpoints(force=True)
                if id(log_dir) not in failed:
                    log_dir.mark_clean_shutdown(self.broker_epoch)
            except OSError as exc:
                log.error("checkpoints of %s not written at shutdown: %s", log_dir.path, describe(exc))
        self._logs.clear()
        self._homes.clear()
