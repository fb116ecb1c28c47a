"""The group coordinator: a synchronous state machine for classic groups and committed offsets.

Rules (Kafka's GroupCoordinatorShard, without threads):

- Every call takes ``now_ms``; nothing here reads a clock. ``poll(now_ms)`` fires due timers
  and returns the next deadline (or None), so a thin adapter can sleep until then.
- Member ids come from the ``random.Random`` passed in, so a seeded run replays exactly.
- JoinGroup and SyncGroup may have to wait for other members: they return ``Pending(token)``,
  and the result appears later in ``take_completions()``, after another call or a ``poll``.
  Everything else answers at once.
- State changes that must survive a restart are written through the ``GroupStore`` before the
  call returns (and so before any response is sent): offset commits, and group metadata at the
  end of each rebalance. ``replay`` rebuilds the state from those records at start-up.

``ClassicMembership`` (membership.py) holds the classic protocol itself; this module holds the
shared state, offsets, the admin APIs and persistence. KIP-848 consumer groups live in
``consumer_groups`` (a group id is in at most one of the two maps); ``ConsumerMembership``
(consumer_membership.py) runs their protocol and ``ConsumerGroupAdmin`` (consumer_admin.py)
what the other group APIs do to them.
"""

from __future__ import annotations

import itertools
import logging
import random
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TypeVar, cast

from kafkalike.group.api import (
    CommitRequest,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    FetchResult,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    ListedGroup,
    Pending,
    SyncRequest,
    SyncResult,
)
from kafkalike.group.classic import ClassicGroup, ClassicMember
from kafkalike.group.config import GroupConfig
from kafkalike.group.consumer_admin import ConsumerGroupAdmin
from kafkalike.group.consumer_api import ConsumerHeartbeatRequest, ConsumerHeartbeatResult, DescribedConsumerGroup
from kafkalike.group.consumer_group import ConsumerGroup
from kafkalike.group.consumer_membership import ConsumerGroupConfig, ConsumerMembership, TopicsView
from kafkalike.group.membership import ClassicMembership
from kafkalike.group.offsets import OffsetAndMetadata, OffsetStore
from kafkalike.group.records import (
    CoordinatorRecord,
    GroupRecord,
    GroupSnapshot,
    OffsetRecord,
    RecordError,
    decode_record,
    group_tombstone,
    offset_commit_record,
    offset_tombstone,
    partition_for,
)
from kafkalike.group.state import GroupState
from kafkalike.group.store import GroupStore, StoreError
from kafkalike.group.timer import Timer
from kafkalike.group.txn_offsets import PendingTxnOffsets
from kafkalike.protocol.errors import ErrorCode

