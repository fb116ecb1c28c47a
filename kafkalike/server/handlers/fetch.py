"""Fetch (key 1): v4-17. Long-poll reads of record batches, served as the file's bytes.

The request waits up to max_wait_ms, but is answered as soon as min_bytes of new data have
arrived: every append wakes the waiting fetches of that partition. The first partition with
data always returns at least one whole batch, even past max_bytes (KIP-74). A follower's
fetches (v13+) get incremental fetch sessions (KIP-227, ``server/fetch_sessions.py``): each
names only what changed and is answered with only what changed. A consumer's are answered
"sessionless" (session id 0), which every client accepts by sending full requests. v9+ checks the client's current leader epoch; v12+ reports diverging epochs;
v13+ addresses topics by id.

isolation_level 1 (read_committed, v4+) reads only up to the last stable offset (the first
offset of the oldest open transaction) and lists the aborted transactions overlapping the
returned batches (producer id, first offset, from the segments' transaction indexes), so the
consumer can drop their records; read_uncommitted reads up to the high watermark. Every
answer carries the last stable offset.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalike.log.errors import OffsetOutOfRange
from kafkalike.log.storage import FileSlices
from kafkalike.log.storage_errors import reporter
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.replica import Isolation, Partition, PartitionError
from kafkalike.replica.selector import RACK_AWARE_SELECTOR, preferred_read_replica
from kafkalike.server.context import RequestContext
from kafkalike.server.fetch_sessions import INITIAL_EPOCH, FetchSession, SessionTopic
from kafkalike.server.registry import handles
from kafkalike.server.routing import LeaderHints, partition_or_error

log = logging.getLogger("kafkalike.fetch")
READ_COMMITTED = 1
NO_EPOCH = -1
# Kafka leaves partitions its metadata does not know out of the read (KafkaApis' "erroneous"):
# they do not end the wait; any other error does (ReplicaManager.fetchMessages' errorReadingData).
_WAITS_DESPITE = frozenset({ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})
# KIP-951 (v16+): these errors carry the current leader, and the answer its endpoint.
_HINTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


@handles(1, 4, 17)
async def handle_fetch(ctx: RequestContext, request: Message) -> Mapping[str, Any]:
    session = _session(ctx, request)
    if isinstance(session, ErrorCode):
        log.info("fetch from replica %d refused: %s", _replica_id(ctx, request), session.name)
        return {"throttle_time_ms": 0, "error_code": session, "session_id": 0, "responses": []}
    # An incremental fetch reads every partition of its session, not only those it names.
    topics: Sequence[Message | SessionTopic] = (
        session.topics() if session is not None and request.session_epoch > 0 else request.topics
    )
    deadline = ctx.clock.monotonic_s() + max(request.max_wait_ms, 0) / 1000
    reading = _Reading.of(ctx, request)
    # A follower's position counts once, with the leader's log end at its first read.
    responses, total, failed = _read_all(ctx, reading, topics, record_follower=True)
    while True:
        tps = [p.tp for p in _states(ctx, topics)]
        # As Kafka's fetchMessages: answered at once when a partition's read failed (not the
        # leader any more, a fenced epoch...), else once min_bytes are there or at the deadline.
        if total >= request.min_bytes or failed or ctx.clock.monotonic_s() >= deadline or not tps:
            break
        # No await between the read and here: an append after the read wakes this wait.
        await ctx.waiters.wait_for_progress(tps, deadline)
        # Read again only the partitions that moved where this fetch reads (Kafka's
        # DelayedFetch.tryComplete looks at offsets, not at data); a high watermark that moved
        # under a follower's position, or a file write that ended, changes nothing to read.
        responses, total, failed = _read_all(ctx, reading, topics, record_follower=False, previous=responses)
    if reading.replica_id >= 0 and ctx.throttles.leader_throttles_any():
        _record_throttled(ctx, topics, responses)
    answer: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
    if failed and ctx.version >= 16:
        _add_leader_hints(ctx, topics, answer)
    if session is not None:
        answer["session_id"] = session.session_id
        if request.session_epoch > 0:
            answer["responses"] = session.changed(responses)
        else:
            session.remember(responses)
    return answer


def _record_throttled(
    ctx: RequestContext, topics: Sequence[Message | SessionTopic], responses: list[dict[str, Any]]
) -> None:
    """What the answer sends of throttled replicas counts against the leader's rate (Kafka's
    sizeOfThrottledPartitions)."""
    now_ms = ctx.clock.wall_ms()
    for topic, response in zip(topics, responses, strict=True):
        name = _topic_name(ctx, topic)
        for entry in response["partitions"]:
            size = len(entry["records"] or b"")
            partition = ctx.replicas.get((name, entry["partition_index"])) if size and name else None
            if partition is not None:
                ctx.throttles.leader_sent(partition, size, now_ms)


def _session(ctx: RequestContext, request: Message) -> FetchSession | ErrorCode | None:
    """The follower's fetch session (Kafka's FetchManager.newContext): a new one for a full
    fetch with epoch 0, the one an incremental fetch continues (or Kafka's error for it), none
    for a consumer, an older version or a sessionless fetch (epoch -1)."""
    replica_id = _replica_id(ctx, request)
    if replica_id < 0 or ctx.version < 13:
        return None
    sessions = ctx.fetch_sessions
    epoch = request.session_epoch
    if epoch <= INITIAL_EPOCH:
        if request.session_id:
            sessions.close(request.session_id)
        return sessions.open(replica_id, request.topics) if epoch == INITIAL_EPOCH else None
    return sessions.incremental(request.session_id, epoch, replica_id, request.topics, request.forgotten_topics_data)


def _add_leader_hints(ctx: RequestContext, topics: Sequence[Message | SessionTopic], answer: dict[str, Any]) -> None:
    hints = LeaderHints(ctx)
    for topic, response in zip(topics, answer["responses"], strict=True):
        name = _topic_name(ctx, topic)
        for entry in response["partitions"]:
            if name is not None and entry["error_code"] in _HINTED:
                entry["current_leader"] = hints.current_leader(name, entry["partition_index"])
    if endpoints := hints.node_endpoints():
        answer["node_endpoints"] = endpoints


def _states(ctx: RequestContext, topics: Sequence[Message | SessionTopic]) -> list[Partition]:
    out = []
    for topic in topics:
        name = _topic_name(ctx, topic)
        for part in topic.partitions:
            state = ctx.replicas.get((name, part.partition)) if name else None
            if state is not None:
                out.append(state)
    return out


def _topic_name(ctx: RequestContext, topic: Message | SessionTopic) -> str | None:
    if ctx.version >= 13:
        return ctx.metadata.image.topic_names_by_id.get(topic.topic_id)
    return topic.topic  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Reading:
    """What a fetch's reads share, taken from the request once: who fetches, and up to where."""

    budget: float  # max_bytes
    replica_id: int  # -1: a consumer
    replica_epoch: int
    committed: bool  # read_committed
    isolation: Isolation
    diverging_checks: bool  # v12+: the request names each partition's last fetched epoch
    version: int
    # KIP-392 (v11+): a consumer may read from a follower, and its rack may send it to one.
    client_metadata: bool
    client_rack: str
    selector: bool  # replica.selector.class is the rack-aware selector

    @classmethod
    def of(cls, ctx: RequestContext, request: Message) -> _Reading:
        committed = request.isolation_level == READ_COMMITTED
        return cls(
            budget=request.max_bytes if ctx.version >= 3 else math.inf,
            replica_id=_replica_id(ctx, request),
            replica_epoch=_replica_epoch(ctx, request),
            committed=committed,
            isolation=Isolation.TXN_COMMITTED if committed else Isolation.HIGH_WATERMARK,
            diverging_checks=ctx.version >= 12,
            version=ctx.version,
            client_metadata=ctx.version >= 11,
            client_rack=(request.rack_id or "") if ctx.version >= 11 else "",
            selector=ctx.metadata.config.get("replica.selector.class") == RACK_AWARE_SELECTOR,
        )

    @property
    def fetch_only_from_leader(self) -> bool:
        """Kafka's FetchParams.fetchOnlyLeader: a follower's fetch, or a consumer's before v11."""
        return self.replica_id >= 0 or not self.client_metadata

    def readable_end(self, partition: Partition) -> int:
        """Where this fetch's reads stop: the log end for a follower, else the last stable
        offset (read_committed) or the high watermark."""
        if self.replica_id >= 0:
            return partition.log_end_offset
        return partition.last_stable_offset if self.committed else partition.high_watermark


def _read_all(
    ctx: RequestContext,
    reading: _Reading,
    topics: Sequence[Message | SessionTopic],
    *,
    record_follower: bool,
    previous: list[dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], int, bool]:
    """The answer's topics, the bytes read, and whether a partition had an error (or diverged).
    With ``previous`` (this fetch's last answer, which had no records), a partition with nothing
    new where this fetch reads keeps its entry, with its offsets brought up to date."""
    budget = reading.budget
    total = 0
    failed = False
    responses = []
    for t, topic in enumerate(topics):
        name = _topic_name(ctx, topic)
        partitions = []
        for i, part in enumerate(topic.partitions):
            entry = previous[t]["partitions"][i] if previous is not None else None
            if entry is None or not _refreshed(ctx, reading, name, part, entry):
                entry = _read_partition(
                    ctx, reading, name, part, max(budget - total, 0), first=total == 0, record_follower=record_follower
                )
            total += len(entry["records"] or b"")
            # A partition sent to another replica answers at once too (Kafka's hasPreferredReadReplica).
            failed = (
                failed
                or entry["error_code"] not in _WAITS_DESPITE
                or "diverging_epoch" in entry
                or entry["preferred_read_replica"] >= 0
            )
            partitions.append(entry)
        responses.append({"topic": topic.topic, "topic_id": topic.topic_id, "partitions": partitions})
    return responses, total, failed


def _refreshed(ctx: RequestContext, reading: _Reading, name: str | None, part: Message, entry: dict[str, Any]) -> bool:
    """Whether a read of the partition would answer nothing new but its offsets, and if so the
    entry updated with them: still led here in the same epoch, and nothing past the fetch
    offset where this fetch reads (nor truncated below it)."""
    if entry["error_code"] != ErrorCode.NONE or name is None:
        return False
    partition = ctx.replicas.get((name, part.partition))
    if partition is None or not partition.is_leader or ctx.faults.is_paused(*partition.tp):
        return False
    epoch = part.current_leader_epoch if part.current_leader_epoch >= 0 else NO_EPOCH
    if (
        partition.check_leader_epoch(epoch) is not ErrorCode.NONE
        or reading.readable_end(partition) != part.fetch_offset
    ):
        return False
    entry["high_watermark"] = partition.high_watermark
    entry["last_stable_offset"] = partition.last_stable_offset
    entry["log_start_offset"] = partition.log_start_offset
    return True


def _read_partition(
    ctx: RequestContext,
    reading: _Reading,
    name: str | None,
    part: Message,
    budget: float,
    first: bool,
    record_follower: bool,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "partition_index": part.partition,
        "error_code": 0,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": [] if reading.committed else None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    partition = partition_or_error(ctx, name, part.partition)
    if partition is ErrorCode.NOT_LEADER_OR_FOLLOWER:  # in the metadata, not hosted here
        entry["error_code"] = partition
        return entry
    if not isinstance(partition, Partition):
        unknown_id = reading.version >= 13 and name is None
        entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID if unknown_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        entry["aborted_transactions"] = []  # as Apache Kafka answers a partition it does not know: empty, not null
        return entry
    if ctx.faults.is_paused(*partition.tp):
        entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return entry
    limit = min(part.partition_max_bytes, budget)
    # Kafka's FetchRequest reads any negative epoch as none named (ListOffsets only -1).
    epoch = part.current_leader_epoch if part.current_leader_epoch >= 0 else NO_EPOCH
    try:
        partition.check_request(epoch, require_leader=reading.fetch_only_from_leader)
        preferred = _preferred_read_replica(ctx, reading, partition, part.fetch_offset)
        if preferred is not None:  # sent to another replica: the offsets only, no read here
            entry.update(
                high_watermark=partition.high_watermark,
                last_stable_offset=partition.last_stable_offset,
                log_start_offset=partition.log_start_offset,
                preferred_read_replica=preferred,
            )
            return entry
        if limit <= 0 and not first:  # no room left: the offsets only
            entry.update(
                high_watermark=partition.high_watermark,
                last_stable_offset=partition.last_stable_offset,
                log_start_offset=partition.log_start_offset,
            )
            return entry
        read = partition.read(
            part.fetch_offset,
            int(limit),
            isolation=reading.isolation,
            replica_id=reading.replica_id,
            current_leader_epoch=epoch,
            min_one_batch=first,
            last_fetched_epoch=part.last_fetched_epoch if reading.diverging_checks else NO_EPOCH,
            fetch_only_from_leader=reading.fetch_only_from_leader,
        )
        if not partition.is_leader and read.size_bytes:
            ctx.follower_reads.record(partition.tp)
        if reading.replica_id >= 0 and record_follower and read.diverging is None:
            change = partition.update_follower_fetch_state(
                reading.replica_id,
                broker_epoch=reading.replica_epoch,
                fetch_offset=part.fetch_offset,
                log_start_offset=part.log_start_offset,
                leader_end_offset=read.log_end_offset,
                now_ms=ctx.clock.wall_ms(),
            )
            if change is not None:
                ctx.isr_changes.submit(change)
    except PartitionError as exc:  # as Apache Kafka answers it: the offsets unknown (-1)
        entry["error_code"] = exc.code
        return entry
    except OffsetOutOfRange:
        # As Apache Kafka answers it: the offsets unknown (-1), the client asks ListOffsets.
        entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
        return entry
    except OSError as exc:  # EMFILE opening a cold segment, EIO: this partition only, logged once a minute
        reporter.report("read of", partition.directory_path, exc, ctx.clock.wall_ms())
        entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return entry
    entry.update(
        high_watermark=read.high_watermark,
        last_stable_offset=read.last_stable_offset,
        log_start_offset=read.log_start_offset,
        records=FileSlices(read.ranges),  # sent from the files, see server/connection.py
    )
    if reading.replica_id >= 0 and ctx.throttles.leader_throttles(partition, reading.replica_id, ctx.clock.wall_ms()):
        entry["records"] = b""  # KIP-73: read (the follower's position counts), sent nothing
    if read.diverging is not None:
        entry["diverging_epoch"] = {"epoch": read.diverging.epoch, "end_offset": read.diverging.end_offset}
    if read.aborted is not None:
        entry["aborted_transactions"] = [
            {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in read.aborted
        ]
    return entry


def _preferred_read_replica(ctx: RequestContext, reading: _Reading, partition: Partition, offset: int) -> int | None:
    """The replica this leader sends a consumer to (KIP-392), or None to read here."""
    if not reading.selector or reading.replica_id >= 0 or not reading.client_metadata:
        return None
    routing, listener = ctx.metadata.routing, ctx.listener

    def endpoint_rack(broker_id: int) -> tuple[bool, str | None]:
        endpoint = routing.alive_endpoint(broker_id, listener)
        return (False, None) if endpoint is None else (True, endpoint.rack)

    return preferred_read_replica(partition, reading.client_rack, offset, ctx.clock.wall_ms(), endpoint_rack)


def _replica_epoch(ctx: RequestContext, request: Message) -> int:
    """The fetching follower's broker epoch (KIP-903, v15+; -1 before)."""
    return int(request.replica_state.replica_epoch) if ctx.version >= 15 else -1


def _replica_id(ctx: RequestContext, request: Message) -> int:
    """The fetching replica (-1: a consumer): v15+ carries it in ``replica_state``."""
    return int(request.replica_state.replica_id if ctx.version >= 15 else request.replica_id)
