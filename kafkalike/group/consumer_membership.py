"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat, sessions and rebalance timeouts.

This follows Apache Kafka's GroupMetadataManager (the consumer-group half) step by step, with
its error codes at the same places. Rules:

- A heartbeat computes the records its change needs (member subscription, subscription
  metadata, group epoch, target assignment, current assignment), makes them durable through
  the coordinator's store, and only then applies them (consumer_persistence.py), with the
  same code that replays them at start-up. A failed write changes nothing.
- Every heartbeat (1) updates the member from the request and bumps the group epoch when the
  member is new, its subscription changed, or the subscribed topics' metadata changed;
  (2) recomputes the target assignment with the group's server assignor when the group epoch
  is ahead of it; (3) moves the member one step towards its target (reconciliation.py).
- Two timers per member, keyed so that rescheduling replaces: the session (every heartbeat
  restarts it; when it fires the member is fenced: removed, its partitions released, the
  group epoch bumped) and the rebalance timeout (started when the member is asked to revoke
  partitions; fires only if it is still at that epoch, and fences it).
- Nothing reads a clock or global randomness: ``now_ms`` comes in, member ids (v0 only) come
  from the coordinator's seeded ``random.Random``.

Topic metadata comes from a ``TopicsView`` (the broker's metadata image), read at every
heartbeat; a regular-expression subscription is matched against the topic names then.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kafkalike.configs import DECLARED, declared_int, list_items
from kafkalike.group.assignors import (
    ASSIGNORS,
    Assignment,
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    assignors_from_config,
)
from kafkalike.group.consumer_api import ConsumerHeartbeatRequest, ConsumerHeartbeatResult, TopicPartitions
from kafkalike.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from kafkalike.group.consumer_persistence import ConsumerGroupRecords, removal_records
from kafkalike.group.consumer_records import (
    ConsumerRecord,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscriptionRecord,
    PartitionMetadataRecord,
    TargetEpochRecord,
    TargetMemberRecord,
    TopicMetadata,
)
from kafkalike.group.reconciliation import FencedMemberError, reconcile
from kafkalike.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalike.group.coordinator import GroupCoordinator

log = logging.getLogger("kafkalike.group.consumer")
E = ErrorCode
# A timer whose fencing could not be persisted tries again this much later.
RETRY_BACKOFF_MS = 500


@dataclass(frozen=True)
class ConsumerGroupConfig:
    # group.consumer.heartbeat.interval.ms: what members are told to heartbeat at.
    heartbeat_interval_ms: int = declared_int("group.consumer.heartbeat.interval.ms")
    # group.consumer.session.timeout.ms: a member that does not heartbeat for this long is fenced.
    session_timeout_ms: int = declared_int("group.consumer.session.timeout.ms")
    max_size: int = declared_int("group.consumer.max.size")
    # group.consumer.assignors: the server assignors members may ask for; the first is the default.
    assignors: tuple[str, ...] = tuple(list_items(DECLARED["group.consumer.assignors"].default or ""))

    def __post_init__(self) -> None:
        object.__setattr__(self, "assignors", assignors_from_config(self.assignors))
        if self.heartbeat_interval_ms < 1 or self.max_size < 1:
            raise ValueError("group.consumer.heartbeat.interval.ms and group.consumer.max.size must be positive")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")


class TopicLike(Protocol):
    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partitions(self) -> int: ...


TopicsView = Callable[[], Mapping[str, TopicLike]]


class HeartbeatError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-session", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", group_id, member_id)


