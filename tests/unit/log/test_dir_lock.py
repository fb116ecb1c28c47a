"""dir_lock: one process per log directory, and nothing held after a failed or finished start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkalike.log.dir_lock import LOCK_FILE_NAME, LogDirError, lock_log_dir, lock_log_dirs

# Another process trying the same lock: exit 0 if it got it, 3 if it is held.
TRY_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    sys.exit(3)
"""


def locked_elsewhere(directory: Path) -> bool:
    """Whether a second process is refused the directory's lock (record locks are per process)."""
    result = subprocess.run([sys.executable, "-c", TRY_LOCK, str(directory / LOCK_FILE_NAME)], timeout=30)
    assert result.returncode in (0, 3)
    return result.returncode == 3


def test_the_lock_keeps_other_processes_out_until_released(tmp_path: Path) -> None:
    lock = lock_log_dir(tmp_path)
    assert lock.held and locked_elsewhere(tmp_path)
    lock.release()
    assert not lock.held and not locked_elsewhere(tmp_path)
    lock.release()  # twice is harmless (close() after a failed start)


def test_a_missing_directory_is_created_and_locked(tmp_path: Path) -> None:
    [lock] = lock_log_dirs([tmp_path / "a" / "b"])
    assert (tmp_path / "a" / "b").is_dir() and locked_elsewhere(tmp_path / "a" / "b")
    lock.release()


def test_a_failed_directory_releases_the_ones_locked_before_it(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("a file, not a directory")
    with pytest.raises(LogDirError, match=r"bad is not a readable log directory\.$"):
        lock_log_dirs([good, bad])
    assert not locked_elsewhere(good)