log = logging.getLogger("kafkalike.group")
E = ErrorCode
S = GroupState
EXPIRY_KEY = ("expire-offsets",)
Completion = tuple[int, JoinResult | SyncResult]
R = TypeVar("R", JoinResult, SyncResult)


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        store: GroupStore,
        rng: random.Random,
        *,
        consumer_config: ConsumerGroupConfig | None = None,
        topics: TopicsView = dict,
    ) -> None:
        self.config = config
        self.store = store
        self.rng = rng
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        # TxnOffsetCommit offsets waiting for their transaction's marker (txn_offsets.py).
        self.txn_offsets = PendingTxnOffsets()
        self.timer = Timer()
        self._tokens = itertools.count(1)
        self._completed: dict[int, JoinResult | SyncResult] = {}
        self.classic = ClassicMembership(self)
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.consumer = ConsumerMembership(self, consumer_config or ConsumerGroupConfig(), topics)
        self.consumer_admin = ConsumerGroupAdmin(self.consumer)

    # -- plumbing shared with the membership module ------------------------------------------

    def new_token(self) -> int:
        return next(self._tokens)

    def new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    def new_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = ClassicGroup(group_id, GroupState.EMPTY, now_ms)
        self.groups[group_id] = group
        return group

    def complete(self, token: int, result: JoinResult | SyncResult) -> None:
        self._completed[token] = result

    def resolve(self, result: R | Pending) -> R | Pending:
        """A parked request whose result is already known comes back as that result."""
        if isinstance(result, Pending) and result.token in self._completed:
            return cast(R, self._completed.pop(result.token))
        return result

    def take_completions(self) -> list[Completion]:
        """Results of parked requests completed since the last call, oldest first."""
        done = list(self._completed.items())
        self._completed.clear()
        return done

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_partitions)

    def write(self, group_id: str, records: Sequence[CoordinatorRecord], now_ms: int) -> ErrorCode | None:
        """Make records durable in the group's partition; the error to answer with on failure."""
        try:
            self.store.append(self.partition_for(group_id), records, now_ms)
        except StoreError as exc:
            # A disk error was logged where it happened, once rather than per request.
            log.log(
                logging.DEBUG if exc.storage else logging.ERROR,
                "group %s: cannot persist %d record(s): %s",
                group_id,
                len(records),
                exc,
            )
            return E.UNKNOWN_SERVER_ERROR if exc.too_large else E.NOT_COORDINATOR
        return None

    # -- time ---------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> int | None:
        """Fire every due timer; the next deadline in ms, or None when nothing is scheduled."""
        self.timer.run_due(now_ms)
        return self.timer.next_deadline()

    # -- the classic protocol -----------------------------------------------------------------

    def join_group(self, request: JoinRequest, now_ms: int) -> JoinResult | Pending:
        answered = self.consumer_admin.classic_join(request, now_ms)
        return answered if answered is not None else self.classic.join(request, now_ms)

    def sync_group(self, request: SyncRequest, now_ms: int) -> SyncResult | Pending:
        if request.group_id in self.consumer_groups:
            return SyncResult(
                self.consumer_admin.classic_member_error(request.group_id, request.member_id, request.group_instance_id)
            )
        return self.classic.sync(request, now_ms)

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int, now_ms: int
    ) -> ErrorCode:
        if group_id in self.consumer_groups:
            return self.consumer_admin.classic_member_error(group_id, member_id, group_instance_id)
        return self.classic.heartbeat(group_id, member_id, group_instance_id, generation_id, now_ms)

    def leave_group(self, group_id: str, members: Sequence[LeavingMember], now_ms: int) -> LeaveResult:
        if group_id in self.consumer_groups:
            error = self.consumer_admin.classic_member_error
            return LeaveResult(
                E.NONE, tuple((m, error(group_id, m.member_id, m.group_instance_id, by_admin=True)) for m in members)
            )
        return self.classic.leave(group_id, tuple(members), now_ms)

    # -- the consumer protocol (KIP-848) ------------------------------------------------------

    def consumer_group_heartbeat(self, request: ConsumerHeartbeatRequest, now_ms: int) -> ConsumerHeartbeatResult:
        return self.consumer.heartbeat(request, now_ms)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return self.consumer_admin.describe(group_ids)

    # -- offsets ------------------------------------------------------------------------------

    def commit_offsets(self, request: CommitRequest, now_ms: int) -> list[tuple[str, int, ErrorCode]]:
        """OffsetCommit: one (topic, partition, error) per requested partition, in order."""
        parts = request.partitions
        consumer_group = self.consumer_groups.get(request.group_id)
        if consumer_group is not None:
            invalid = consumer_group.validate_offset_commit(
                request.member_id, request.generation_id, request.supports_member_epoch
            )
            if invalid is not None:
                return [(p.topic, p.partition, invalid) for p in parts]
            return self._store_offsets(request, now_ms)[0]
        group = self.groups.get(request.group_id)
        created = False
        if group is None:
            if request.generation_id >= 0:
                error = E.GROUP_ID_NOT_FOUND if request.group_id_not_found_error else E.ILLEGAL_GENERATION
                return [(p.topic, p.partition, error) for p in parts]
            # A "simple" group: offsets only, no membership.
            group = self.new_group(request.group_id, now_ms)
            created = True
        invalid = group.validate_offset_commit(request.member_id, request.group_instance_id, request.generation_id)
        if invalid is not None:
            if created:
                del self.groups[request.group_id]
            return [(p.topic, p.partition, invalid) for p in parts]
        if group.is_in(S.STABLE, S.PREPARING_REBALANCE):
            # A commit keeps a classic member's session alive, as a heartbeat would.
            self.classic.reschedule_heartbeat(group, group.members[request.member_id], now_ms)
        results, stored = self._store_offsets(request, now_ms)
        if not stored and created and not self.offsets.has_offsets(group.group_id):
            del self.groups[group.group_id]
        return results

    def _store_offsets(self, request: CommitRequest, now_ms: int) -> tuple[list[tuple[str, int, ErrorCode]], bool]:
        """Persist the offsets of a validated commit: the per-partition results, and whether the write held."""
        gid = request.group_id
        expire = None if request.retention_time_ms == -1 else now_ms + request.retention_time_ms
        results: list[tuple[str, int, ErrorCode]] = []
        accepted: list[tuple[str, int, OffsetAndMetadata]] = []
        for p in request.partitions:
            metadata = p.metadata or ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                results.append((p.topic, p.partition, E.OFFSET_METADATA_TOO_LARGE))
                continue
            accepted.append(
                (p.topic, p.partition, OffsetAndMetadata(p.offset, p.leader_epoch, metadata, now_ms, expire))
            )
            results.append((p.topic, p.partition, E.NONE))
        if accepted:
            records = [offset_commit_record(gid, t, n, o) for t, n, o in accepted]
            failed = self.write(gid, records, now_ms)
            if failed is not None:
                if failed is E.UNKNOWN_SERVER_ERROR:
                    failed = E.INVALID_COMMIT_OFFSET_SIZE
                return [(t, n, failed if e is E.NONE else e) for t, n, e in results], False
            for topic, partition, offset in accepted:
                self.offsets.put(gid, topic, partition, offset)
                self.txn_offsets.on_regular_commit(gid, topic, partition)
        return results, True

    def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchResult:
        """OffsetFetch for one group; ``topics`` None means every committed offset.

        Partitions without a committed offset come back as offset -1. Pending transactional
        offsets are not shown; ``require_stable`` is applied by the caller (``txn_offsets``).
        A member of a consumer group (v9) must name itself with its current epoch.
        """
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            invalid = consumer_group.validate_offset_fetch(member_id, member_epoch)
            if invalid is not None:
                return FetchResult(invalid)
        group = self.groups.get(group_id)
        known = consumer_group is not None or (group is not None and not group.is_in(S.DEAD))
        if topics is None:
            by_topic: dict[str, list[FetchedOffset]] = defaultdict(list)
            if known:
                for topic, partition, offset in self.offsets.group_offsets(group_id):
                    by_topic[topic].append(_fetched(partition, offset))
            return FetchResult(E.NONE, tuple((t, tuple(ps)) for t, ps in by_topic.items()))
        out = []
        for topic, partitions in topics:
            entries = []
            for partition in partitions:
                committed = self.offsets.get(group_id, topic, partition) if known else None
                entries.append(_fetched(partition, committed))
            out.append((topic, tuple(entries)))
        return FetchResult(E.NONE, tuple(out))

    def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]], now_ms: int
    ) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        """OffsetDelete: only for topics the group does not consume (GROUP_SUBSCRIBED_TO_TOPIC)."""
        if not group_id:
            return E.INVALID_GROUP_ID, []
        group: ClassicGroup | ConsumerGroup | None = self.consumer_groups.get(group_id)
        if group is None:
            group = self.groups.get(group_id)
            if group is None or group.is_in(S.DEAD):
                return E.GROUP_ID_NOT_FOUND, []
            if not group.is_empty and not group.uses_consumer_protocol:
                return E.NON_EMPTY_GROUP, []
        results: list[tuple[str, int, ErrorCode]] = []
        doomed: list[tuple[str, int]] = []
        for topic, partitions in topics:
            subscribed = group.is_subscribed_to_topic(topic)
            for partition in partitions:
                results.append((topic, partition, E.GROUP_SUBSCRIBED_TO_TOPIC if subscribed else E.NONE))
                if not subscribed and self.offsets.get(group_id, topic, partition) is not None:
                    doomed.append((topic, partition))
        if doomed:
            error = self.write(group_id, [offset_tombstone(group_id, t, p) for t, p in doomed], now_ms)
            if error is not None:
                return error, []
            for topic, partition in doomed:
                self.offsets.remove(group_id, topic, partition)
        return E.NONE, results

    # -- admin --------------------------------------------------------------------------------

    def delete_groups(self, group_ids: Sequence[str], now_ms: int) -> list[tuple[str, ErrorCode]]:
        results = []
        for group_id in group_ids:
            consumer_group = self.consumer_groups.get(group_id)
            if consumer_group is not None:
                error = self.consumer_admin.delete(consumer_group, now_ms)
                results.append((group_id, E.NONE if error is None else error))
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(S.DEAD):
                results.append((group_id, E.GROUP_ID_NOT_FOUND))
            elif not group.is_empty:
                results.append((group_id, E.NON_EMPTY_GROUP))
            else:
                error = self._delete_group(group, now_ms)
                results.append((group_id, E.NONE if error is None else error))
        return results

    def _delete_group(self, group: ClassicGroup, now_ms: int) -> ErrorCode | None:
        gid = group.group_id
        owned = [(t, p) for t, p, _ in self.offsets.group_offsets(gid)]
        records = [offset_tombstone(gid, t, p) for t, p in owned]
        records.append(group_tombstone(gid))
        error = self.write(gid, records, now_ms)
        if error is not None:
            return error
        group.transition_to(S.DEAD, now_ms)
        for topic, partition in owned:
            self.offsets.remove(gid, topic, partition)
        del self.groups[gid]
        log.info("deleted group %s and its %d offset(s)", gid, len(owned))
        return None

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        out = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                out.append(DescribedGroup(group_id, found=False))
                continue
            stable = group.is_in(S.STABLE) and group.protocol_name is not None
            protocol = group.protocol_name if stable else None
            members = tuple(_described(m, protocol) for m in group.members.values())
            out.append(
                DescribedGroup(
                    group_id,
                    found=True,
                    state=group.state.value,
                    protocol_type=group.protocol_type or "",
                    protocol_data=protocol or "",
                    members=members,
                )
            )
        return out

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
        """Every group, filtered by state and type names (case-insensitive; empty: no filter)."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        out = []
        for group in self.groups.values():
            if wanted_states and group.state.lower not in wanted_states:
                continue
            if wanted_types and group.group_type not in wanted_types:
                continue
            out.append(ListedGroup(group.group_id, group.protocol_type or "", group.state.value, group.group_type))
        for cg in self.consumer_groups.values():
            state = cg.state
            if wanted_states and state.lower not in wanted_states:
                continue
            if wanted_types and cg.group_type not in wanted_types:
                continue
            out.append(ListedGroup(cg.group_id, cg.protocol_type, state.value, cg.group_type))
        return out

    def on_topic_deleted(self, topic: str, now_ms: int) -> None:
        """Forget every group's offsets for a deleted topic, so a new topic of that name starts afresh."""
        doomed: dict[str, list[int]] = defaultdict(list)
        for group_id, partition in self.offsets.partitions_of_topic(topic):
            doomed[group_id].append(partition)
        for group_id, partitions in doomed.items():
            if self.write(group_id, [offset_tombstone(group_id, topic, p) for p in partitions], now_ms) is None:
                for partition in partitions:
                    self.offsets.remove(group_id, topic, partition)

    # -- offset expiry ------------------------------------------------------------------------

    def _schedule_expiry(self, now_ms: int) -> None:
        self.timer.schedule(EXPIRY_KEY, now_ms + self.config.offsets_retention_check_interval_ms, self._expire)

    def _expire(self, now_ms: int) -> None:
        """Drop expired offsets; then drop empty groups left without any (Kafka's cleanupGroupMetadata)."""
        self._schedule_expiry(now_ms)
        for group in list(self.groups.values()):
            self._expire_group(group, now_ms)
        for consumer_group in list(self.consumer_groups.values()):
            self.consumer_admin.expire(consumer_group, now_ms)

    def _expire_group(self, group: ClassicGroup, now_ms: int) -> None:
        gid = group.group_id
        base = group.offset_expiry_base()
        expired: list[tuple[str, int]] = []
        all_expired = True
        for topic, partition, offset in self.offsets.group_offsets(gid):
            if base is None or group.is_subscribed_to_topic(topic):
                all_expired = False
            elif offset.is_expired(now_ms, base(offset), self.config.offsets_retention_ms):
                expired.append((topic, partition))
            else:
                all_expired = False
        records = [offset_tombstone(gid, t, p) for t, p in expired]
        drop_group = all_expired and group.is_empty
        if drop_group:
            records.append(group_tombstone(gid))
        if records and self.write(gid, records, now_ms) is not None:
            return
        for topic, partition in expired:
            self.offsets.remove(gid, topic, partition)
        if drop_group:
            group.transition_to(S.DEAD, now_ms)
            del self.groups[gid]
            log.info("group %s expired with %d offset(s)", gid, len(expired))

    # -- loading ------------------------------------------------------------------------------

    def replay(self, key: bytes | None, value: bytes | None, now_ms: int) -> None:
        """Apply one record of the offsets topic, read back in log order at start-up."""
        try:
            record = decode_record(key, value)
        except RecordError as exc:
            log.warning("skipping an unreadable record in the offsets topic: %s", exc)
            return
        self.replay_decoded(key, value, record, now_ms)

    def replay_decoded(
        self, key: bytes | None, value: bytes | None, record: OffsetRecord | GroupRecord | None, now_ms: int
    ) -> None:
        """``replay`` of a record already decoded (``decode_record``, where the log was read)."""
        if isinstance(record, OffsetRecord):
            if record.offset is None:
                self.offsets.remove(record.group_id, record.topic, record.partition)
                return
            if record.group_id not in self.groups and record.group_id not in self.consumer_groups:
                self.new_group(record.group_id, now_ms)
            self.offsets.put(record.group_id, record.topic, record.partition, record.offset)
        elif isinstance(record, GroupRecord):
            if record.group is None:
                self.groups.pop(record.group_id, None)
            else:
                self.groups[record.group_id] = _loaded_group(record.group_id, record.group)
        elif key is not None:
            self.consumer.replay(key, value, now_ms)

    def unload_partition(self, partition: int) -> None:
        """Forget every group of an offsets-topic partition, as Kafka unloads a coordinator
        partition whose log write failed (``load_partition`` then replays what its log holds):
        their parked JoinGroup / SyncGroup answered NOT_COORDINATOR, their timers cancelled,
        their offsets and pending transactional offsets dropped."""

        def here(group_id: object) -> bool:
            return isinstance(group_id, str) and self.partition_for(group_id) == partition

        for group_id in [g for g in self.groups if here(g)]:
            for member in self.groups.pop(group_id).members.values():
                if member.join_token is not None:
                    self.complete(member.join_token, JoinResult(E.NOT_COORDINATOR))
                if member.sync_token is not None:
                    self.complete(member.sync_token, SyncResult(E.NOT_COORDINATOR))
        for group_id in [g for g in self.consumer_groups if here(g)]:
            del self.consumer_groups[group_id]
        # Every group timer's key names its group second (membership.py, consumer_membership.py).
        self.timer.cancel_where(lambda key: isinstance(key, tuple) and len(key) > 1 and here(key[1]))
        self.offsets.drop_groups(here)
        self.txn_offsets.drop_groups(here)

    def load_partition(self, records: Iterable[tuple[bytes | None, bytes | None]], now_ms: int) -> None:
        """After ``unload_partition``: the partition's records replayed, and its groups' sessions
        started as ``on_loaded`` starts them."""
        classic, consumer = set(self.groups), set(self.consumer_groups)
        for key, value in records:
            self.replay(key, value, now_ms)
        for group_id in set(self.groups) - classic:
            group = self.groups[group_id]
            for member in group.members.values():
                self.classic.reschedule_heartbeat(group, member, now_ms)
        self.consumer.on_loaded(now_ms, set(self.consumer_groups) - consumer)

    def on_loaded(self, now_ms: int) -> None:
        """After the replay: start loaded members' sessions and the offset expiry job."""
        for group in self.groups.values():
            for member in group.members.values():
                self.classic.reschedule_heartbeat(group, member, now_ms)
        self.consumer.on_loaded(now_ms)
        self._schedule_expiry(now_ms)
        if self.groups or self.consumer_groups:  # one shard of many: quiet when it holds nothing
            log.info(
                "loaded %d classic and %d consumer group(s) with %d offset(s)",
                len(self.groups),
                len(self.consumer_groups),
                self.offsets.count(),
            )


