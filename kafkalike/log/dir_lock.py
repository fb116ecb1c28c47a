"""One broker per data directory: the directory is created if missing, checked, and locked.

As Kafka's LogManager does it: a ``.lock`` file in each log directory, locked exclusively for the
broker's whole life. The lock is a POSIX record lock (``fcntl``), the kind Java's
``FileChannel.tryLock`` takes on Linux, so kafkalike and a Kafka broker also keep each other off
one directory. A record lock belongs to the process, so a broker object reopened in the same
process (a simulated crash in tests) gets it again; a second process does not. The file itself
stays after release: deleting it could let two processes lock two different files of one name.

Every failure is a ``LogDirError`` whose message is one line, in Kafka's words.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from collections.abc import Iterable
from pathlib import Path

LOCK_FILE_NAME = ".lock"

log = logging.getLogger("kafkalike.log")


class LogDirError(Exception):
    """A log directory the broker cannot use; the message is one line."""


class DirLock:
    """The held lock of one log directory; ``release`` once the broker is done with it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor drops the record lock


def prepare_log_dir(path: Path) -> None:
    """Create ``path`` if it does not exist, and check that it is a readable directory."""
    absolute = path.absolute()
    if not path.exists():
        log.info("Log directory %s not found, creating it.", absolute)
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            pass  # created meanwhile by someone else; checked below like any existing one
        except OSError as exc:
            raise LogDirError(f"Failed to create data directory {absolute}: {exc.strerror}") from exc
    if not path.is_dir() or not os.access(path, os.R_OK | os.X_OK):
        raise LogDirError(f"{absolute} is not a readable log directory.")


def lock_log_dir(path: Path) -> DirLock:
    """Take ``path``'s ``.lock`` without waiting; refused if another process holds it."""
    lock_path = path / LOCK_FILE_NAME
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise LogDirError(f"Disk error while locking directory {path.absolute()}: {exc.strerror}") from exc
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            raise LogDirError(
                f"Failed to acquire lock on file {LOCK_FILE_NAME} in {path.absolute()}. "
                "A Kafka instance in another process or thread is using this directory."
            ) from exc
        raise LogDirError(f"Disk error while locking directory {path.absolute()}: {exc.strerror}") from exc
    return DirLock(path, fd)


def lock_log_dirs(paths: Iterable[Path]) -> list[DirLock]:
    """Prepare and lock every directory, or none: on a failure the locks taken are released."""
    locks: list[DirLock] = []
    try:
        for path in paths:
            prepare_log_dir(path)
            locks.append(lock_log_dir(path))
    except LogDirError:
        for lock in locks:
            lock.release()
        raise
    return locks
