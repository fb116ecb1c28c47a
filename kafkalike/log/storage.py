"""Every byte the log layer keeps goes through the two small classes here.

``SegmentFile`` is an append-mostly byte file (segment data, index files); ``LogDirectory`` is the
partition directory holding them plus a few small whole-file documents (checkpoints, snapshots).
The file-backed pair is what a broker uses; the memory pair lets a broker run without a disk (tests,
ephemeral topics) with the same code above it. Nothing else in kafkalike.log touches ``os`` for I/O.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Sequence

from kafkalike.protocol.wire import ExternalBytes

BytesLike = bytes | bytearray | memoryview


class SegmentFile(ABC):
    """A byte file that grows by appending and shrinks only by truncation."""

    @property
    @abstractmethod
    def size(self) -> int: ...

    @property
    @abstractmethod
    def path(self) -> str | None:
        """Where the bytes live on disk, or None when they live in memory."""

    @abstractmethod
    def append(self, data: BytesLike) -> int:
        """Write ``data`` at the end; return the position it starts at.

        All or nothing: on OSError ``size`` is unchanged and no read returns any byte of ``data``
        (a file cuts what a failed write left behind, at once or before its next append)."""

    @abstractmethod
    def read(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``position`` (fewer only at the end of the file)."""

    @abstractmethod
    def flush(self) -> None:
        """Make everything appended so far durable."""

    @abstractmethod
    def truncate(self, size: int) -> None: ...

    @abstractmethod
    def fileno(self) -> int | None:
        """An OS file descriptor for ``os.sendfile``, or None when there is no file."""

    @property
    def descriptor(self) -> int | None:
        """The descriptor already open on the file, or None (closed, or no file): unlike
        ``fileno`` this never opens one, so a closed file is never silently reopened."""
        return None

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def last_modified_ms(self) -> int:
        """Wall-clock mtime; used only to age segments whose batches carry no timestamps."""

    def sync_descriptor(self) -> int | None:
        """A new descriptor for ``flush``'s fsync on a worker thread, which closes it; None when
        there is nothing to sync (no file, or none open, as ``flush`` does nothing then). Being
        a descriptor of its own, it keeps the file alive however the log closes or deletes it
        meanwhile."""
        return None