def _fetched(partition: int, offset: OffsetAndMetadata | None) -> FetchedOffset:
    if offset is None:
        return FetchedOffset(partition)
    return FetchedOffset(partition, offset.committed_offset, offset.leader_epoch, offset.metadata)


def _described(member: ClassicMember, protocol: str | None) -> DescribedMember:
    metadata = member.metadata(protocol) if protocol is not None else b""
    return DescribedMember(
        member.member_id, member.group_instance_id, member.client_id, member.client_host, metadata, member.assignment
    )


def _loaded_group(group_id: str, snap: GroupSnapshot) -> ClassicGroup:
    """A group as its last GroupMetadataValue left it: Stable with its members, or Empty."""
    state = GroupState.STABLE if snap.members else GroupState.EMPTY
    group = ClassicGroup(group_id, state, snap.state_timestamp_ms, generation_id=snap.generation_id)
    group.protocol_type = snap.protocol_type or None
    group.protocol_name = snap.protocol_name
    for m in snap.members:
        protocols = ((snap.protocol_name or "", m.subscription),)
        member = ClassicMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms,
            protocol_type=snap.protocol_type,
            protocols=protocols,
            assignment=m.assignment,
        )
        group.add(member)
    group.leader_id = snap.leader_id if snap.leader_id in group.members else next(iter(group.members), None)
    group.protocol_type = snap.protocol_type or None
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