def wire_partitions(assignment: Assignment) -> TopicPartitions:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()))


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def _is_subset(owned: TopicPartitions | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(p in assigned.get(t, ()) for t, ps in owned for p in ps)


class ConsumerMembership:
    def __init__(self, coordinator: GroupCoordinator, config: ConsumerGroupConfig, topics: TopicsView) -> None:
        self.c = coordinator
        self.config = config
        self.topics = topics
        self.records = ConsumerGroupRecords(coordinator)

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------

    def heartbeat(self, req: ConsumerHeartbeatRequest, now_ms: int) -> ConsumerHeartbeatResult:
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req, now_ms)
            return self._heartbeat(req, now_ms)
        except HeartbeatError as exc:
            return ConsumerHeartbeatResult(exc.error, exc.message)
        except FencedMemberError as exc:
            return ConsumerHeartbeatResult(E.FENCED_MEMBER_EPOCH, str(exc))

    def _validate(self, req: ConsumerHeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""

        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(E.INVALID_REQUEST, message)

        epoch = req.member_epoch
        if (req.member_id_required or epoch != 0) and not req.member_id.strip():
            raise invalid("MemberId can't be empty.")
        if not req.group_id.strip():
            raise invalid("GroupId can't be empty.")
        if _blank(req.instance_id):
            raise invalid("InstanceId can't be empty.")
        if _blank(req.rack_id):
            raise invalid("RackId can't be empty.")
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned_partitions is None or req.owned_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            supported = ", ".join(self.config.assignors)
            raise HeartbeatError(
                E.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {supported}.",
            )
        if req.subscribed_topic_regex:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as exc:
                raise HeartbeatError(
                    E.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular expression: {exc}.",
                ) from exc

    def _heartbeat(self, req: ConsumerHeartbeatRequest, now_ms: int) -> ConsumerHeartbeatResult:
        gid = req.group_id
        records: list[ConsumerRecord] = []
        create = req.member_epoch == 0
        group, fresh, drop_classic = self._group_for(gid, create)
        if len(group.members) >= self.config.max_size and (not req.member_id or req.member_id not in group.members):
            raise HeartbeatError(
                E.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        member_id = req.member_id or self._new_member_id()
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req, create)
        else:
            member = self._static_member(group, member_id, req, create, records)
        updated = self._with_request(member, req)
        replaced = group.static_members.get(updated.instance_id) if updated.instance_id is not None else None
        if replaced == member_id:
            replaced = None
        bump = member_id not in group.members and replaced is None
        if updated != member:
            records.append(MemberSubscriptionRecord(gid, member_id, updated.subscription()))
            bump = bump or (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        members = [m for m in group.members.values() if m.member_id not in (member_id, replaced)] + [updated]
        self._resolve_regexes(group, members)
        metadata = self.subscription_metadata(group, members)
        if metadata != group.subscription_metadata:
            bump = True
            records.append(PartitionMetadataRecord(gid, tuple(metadata.values())))
        group_epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            records.append(GroupEpochRecord(gid, group_epoch))
            log.info("group %s: epoch %d", gid, group_epoch)
        if group_epoch > group.assignment_epoch:
            target = self._update_target(group, group_epoch, updated, members, metadata, records)
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch
            target = group.target_of(updated.member_id, updated.instance_id)
        reconciled = reconcile(updated, target_epoch, target, group.partition_epoch, req.owned_partitions)
        if reconciled != updated:
            records.append(CurrentAssignmentRecord(gid, member_id, reconciled.current()))
        error = self.records.commit(gid, records, now_ms, new_group=group if fresh else None, drop_classic=drop_classic)
        if error is not None:
            return ConsumerHeartbeatResult(error)
        if reconciled != updated:
            self._after_reconcile(gid, reconciled, now_ms)
        self._schedule_session(gid, member_id, now_ms)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.owned_partitions is not None
        )
        changed = reconciled.assigned != member.assigned
        return ConsumerHeartbeatResult(
            E.NONE,
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=wire_partitions(reconciled.assigned) if full or changed else None,
        )

    def _group_for(self, group_id: str, create: bool) -> tuple[ConsumerGroup, bool, bool]:
        """(group, whether it is new, whether an empty classic group must make room for it)."""
        group = self.c.consumer_groups.get(group_id)
        if group is not None:
            return group, False, False
        classic = self.c.groups.get(group_id)
        if classic is not None:
            if create and classic.is_empty:
                return ConsumerGroup(group_id), True, True
            # Kafka upgrades a classic group in use online; that migration is not implemented.
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")
        if not create:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id), True, False

    def _new_member_id(self) -> str:
        """Kafka's Uuid.randomUuid().toString(): 16 random bytes, url-safe base64, never starting with '-'."""
        while True:
            text = base64.urlsafe_b64encode(self.c.rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")
            if not text.startswith("-"):
                return text

    def _dynamic_member(
        self, group: ConsumerGroup, member_id: str, req: ConsumerHeartbeatRequest, create: bool
    ) -> ConsumerMember:
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise HeartbeatError(
                    E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
                )
            member = ConsumerMember(member_id)
            log.info("group %s: member %s joins", group.group_id, member_id)
        self._check_epoch(member, req.member_epoch, req.owned_partitions)
        return member

    def _static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        req: ConsumerHeartbeatRequest,
        create: bool,
        records: list[ConsumerRecord],
    ) -> ConsumerMember:
        instance_id = req.instance_id
        existing = group.static_member(instance_id)
        if create:
            if existing is None:
                log.info("group %s: static member %s (%s) joins", group.group_id, member_id, instance_id)
                return group.members.get(member_id) or ConsumerMember(member_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise HeartbeatError(
                    E.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                    f"instance id is owned by {existing.member_id} member.",
                )
            new = dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            records.extend(self._replace_records(group, existing, new))
            log.info("group %s: static member %s rejoins as %s", group.group_id, instance_id, member_id)
            return new
        if existing is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise HeartbeatError(
                E.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by member {existing.member_id}.",
            )
        self._check_epoch(existing, req.member_epoch, req.owned_partitions)
        return existing

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: TopicPartitions | None) -> None:
        """FENCED_MEMBER_EPOCH unless the epoch is the member's, or its previous one with no extra partitions."""
        if epoch > member.member_epoch:
            raise HeartbeatError(
                E.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned)
        ):
            # The previous epoch is accepted: the response that moved the member on may have been lost.
            raise HeartbeatError(
                E.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )

    @staticmethod
    def _with_request(member: ConsumerMember, req: ConsumerHeartbeatRequest) -> ConsumerMember:
        """The member with what the request changed (None and -1 mean unchanged)."""
        regex = member.subscribed_topic_regex
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
        names = member.subscribed_topic_names
        if req.subscribed_topic_names is not None:
            names = frozenset(req.subscribed_topic_names)
        return dataclasses.replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms
            if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            client_id=req.client_id,
            client_host=req.client_host,
        )

    @staticmethod
    def _replace_records(group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember) -> list[ConsumerRecord]:
        """A static member's new incarnation takes over the old one's subscription and assignments."""
        gid = group.group_id
        return [
            *removal_records(gid, old.member_id),
            MemberSubscriptionRecord(gid, new.member_id, new.subscription()),
            TargetMemberRecord(gid, new.member_id, group.target.get(old.member_id, {})),
            CurrentAssignmentRecord(gid, new.member_id, new.current()),
        ]

    # -- subscriptions and the target assignment ---------------------------------------------

    def _resolve_regexes(self, group: ConsumerGroup, members: Iterable[ConsumerMember]) -> None:
        """Match every subscribed regex against the topic names (internal topics excluded)."""
        regexes = {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex is not None}
        if not regexes:
            group.resolved_regex = {}
            return
        names = [n for n in self.topics() if not n.startswith("__")]
        group.resolved_regex = {r: frozenset(n for n in names if re.fullmatch(r, n)) for r in regexes}

    def refresh_regexes(self, group: ConsumerGroup) -> None:
        self._resolve_regexes(group, group.members.values())

    def subscription_metadata(
        self, group: ConsumerGroup, members: Iterable[ConsumerMember]
    ) -> dict[str, TopicMetadata]:
        """Id and partition count of every existing topic the members subscribe to, by name."""
        names: set[str] = set()
        for member in members:
            names.update(group.member_topics(member))
        topics = self.topics()
        out: dict[str, TopicMetadata] = {}
        for name in sorted(names):
            topic = topics.get(name)
            if topic is not None:
                out[name] = TopicMetadata(topic.topic_id, name, topic.partitions)
        return out

    def assignor_name(self, members: Iterable[ConsumerMember]) -> str:
        """The server assignor most members prefer (ties: the greatest name), else the default."""
        counts = Counter(m.server_assignor for m in members if m.server_assignor in self.config.assignors)
        ranked = sorted(((n, name) for name, n in counts.items() if name is not None), reverse=True)
        return ranked[0][1] if ranked else self.config.assignors[0]

    def _update_target(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        updated: ConsumerMember,
        members: Sequence[ConsumerMember],
        metadata: Mapping[str, TopicMetadata],
        records: list[ConsumerRecord],
    ) -> Assignment:
        gid = group.group_id
        specs: dict[str, MemberSpec] = {}
        for m in members:
            prior = group.target.get(m.member_id, {})
            if m is updated and m.instance_id is not None:
                prior = group.target_of(m.member_id, m.instance_id) or prior
            topic_ids = frozenset(metadata[n].topic_id for n in group.member_topics(m) if n in metadata)
            specs[m.member_id] = MemberSpec(m.instance_id, topic_ids, prior)
        name = self.assignor_name(members)
        spec = GroupSpec(specs, {t.topic_id: t.partitions for t in metadata.values()})
        try:
            result = ASSIGNORS[name].assign(spec)
        except PartitionAssignorError as exc:
            message = f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}"
            raise HeartbeatError(E.UNKNOWN_SERVER_ERROR, message) from exc
        for member_id in specs:
            new = result.get(member_id, {})
            if member_id not in group.target or group.target[member_id] != new:
                records.append(TargetMemberRecord(gid, member_id, new))
        records.append(TargetEpochRecord(gid, group_epoch))
        log.info("group %s: target assignment of epoch %d computed by %s", gid, group_epoch, name)
        return result.get(updated.member_id, {})

    # -- leaving and fencing -----------------------------------------------------------------

    def _leave(self, req: ConsumerHeartbeatRequest, now_ms: int) -> ConsumerHeartbeatResult:
        gid = req.group_id
        group = self.c.consumer_groups.get(gid)
        if group is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {gid}.")
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise HeartbeatError(
                    E.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                    f"{member.member_id}.",
                )
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Away for a while: it keeps its partitions until it rejoins or its session ends.
                away = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                error = self.records.commit(
                    gid, [CurrentAssignmentRecord(gid, member.member_id, away.current())], now_ms
                )
                if error is not None:
                    return ConsumerHeartbeatResult(error)
                log.info("group %s: static member %s left for now", gid, req.instance_id)
                return ConsumerHeartbeatResult(E.NONE, member_id=member.member_id, member_epoch=req.member_epoch)
        log.info("group %s: member %s left", gid, member.member_id)
        error = self.fence(group, member, now_ms)
        if error is not None:
            return ConsumerHeartbeatResult(error)
        return ConsumerHeartbeatResult(E.NONE, member_id=req.member_id, member_epoch=req.member_epoch)

    def fence(self, group: ConsumerGroup, member: ConsumerMember, now_ms: int) -> ErrorCode | None:
        """Remove a member, release its partitions and bump the group epoch."""
        gid = group.group_id
        records: list[ConsumerRecord] = removal_records(gid, member.member_id)
        others = [m for m in group.members.values() if m.member_id != member.member_id]
        metadata = self.subscription_metadata(group, others)
        if metadata != group.subscription_metadata:
            records.append(PartitionMetadataRecord(gid, tuple(metadata.values())))
        records.append(GroupEpochRecord(gid, group.group_epoch + 1))
        error = self.records.commit(gid, records, now_ms)
        if error is None:
            self.c.timer.cancel(session_key(gid, member.member_id))
            self.c.timer.cancel(rebalance_key(gid, member.member_id))
        return error

    # -- timers -------------------------------------------------------------------------------

    def _schedule_session(self, group_id: str, member_id: str, now_ms: int) -> None:
        self.c.timer.schedule(
            session_key(group_id, member_id),
            now_ms + self.config.session_timeout_ms,
            lambda t: self._fence_on_timer(group_id, member_id, None, "its session expired", t),
        )

    def _after_reconcile(self, group_id: str, member: ConsumerMember, now_ms: int) -> None:
        key = rebalance_key(group_id, member.member_id)
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            self.c.timer.cancel(key)
            return
        epoch = member.member_epoch
        self.c.timer.schedule(
            key,
            now_ms + member.rebalance_timeout_ms,
            lambda t: self._fence_on_timer(group_id, member.member_id, epoch, "it did not revoke in time", t),
        )

    def _fence_on_timer(self, group_id: str, member_id: str, epoch: int | None, why: str, now_ms: int) -> None:
        group = self.c.consumer_groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("group %s: member %s fenced because %s", group_id, member_id, why)
        if self.fence(group, member, now_ms) is not None:
            self.c.timer.schedule(
                session_key(group_id, member_id) if epoch is None else rebalance_key(group_id, member_id),
                now_ms + RETRY_BACKOFF_MS,
                lambda t: self._fence_on_timer(group_id, member_id, epoch, why, t),
            )

    def replay(self, key: bytes, value: bytes | None, now_ms: int) -> None:
        self.records.replay(key, value, now_ms)

    def on_loaded(self, now_ms: int, group_ids: Iterable[str] | None = None) -> None:
        """After the replay (of ``group_ids`` only, when given): every member's session starts
        afresh; revocations get their timeout."""
        wanted = None if group_ids is None else set(group_ids)
        for group in self.c.consumer_groups.values():
            if wanted is not None and group.group_id not in wanted:
                continue
            self.refresh_regexes(group)
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id, now_ms)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._after_reconcile(group.group_id, member, now_ms)