class FileSegmentFile(SegmentFile):
    """A real file, opened lazily so a log with thousands of cold segments holds few descriptors.

    Writes use ``os.pwrite`` at the tracked size and reads ``os.pread``, so there is no shared file
    position and a read never disturbs an append.
    """

    def __init__(self, path: str, *, create: bool) -> None:
        self._path = path
        self._fd: int | None = None
        self._torn_end: int | None = None  # end of a failed append's bytes not yet cut off
        if create:
            self._open()
            self._size = os.fstat(self._require_fd()).st_size
        else:
            self._size = os.stat(path).st_size

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        return self._fd

    def _require_fd(self) -> int:
        return self._open()

    @property
    def size(self) -> int:
        return self._size

    @property
    def path(self) -> str:
        return self._path

    def renamed(self, new_path: str) -> None:
        """Record that the file now lives at ``new_path`` (the descriptor stays valid)."""
        self._path = new_path

    def append(self, data: BytesLike) -> int:
        fd = self._require_fd()
        start = self._size
        if self._torn_end is not None:
            self._cut_torn_tail(fd)
        size = len(data)
        written = 0
        try:
            if size:
                written = os.pwrite(fd, data, start)
            if written < size:
                # pwrite on a regular file writes everything short of an error; loop for the odd short write.
                view = memoryview(data)
                while written < size:
                    written += os.pwrite(fd, view[written:], start + written)
        except OSError:
            # ENOSPC after a short write leaves part of ``data`` on disk: cut it off now, or at the
            # next append or truncate if even that fails. ``size`` never counts it, so no read sees it.
            if written:
                self._torn_end = start + written
                with contextlib.suppress(OSError):
                    self._cut_torn_tail(fd)
            raise
        self._size = start + written
        return start

    def _cut_torn_tail(self, fd: int) -> None:
        os.ftruncate(fd, self._size)
        self._torn_end = None

    def read(self, position: int, length: int) -> bytes:
        if length <= 0 or position >= self._size:
            return b""
        return os.pread(self._require_fd(), min(length, self._size - position), position)

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def truncate(self, size: int) -> None:
        if size < self._size or (self._torn_end is not None and size <= self._size):
            os.ftruncate(self._require_fd(), size)
            self._size = size
            self._torn_end = None

    def fileno(self) -> int:
        return self._require_fd()

    @property
    def descriptor(self) -> int | None:
        return self._fd

    def sync_descriptor(self) -> int | None:
        return None if self._fd is None else os.dup(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def last_modified_ms(self) -> int:
        return os.stat(self._path).st_mtime_ns // 1_000_000


class FileSlices(ExternalBytes):
    """Byte ranges of segment files, in order, as a response's records field: a server sends them
    with ``os.sendfile`` where a range's file has a ``descriptor``, else with ``to_bytes``.
    ``ranges`` holds (file, position, length) triples (``FileRange`` is one)."""

    __slots__ = ("ranges", "size")

    def __init__(self, ranges: Sequence[tuple[SegmentFile, int, int]]) -> None:
        self.ranges = ranges
        self.size = sum(r[2] for r in ranges)

    def __len__(self) -> int:
        return self.size

    def to_bytes(self) -> bytes:
        data = b"".join(file.read(position, length) for file, position, length in self.ranges)
        if len(data) != self.size:
            raise OSError(f"segment data shrank while being read: {len(data)} of {self.size} bytes")
        return data


class MemorySegmentFile(SegmentFile):
    """A ``bytearray`` standing in for a file; ``flush`` has nothing to do."""

    def __init__(self, name: str, data: bytes = b"", now_ms: int = 0) -> None:
        self.name = name
        self._data = bytearray(data)
        self._mtime_ms = now_ms

    @property
    def size(self) -> int:
        return len(self._data)

    @property
    def path(self) -> None:
        return None

    def append(self, data: BytesLike) -> int:
        start = len(self._data)
        self._data += data
        return start

    def read(self, position: int, length: int) -> bytes:
        return bytes(self._data[position : position + max(length, 0)])

    def flush(self) -> None:
        pass

    def truncate(self, size: int) -> None:
        del self._data[size:]

    def fileno(self) -> None:
        return None

    def close(self) -> None:
        pass

    def last_modified_ms(self) -> int:
        return self._mtime_ms


class LogDirectory(ABC):
    """One partition directory: named segment files plus small documents replaced atomically."""

    @property
    @abstractmethod
    def path(self) -> str: ...

    @abstractmethod
    def list_names(self) -> list[str]: ...

    @abstractmethod
    def exists(self, name: str) -> bool: ...

    @abstractmethod
    def open_file(self, name: str, *, create: bool) -> SegmentFile: ...

    @abstractmethod
    def read_document(self, name: str) -> bytes | None:
        """A small file's whole content, or None when it does not exist."""

    @abstractmethod
    def write_document(self, name: str, data: bytes, *, durable: bool = True) -> None:
        """Replace a small file atomically (temp file, rename) and, when ``durable``, durably
        (fsync the file before the rename and the directory after it). Without ``durable`` a
        crash may leave the file empty or torn: only for files whose readers drop a bad one
        (producer-state snapshots). On OSError the old file is still in place."""

    @abstractmethod
    def rename(self, old: str, new: str, file: SegmentFile | None = None) -> None:
        """Rename ``old`` to ``new``; ``file`` is the open handle on it, if any, which stays usable."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Remove a file if it exists."""

    @abstractmethod
    def sync(self) -> None:
        """Make creations and renames in the directory durable."""

    def sync_path(self) -> str | None:
        """The directory to fsync on a worker thread instead of ``sync``; None when ``sync``
        has nothing to do (no disk behind it)."""
        return None

    def sync_document(self, name: str) -> None:  # noqa: B027 (nothing to do without a disk)
        """Make a document written without ``durable`` durable (its content; ``sync`` for its name)."""

    def document_descriptor(self, name: str) -> int | None:
        """A new read-only descriptor on a document, for its fsync on a worker thread (which
        closes it); None when it does not exist or there is no disk behind it."""
        return None

    def file_path(self, name: str) -> str | None:
        """Where ``name`` lives on disk, for an unlink on a worker thread; None without a disk."""
        return None

    @property
    def on_disk(self) -> bool:
        """Whether there are files behind it (work for a worker thread), not memory."""
        return False

    def prepare_rename(self, old: str, new: str, file: SegmentFile | None = None) -> tuple[str, str] | None:
        """A ``rename`` to run on a worker thread: record at once that ``file`` (the open handle
        on ``old``, if any) now lives at ``new``, and return the two paths for the thread's
        ``os.replace``; without a disk, rename here and return None."""
        self.rename(old, new, file)
        return None

    @abstractmethod
    def remove_all(self) -> None:
        """Delete the directory and everything in it."""


_temp_names = itertools.count()


def sync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Syncs:
    """Where a flush sends its fsyncs: done at once by default; see ``DeferredSyncs``."""

    def file(self, file: SegmentFile) -> None:
        file.flush()

    def directory(self, directory: LogDirectory) -> None:
        directory.sync()

    def document(self, directory: LogDirectory, name: str) -> None:
        directory.sync_document(name)

    def unlink(self, directory: LogDirectory, name: str) -> None:
        directory.delete(name)

    def rename(self, directory: LogDirectory, old: str, new: str, file: SegmentFile | None = None) -> None:
        directory.rename(old, new, file)

    def write_document(self, directory: LogDirectory, name: str, data: bytes) -> None:
        """Replace a document durably (``LogDirectory.write_document``)."""
        directory.write_document(name, data)


IMMEDIATE = Syncs()


class DeferredSyncs(Syncs):
    """Blocking disk calls collected on the event loop, to ``run`` on a worker thread.

    Only syscalls on descriptors and paths leave the loop (fsyncs, unlinks, renames, and whole
    documents written through their directory); every change to a log's state stays on it (the
    caller applies the outcome after ``run`` returns). Storage without a disk gives nothing to
    collect (its ``sync_descriptor`` and ``sync_path`` are None, ``on_disk`` False), so an
    in-memory log never waits for a thread. Faults a test injects fire here, on the loop, at
    collection, except a document's, which fires in ``run``.
    """

    def __init__(self) -> None:
        self.descriptors: list[int] = []
        self.directories: list[str] = []
        self.unlinks: list[str] = []
        self.renames: list[tuple[str, str]] = []
        self.documents: list[tuple[LogDirectory, str, bytes]] = []

    def __bool__(self) -> bool:
        return bool(self.descriptors or self.directories or self.unlinks or self.renames or self.documents)

    def file(self, file: SegmentFile) -> None:
        fd = file.sync_descriptor()
        if fd is not None:
            self.descriptors.append(fd)

    def directory(self, directory: LogDirectory) -> None:
        path = directory.sync_path()
        if path is not None and path not in self.directories:
            self.directories.append(path)

    def document(self, directory: LogDirectory, name: str) -> None:
        fd = directory.document_descriptor(name)
        if fd is not None:
            self.descriptors.append(fd)

    def unlink(self, directory: LogDirectory, name: str) -> None:
        path = directory.file_path(name)
        if path is None:
            directory.delete(name)
        else:
            self.unlinks.append(path)

    def write_document(self, directory: LogDirectory, name: str, data: bytes) -> None:
        if directory.on_disk:
            self.documents.append((directory, name, data))
        else:
            directory.write_document(name, data)

    def rename(self, directory: LogDirectory, old: str, new: str, file: SegmentFile | None = None) -> None:
        paths = directory.prepare_rename(old, new, file)
        if paths is not None:
            self.renames.append(paths)

    def run(self) -> None:
        """On the worker thread: the renames (each tried; one that fails leaves its file under
        the old name), the unlinks, the documents, every fsync (files before their directories), and every
        descriptor closed whatever fails. Raises the first OSError."""
        try:
            rename_error: OSError | None = None
            for old, new in self.renames:
                try:
                    os.replace(old, new)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    rename_error = rename_error or exc
            if rename_error is not None:
                raise rename_error
            for path in self.unlinks:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            for directory, name, data in self.documents:  # each whole and durable (temp file, rename)
                directory.write_document(name, data)
            for fd in self.descriptors:
                os.fsync(fd)
            for path in self.directories:
                with contextlib.suppress(FileNotFoundError):  # deleted meanwhile: nothing left to sync
                    sync_directory(path)
        finally:
            self.discard()

    def discard(self) -> None:
        """Close the descriptors without syncing (when ``run`` will not be called)."""
        descriptors, self.descriptors = self.descriptors, []
        for fd in descriptors:
            with contextlib.suppress(OSError):
                os.close(fd)


class FileLogDirectory(LogDirectory):
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        os.makedirs(self._path, exist_ok=True)

    @property
    def path(self) -> str:
        return self._path

    def _join(self, name: str) -> str:
        return os.path.join(self._path, name)

    def list_names(self) -> list[str]:
        return sorted(os.listdir(self._path))

    def exists(self, name: str) -> bool:
        return os.path.exists(self._join(name))

    def open_file(self, name: str, *, create: bool) -> FileSegmentFile:
        return FileSegmentFile(self._join(name), create=create)

    def read_document(self, name: str) -> bytes | None:
        try:
            with open(self._join(name), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_document(self, name: str, data: bytes, *, durable: bool = True) -> None:
        # A temp name of its own: two writers of one document (a worker thread, the event loop)
        # never write into each other's file; the last rename wins, each file whole.
        tmp = self._join(f"{name}.{next(_temp_names)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self._join(name))
        except OSError:
            # A half-written temp file would only hold on to the space that just ran out.
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if durable:
            self.sync()

    def rename(self, old: str, new: str, file: SegmentFile | None = None) -> None:
        os.replace(self._join(old), self._join(new))
        if isinstance(file, FileSegmentFile):
            file.renamed(self._join(new))

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._join(name))

    def sync(self) -> None:
        sync_directory(self._path)

    def sync_path(self) -> str:
        return self._path

    def sync_document(self, name: str) -> None:
        fd = self.document_descriptor(name)
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def document_descriptor(self, name: str) -> int | None:
        try:
            return os.open(self._join(name), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None

    def file_path(self, name: str) -> str:
        return self._join(name)

    @property
    def on_disk(self) -> bool:
        return True

    def prepare_rename(self, old: str, new: str, file: SegmentFile | None = None) -> tuple[str, str]:
        if isinstance(file, FileSegmentFile):
            file.renamed(self._join(new))  # its descriptor stays valid across the rename
        return self._join(old), self._join(new)

    def remove_all(self) -> None:
        shutil.rmtree(self._path, ignore_errors=True)


class MemoryLogDirectory(LogDirectory):
    """Keeps every file in a dict; reopening the same object sees what a closed log left behind."""

    def __init__(self, path: str = "<memory>") -> None:
        self._path = path
        self._files: dict[str, MemorySegmentFile] = {}
        self._documents: dict[str, bytes] = {}

    @property
    def path(self) -> str:
        return self._path

    def list_names(self) -> list[str]:
        return sorted([*self._files, *self._documents])

    def exists(self, name: str) -> bool:
        return name in self._files or name in self._documents

    def open_file(self, name: str, *, create: bool) -> MemorySegmentFile:
        existing = self._files.get(name)
        if existing is not None:
            return existing
        if name in self._documents:
            existing = MemorySegmentFile(name, self._documents.pop(name))
        elif not create:
            raise FileNotFoundError(name)
        else:
            existing = MemorySegmentFile(name)
        self._files[name] = existing
        return existing

    def read_document(self, name: str) -> bytes | None:
        if name in self._files:
            return self._files[name].read(0, self._files[name].size)
        return self._documents.get(name)

    def write_document(self, name: str, data: bytes, *, durable: bool = True) -> None:
        self._files.pop(name, None)
        self._documents[name] = bytes(data)

    def rename(self, old: str, new: str, file: SegmentFile | None = None) -> None:
        if old in self._files:
            moved = self._files.pop(old)
            moved.name = new
            self._files[new] = moved
            self._documents.pop(new, None)
        elif old in self._documents:
            self._documents[new] = self._documents.pop(old)
            self._files.pop(new, None)
        else:
            raise FileNotFoundError(old)

    def delete(self, name: str) -> None:
        self._files.pop(name, None)
        self._documents.pop(name, None)

    def sync(self) -> None:
        pass

    def remove_all(self) -> None:
        self._files.clear()
        self._documents.clear()
