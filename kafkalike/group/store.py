"""Where the group coordinator's records go: the partitions of ``__consumer_offsets``.

The append and the read-back are ``kafkalike.log.coordinator_log``'s, shared with the
transaction coordinator; this module names them for the group coordinator and keeps one
difference: the replay skips transactional batches (``txn_offsets`` replays those, knowing
their fate from the markers).
"""

from __future__ import annotations

from collections.abc import Iterator

from kafkalike.log import PartitionLog
from kafkalike.log.coordinator_log import CoordinatorLogStore, CoordinatorRecord, CoordinatorStore
from kafkalike.log.coordinator_log import StoreError as StoreError
from kafkalike.log.coordinator_log import read_records as read_coordinator_records

GroupStore = CoordinatorStore
LogGroupStore = CoordinatorLogStore


def read_records(plog: PartitionLog) -> Iterator[tuple[int, CoordinatorRecord]]:
    """Every (offset, (key, value)) of a partition, in order; control and transactional batches
    are skipped (the latter are replayed by ``txn_offsets``, which knows their fate)."""
    return read_coordinator_records(plog, skip_transactional=True)
