"""A disk that fails on demand: the log layer's storage interface with errors injected.

``FaultyLogDirectory`` wraps any ``LogDirectory`` (file-backed or in memory) and its files, and
raises ``OSError(errno)`` from the operations a ``DiskFaults`` rule names, so each errno on each
write site is a deterministic test rather than a full disk waited for::

    faults = DiskFaults()
    logs = LogManager(path, wrap_directory=faults.wrap)
    rule = faults.fail("append", errno.ENOSPC, name=".log")   # every segment data append
    ...
    faults.remove(rule)                                         # the disk has room again

Operations: ``append``, ``flush``, ``truncate``, ``open``, ``read`` (files) and
``write_document``, ``rename``, ``delete``, ``sync`` (directories). A rule's ``name`` matches
when it is a substring of the file's name (``".log"``, ``".snapshot"``, ``"checkpoint"``);
``times`` limits how often it fires. A failing append writes nothing, as the storage interface
promises (the file implementation's own handling of short writes has its own tests). Syncs and
unlinks and renames collected for a worker thread (``DeferredSyncs``) fail at collection, on the
event loop, as ``flush``, ``sync``, ``delete`` and ``rename``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkalike.log.storage import BytesLike, LogDirectory, SegmentFile

FILE_OPERATIONS = frozenset({"append", "flush", "truncate", "open", "read"})
DIRECTORY_OPERATIONS = frozenset({"write_document", "rename", "delete", "sync"})


@dataclass
class FaultRule:
    operation: str
    errno: int
    name: str | None = None
    times: int | None = None
    directory: str | None = None
    fired: int = 0

    def matches(self, operation: str, name: str, directory: str) -> bool:
        if operation != self.operation or (self.name is not None and self.name not in name):
            return False
        if self.directory is not None and self.directory not in directory:
            return False
        return self.times is None or self.fired < self.times


@dataclass
class DiskFaults:
    """The rules in force, and a record of every injected failure (operation, file name)."""

    rules: list[FaultRule] = field(default_factory=list)
    injected: list[tuple[str, str]] = field(default_factory=list)
    # Called with (operation, name) after each injected failure: lets a test wait for one.
    on_inject: Callable[[str, str], None] | None = None

    def fail(
        self,
        operation: str,
        errno: int,
        *,
        name: str | None = None,
        times: int | None = None,
        directory: str | None = None,
    ) -> FaultRule:
        """A rule: ``operation`` on files whose name contains ``name``, in directories whose path
        contains ``directory`` (both: any when None), fails with ``errno``, at most ``times``."""
        if operation not in FILE_OPERATIONS | DIRECTORY_OPERATIONS:
            raise ValueError(f"unknown storage operation {operation!r}")
        rule = FaultRule(operation, errno, name, times, directory)
        self.rules.append(rule)
        return rule

    def remove(self, rule: FaultRule) -> None:
        self.rules.remove(rule)

    def clear(self) -> None:
        self.rules.clear()

    def check(self, operation: str, name: str, directory: str = "") -> None:
        for rule in self.rules:
            if rule.matches(operation, name, directory):
                rule.fired += 1
                self.injected.append((operation, name))
                if self.on_inject is not None:
                    self.on_inject(operation, name)
                raise OSError(rule.errno, os.strerror(rule.errno), name)

    def wrap(self, directory: LogDirectory) -> FaultyLogDirectory:
        return FaultyLogDirectory(directory, self)


class FaultySegmentFile(SegmentFile):
    def __init__(self, inner: SegmentFile, name: str, faults: DiskFaults, directory: str = "") -> None:
        self.inner = inner
        self.name = name
        self.directory = directory
        self._faults = faults

    @property
    def size(self) -> int:
        return self.inner.size

    @property
    def path(self) -> str | None:
        return self.inner.path

    def append(self, data: BytesLike) -> int:
        self._faults.check("append", self.name, self.directory)
        return self.inner.append(data)

    def read(self, position: int, length: int) -> bytes:
        self._faults.check("read", self.name, self.directory)
        return self.inner.read(position, length)

    def flush(self) -> None:
        self._faults.check("flush", self.name, self.directory)
        self.inner.flush()

    def truncate(self, size: int) -> None:
        self._faults.check("truncate", self.name, self.directory)
        self.inner.truncate(size)

    def fileno(self) -> int | None:
        return self.inner.fileno()

    @property
    def descriptor(self) -> int | None:
        return self.inner.descriptor

    def close(self) -> None:
        self.inner.close()

    def sync_descriptor(self) -> int | None:
        self._faults.check("flush", self.name, self.directory)  # a sync on a worker thread fails like ``flush``
        return self.inner.sync_descriptor()

    def last_modified_ms(self) -> int:
        return self.inner.last_modified_ms()


class FaultyLogDirectory(LogDirectory):
    def __init__(self, inner: LogDirectory, faults: DiskFaults) -> None:
        self.inner = inner
        self._faults = faults

    @property
    def path(self) -> str:
        return self.inner.path

    def list_names(self) -> list[str]:
        return self.inner.list_names()

    def exists(self, name: str) -> bool:
        return self.inner.exists(name)

    def open_file(self, name: str, *, create: bool) -> SegmentFile:
        self._faults.check("open", name, self.path)
        return FaultySegmentFile(self.inner.open_file(name, create=create), name, self._faults, self.path)

    def read_document(self, name: str) -> bytes | None:
        return self.inner.read_document(name)

    def write_document(self, name: str, data: bytes, *, durable: bool = True) -> None:
        self._faults.check("write_document", name, self.path)
        self.inner.write_document(name, data, durable=durable)

    def rename(self, old: str, new: str, file: SegmentFile | None = None) -> None:
        self._faults.check("rename", old, self.path)
        inner_file = file.inner if isinstance(file, FaultySegmentFile) else file
        self.inner.rename(old, new, inner_file)
        if isinstance(file, FaultySegmentFile):
            file.name = new

    def delete(self, name: str) -> None:
        self._faults.check("delete", name, self.path)
        self.inner.delete(name)

    def sync(self) -> None:
        self._faults.check("sync", self.inner.path, self.path)
        self.inner.sync()

    def sync_path(self) -> str | None:
        self._faults.check("sync", self.inner.path, self.path)
        return self.inner.sync_path()

    def sync_document(self, name: str) -> None:
        self._faults.check("flush", name, self.path)
        self.inner.sync_document(name)

    def document_descriptor(self, name: str) -> int | None:
        self._faults.check("flush", name, self.path)
        return self.inner.document_descriptor(name)

    def file_path(self, name: str) -> str | None:
        self._faults.check("delete", name, self.path)
        return self.inner.file_path(name)

    @property
    def on_disk(self) -> bool:
        return self.inner.on_disk

    def prepare_rename(self, old: str, new: str, file: SegmentFile | None = None) -> tuple[str, str] | None:
        self._faults.check("rename", old, self.path)
        inner_file = file.inner if isinstance(file, FaultySegmentFile) else file
        paths = self.inner.prepare_rename(old, new, inner_file)
        if isinstance(file, FaultySegmentFile):
            file.name = new
        return paths

    def remove_all(self) -> None:
        self.inner.remove_all()
