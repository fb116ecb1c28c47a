"""Reporting disk failures: one log line per kind of failure, not one per request.

A full disk fails every produce request and every background flush until space comes back; a
line (let alone a traceback) for each would bury everything else in the log. The first failure
of each (operation, errno) pair is logged at once; repeats within ``interval_ms`` are only
counted, and the count is logged with the next line for that pair. Kafka's LogDirFailureChannel
plays this part there (it takes the whole log dir offline; see ``PartitionLog.append`` for why
kafkalike does not).

Time is passed in (``now_ms``) so the behaviour is reproducible; only the trio event loop calls
``report``, so no locking is needed.
"""

from __future__ import annotations

import errno
import logging
from dataclasses import dataclass, field

log = logging.getLogger("kafkalike.log.storage")
REPORT_INTERVAL_MS = 60_000


def describe(exc: OSError) -> str:
    """``ENOSPC (No space left on device)``, or the exception text without an errno."""
    if exc.errno is None:
        return str(exc) or type(exc).__name__
    name = errno.errorcode.get(exc.errno, str(exc.errno))
    return f"{name} ({exc.strerror or exc})"


@dataclass
class StorageErrorReporter:
    interval_ms: int = REPORT_INTERVAL_MS
    # (operation, errno) -> (time last logged, repeats suppressed since)
    _seen: dict[tuple[str, int | None], tuple[int, int]] = field(default_factory=dict)

    def report(self, operation: str, subject: str, exc: OSError, now_ms: int) -> bool:
        """Log ``exc`` raised by ``operation`` on ``subject`` unless a line for the same operation
        and errno went out less than ``interval_ms`` ago; True when a line was logged."""
        key = (operation, exc.errno)
        last = self._seen.get(key)
        if last is not None and now_ms - last[0] < self.interval_ms:
            self._seen[key] = (last[0], last[1] + 1)
            return False
        repeats = f" ({last[1]} more since the last report)" if last is not None and last[1] else ""
        log.error("storage error: %s %s failed: %s%s", operation, subject, describe(exc), repeats)
        self._seen[key] = (now_ms, 0)
        return True

    def forget(self) -> None:
        """Log the next failure of every kind at once (tests that wait for the line)."""
        self._seen.clear()


# One reporter for the whole process: the disk is shared by every log, so is its failure.
reporter = StorageErrorReporter()
