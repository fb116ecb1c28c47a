"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

This follows Apache Kafka's GroupMetadataManager (the classic-group half) step by step, with
its error codes at the same places. Three kinds of timers drive it, all keyed per group or
member so that rescheduling replaces the previous deadline:

- ``heartbeat``: a member's session (or, for a new member, the new-member join timeout; for a
  member id handed out with MEMBER_ID_REQUIRED, the session timeout to come back). When it
  fires the member is removed unless it is parked in JoinGroup or SyncGroup.
- ``join``: the end of the join phase (the initial delay for an empty group, else the
  rebalance timeout); members that did not rejoin are dropped and the phase completes.
- ``sync``: after the join phase, the members that have not sent SyncGroup within the
  rebalance timeout are removed and a new rebalance starts.

Parked requests are tokens stored on the member; ``GroupCoordinator.complete`` emits their
results. State transitions themselves are listed in ``state.py``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kafkalike.group.api import (
    UNKNOWN_MEMBER_ID,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    Pending,
    SyncRequest,
    SyncResult,
)
from kafkalike.group.classic import ClassicGroup, ClassicMember
from kafkalike.group.records import GroupSnapshot, MemberSnapshot, group_metadata_record
from kafkalike.group.state import GroupState
from kafkalike.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalike.group.coordinator import GroupCoordinator

log = logging.getLogger("kafkalike.group")
E = ErrorCode
S = GroupState


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def snapshot(group: ClassicGroup, assignment: Mapping[str, bytes]) -> GroupSnapshot:
    """The GroupMetadataValue of a group with the given assignment."""
    protocol = group.protocol_name
    return GroupSnapshot(
        protocol_type=group.protocol_type or "",
        generation_id=group.generation_id,
        protocol_name=protocol,
        leader_id=group.leader_id,
        state_timestamp_ms=group.state_timestamp_ms,
        members=tuple(
            MemberSnapshot(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        ),
    )


class ClassicMembership:
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.c = coordinator

    # -- JoinGroup ----------------------------------------------------------------------------

    def join(self, req: JoinRequest, now_ms: int) -> JoinResult | Pending:
        config = self.c.config
        if not req.group_id:
            return JoinResult(E.INVALID_GROUP_ID, member_id=req.member_id)
        if not config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms:
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
        unknown_member = req.member_id == UNKNOWN_MEMBER_ID
        group = self.c.groups.get(req.group_id)
        if group is None:
            if not unknown_member:
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=req.member_id)
            group = self.c.new_group(req.group_id, now_ms)
        if not self._accept_joining_member(group, req.member_id):
            self._drop_member(group, req.member_id, now_ms)
            return JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id=UNKNOWN_MEMBER_ID)
        token = self.c.new_token()
        if unknown_member:
            result = self._join_new_member(group, req, token, now_ms)
        else:
            result = self._join_existing_member(group, req, token, now_ms)
        return self.c.resolve(result)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.c.config.max_size
        member = group.members.get(member_id)
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            # Counting parked joins lets the last members to rejoin a shrunk group be shed.
            return (member is not None and member.awaiting_join) or group.num_awaiting_join() < max_size
        return member is not None or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest, token: int, now_ms: int) -> JoinResult | Pending:
        if group.is_in(S.DEAD):
            return JoinResult(E.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL)
        new_member_id = self.c.new_member_id(req.group_instance_id or req.client_id)
        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                return self._replace_static_member(group, req, existing, new_member_id, token, now_ms)
            return self._add_member_and_rebalance(group, req, new_member_id, token, now_ms)
        if req.require_known_member_id:
            # JoinGroup v4+: hand out the id first; the member comes back with it (KIP-394).
            group.pending_members.add(new_member_id)
            self._schedule_heartbeat(group, new_member_id, now_ms + req.session_timeout_ms)
            return JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_member_id)
        return self._add_member_and_rebalance(group, req, new_member_id, token, now_ms)

    def _join_existing_member(
        self, group: ClassicGroup, req: JoinRequest, token: int, now_ms: int
    ) -> JoinResult | Pending:
        member_id = req.member_id
        if group.is_in(S.DEAD):
            return JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if member_id in group.pending_members:
            if req.group_instance_id is not None:
                # Pending ids are only handed to dynamic members; Kafka fails the same way.
                return JoinResult(E.UNKNOWN_SERVER_ERROR, member_id=member_id)
            return self._add_member_and_rebalance(group, req, member_id, token, now_ms)
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not None:
            return JoinResult(error, member_id=member_id)
        member = group.members[member_id]
        if group.is_in(S.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, req, token, now_ms)
        if group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # A retry of a JoinGroup whose response was lost: answer with this generation.
                return self._generation_result(group, member_id, with_members=group.leader_id == member_id)
            return self._update_member_and_rebalance(group, member, req, token, now_ms)
        if group.is_in(S.STABLE):
            if group.leader_id == member_id or not member.matches(req.protocols):
                # A leader rejoining asks for a rebalance (e.g. the subscribed topics changed).
                return self._update_member_and_rebalance(group, member, req, token, now_ms)
            return self._generation_result(group, member_id, with_members=False)
        return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)

    def _generation_result(
        self, group: ClassicGroup, member_id: str, *, with_members: bool, leader: str | None = None
    ) -> JoinResult:
        return JoinResult(
            E.NONE,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=(group.leader_id if leader is None else leader) or "",
            members=group.current_members() if with_members else (),
        )

    def _add_member_and_rebalance(
        self, group: ClassicGroup, req: JoinRequest, member_id: str, token: int, now_ms: int
    ) -> Pending:
        member = ClassicMember(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            is_new=True,
            join_token=token,
        )
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat before its first JoinGroup response; if it went away
        # while parked it would linger, so its parked join only lives this long.
        self._schedule_heartbeat(group, member_id, now_ms + self.c.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
        return Pending(token)

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: ClassicMember, req: JoinRequest, token: int, now_ms: int
    ) -> Pending:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms)
        self._park_join(member, token)
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
        return Pending(token)

    def _park_join(self, member: ClassicMember, token: int) -> None:
        if member.join_token is not None:
            # A retried JoinGroup replaces the parked one (whose client gave up on it).
            self.c.complete(member.join_token, JoinResult(E.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.join_token = token

    def _replace_static_member(
        self, group: ClassicGroup, req: JoinRequest, old_id: str, new_id: str, token: int, now_ms: int
    ) -> JoinResult | Pending:
        """A static member rejoined without its member id: the new id replaces the old one."""
        assert req.group_instance_id is not None
        current_leader = group.leader_id
        old = group.members[old_id]
        # Whoever still waits under the old id is a duplicate instance: fence it.
        if old.join_token is not None:
            self.c.complete(old.join_token, JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id))
            old.join_token = None
        if old.sync_token is not None:
            self.c.complete(old.sync_token, SyncResult(E.FENCED_INSTANCE_ID))
            old.sync_token = None
        self.c.timer.cancel(heartbeat_key(group.group_id, old_id))
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self.reschedule_heartbeat(group, member, now_ms)
        saved = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms)
        member.join_token = token
        if group.is_in(S.STABLE):
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
                return Pending(token)
            # Same protocol: persist the new member id and skip the rebalance (KIP-345).
            member.join_token = None
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            error = self.c.write(
                group.group_id, [group_metadata_record(group.group_id, snapshot(group, assignment))], now_ms
            )
            if error is not None:
                group.update_member(member, *saved)
                group.replace_static_member(req.group_instance_id, new_id, old_id)
                self.c.timer.cancel(heartbeat_key(group.group_id, new_id))
                self.reschedule_heartbeat(group, member, now_ms)
                return JoinResult(
                    error,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=current_leader or "",
                )
            if req.supports_skip_assignment:
                # JoinGroup v9: a static leader learns it leads, but must not reassign.
                is_leader = group.leader_id == new_id
                result = self._generation_result(group, new_id, with_members=is_leader)
                return dataclasses.replace(result, skip_assignment=is_leader)
            # Older versions: name the old leader id, so the new member never thinks it leads.
            return self._generation_result(group, new_id, with_members=False, leader=current_leader or "")
        if group.is_in(S.COMPLETING_REBALANCE):
            # The leader may be assigning for the old id: rebalance so the new id gets a share.
            self._prepare_rebalance(group, now_ms)
            return Pending(token)
        self._maybe_complete_join_phase(group, now_ms)
        return Pending(token)

    # -- the join phase -----------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms)
        else:
            self._maybe_complete_join_phase(group, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS, now_ms)
        self._remove_sync_expiration(group)
        initial = group.is_empty
        gid = group.group_id
        if initial:
            delay_ms = self.c.config.initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
            self.c.timer.schedule(
                join_key(gid), now_ms + delay_ms, lambda t: self._initial_join_timer(gid, delay_ms, remaining_ms, t)
            )
        group.transition_to(S.PREPARING_REBALANCE, now_ms)
        log.info("preparing to rebalance group %s (generation %d)", gid, group.generation_id)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group, now_ms)
            else:
                self.c.timer.schedule(
                    join_key(gid), now_ms + group.rebalance_timeout_ms(), lambda t: self._join_timer(gid, t)
                )

    def _initial_join_timer(self, group_id: str, delay_ms: int, remaining_ms: int, now_ms: int) -> None:
        group = self.c.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            # Someone joined during the delay: wait once more, within the rebalance timeout.
            group.new_member_added = False
            next_delay_ms = min(self.c.config.initial_rebalance_delay_ms, remaining_ms)
            next_remaining_ms = max(remaining_ms - delay_ms, 0)
            self.c.timer.schedule(
                join_key(group_id),
                now_ms + next_delay_ms,
                lambda t: self._initial_join_timer(group_id, next_delay_ms, next_remaining_ms, t),
            )
        else:
            self._complete_join(group, now_ms)

    def _join_timer(self, group_id: str, now_ms: int) -> None:
        group = self.c.groups.get(group_id)
        if group is not None:
            self._complete_join(group, now_ms)

    def _maybe_complete_join_phase(self, group: ClassicGroup, now_ms: int) -> None:
        if not group.is_in(S.PREPARING_REBALANCE):
            return
        if group.previous_state is S.EMPTY:
            return  # the initial rebalance always waits for its delay
        if group.has_all_members_joined():
            self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        gid = group.group_id
        self.c.timer.cancel(join_key(gid))
        if not group.is_in(S.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self._drop_member(group, member.member_id, now_ms)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them (or their sessions).
            self.c.timer.schedule(
                join_key(gid), now_ms + group.rebalance_timeout_ms(), lambda t: self._join_timer(gid, t)
            )
            return
        group.init_next_generation(now_ms)
        if group.is_empty:
            log.info("group %s is empty at generation %d", gid, group.generation_id)
            record = group_metadata_record(gid, snapshot(group, {}))
            if self.c.write(gid, [record], now_ms) is not None:
                # Harmless: the previous generation comes back after a crash, and times out.
                log.warning("could not persist empty group %s", gid)
            return
        log.info("group %s generation %d has %d member(s)", gid, group.generation_id, len(group.members))
        for member in list(group.members.values()):
            with_members = group.leader_id == member.member_id
            self._complete_join_token(
                member, self._generation_result(group, member.member_id, with_members=with_members)
            )
            self.reschedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation_id
        self.c.timer.schedule(
            sync_key(gid), now_ms + group.rebalance_timeout_ms(), lambda t: self._sync_timer(gid, generation, t)
        )

    def _complete_join_token(self, member: ClassicMember, result: JoinResult) -> None:
        if member.join_token is not None:
            self.c.complete(member.join_token, result)
            member.join_token = None

    def _sync_timer(self, group_id: str, generation_id: int, now_ms: int) -> None:
        group = self.c.groups.get(group_id)
        if group is None or group.generation_id != generation_id:
            return
        if group.is_in(S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync:
            missing = sorted(group.pending_sync)
            for member_id in missing:
                self._drop_member(group, member_id, now_ms)
            log.info("group %s removed member(s) that sent no SyncGroup: %s", group_id, missing)
            self._prepare_rebalance(group, now_ms)

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync.clear()
        self.c.timer.cancel(sync_key(group.group_id))

    def _drop_member(self, group: ClassicGroup, member_id: str, now_ms: int) -> ClassicMember | None:
        """Remove a member and its session timer, failing whatever it still has parked."""
        self.c.timer.cancel(heartbeat_key(group.group_id, member_id))
        member = group.remove(member_id)
        if member is not None:
            self._complete_join_token(member, JoinResult(E.UNKNOWN_MEMBER_ID))
            if member.sync_token is not None:
                self.c.complete(member.sync_token, SyncResult(E.UNKNOWN_MEMBER_ID))
                member.sync_token = None
        return member

    # -- sessions -----------------------------------------------------------------------------

    def _schedule_heartbeat(self, group: ClassicGroup, member_id: str, deadline_ms: int) -> None:
        gid = group.group_id
        self.c.timer.schedule(
            heartbeat_key(gid, member_id), deadline_ms, lambda t: self._session_expired(gid, member_id, t)
        )

    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicMember, now_ms: int) -> None:
        self._schedule_heartbeat(group, member.member_id, now_ms + member.session_timeout_ms)

    def _session_expired(self, group_id: str, member_id: str, now_ms: int) -> None:
        group = self.c.groups.get(group_id)
        if group is None or group.is_in(S.DEAD):
            return
        if member_id in group.pending_members:
            log.info("pending member %s of group %s did not come back", member_id, group_id)
            group.remove(member_id)
            if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group, now_ms)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("member %s of group %s failed its session, removing it", member_id, group_id)
        self._remove_member_and_update_group(group, member_id, now_ms)

    def _remove_member_and_update_group(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        self._drop_member(group, member_id, now_ms)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group, now_ms)

    # -- SyncGroup ----------------------------------------------------------------------------

    def sync(self, req: SyncRequest, now_ms: int) -> SyncResult | Pending:
        if not req.group_id:
            return SyncResult(E.INVALID_GROUP_ID)
        group = self.c.groups.get(req.group_id)
        if group is None or group.is_empty:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        error = self._validate_sync(group, req)
        if error is not None:
            return SyncResult(error)
        if group.is_in(S.PREPARING_REBALANCE):
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        member = group.members[req.member_id]
        if group.is_in(S.STABLE):
            group.pending_sync.discard(req.member_id)
            self._maybe_cancel_sync_timer(group)
            return SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: park until the leader's assignment is in.
        token = self.c.new_token()
        if member.sync_token is not None:
            self.c.complete(member.sync_token, SyncResult(E.REBALANCE_IN_PROGRESS))
        member.sync_token = token
        group.pending_sync.discard(req.member_id)
        self._maybe_cancel_sync_timer(group)
        if group.leader_id == req.member_id:
            self._install_assignment(group, dict(req.assignments), now_ms)
        parked: SyncResult | Pending = Pending(token)
        return self.c.resolve(parked)

    def _validate_sync(self, group: ClassicGroup, req: SyncRequest) -> ErrorCode | None:
        if group.is_in(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            return E.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _maybe_cancel_sync_timer(self, group: ClassicGroup) -> None:
        if not group.pending_sync:
            self.c.timer.cancel(sync_key(group.group_id))

    def _install_assignment(self, group: ClassicGroup, assignment: dict[str, bytes], now_ms: int) -> None:
        """The leader's SyncGroup: persist the assignment, then hand every member its share."""
        for member_id in group.members:
            assignment.setdefault(member_id, b"")
        record = group_metadata_record(group.group_id, snapshot(group, assignment))
        error = self.c.write(group.group_id, [record], now_ms)
        if error is not None:
            self._reset_and_propagate_assignment_error(group, error, now_ms)
            self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
            return
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self._propagate_assignment(group, E.NONE, now_ms)
        group.transition_to(S.STABLE, now_ms)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode, now_ms: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now_ms)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode, now_ms: int) -> None:
        ok = error is E.NONE
        for member in group.members.values():
            if member.sync_token is None:
                continue
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            self.c.complete(member.sync_token, result)
            member.sync_token = None
            # Its session was on hold while parked; it starts again from here.
            self.reschedule_heartbeat(group, member, now_ms)

    # -- Heartbeat and LeaveGroup ---------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int, now_ms: int
    ) -> ErrorCode:
        if not group_id:
            return E.INVALID_GROUP_ID
        group = self.c.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_in(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_empty:
            return E.UNKNOWN_MEMBER_ID
        self.reschedule_heartbeat(group, group.members[member_id], now_ms)
        if group.is_in(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave(self, group_id: str, leaving: tuple[LeavingMember, ...], now_ms: int) -> LeaveResult:
        if not group_id:
            return LeaveResult(E.INVALID_GROUP_ID)
        group = self.c.groups.get(group_id)
        if group is None:
            return LeaveResult(E.NONE, tuple((m, E.UNKNOWN_MEMBER_ID) for m in leaving))
        if group.is_in(S.DEAD):
            return LeaveResult(E.COORDINATOR_NOT_AVAILABLE)
        results = tuple((m, self._leave_one(group, m, now_ms)) for m in leaving)
        if any(error is E.NONE for _, error in results):
            if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
            elif group.is_in(S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group, now_ms)
        return LeaveResult(E.NONE, results)

    def _leave_one(self, group: ClassicGroup, leaving: LeavingMember, now_ms: int) -> ErrorCode:
        if leaving.member_id == UNKNOWN_MEMBER_ID:
            # An admin removing a static member by its instance id alone.
            instance = leaving.group_instance_id
            member_id = group.static_members.get(instance) if instance is not None else None
            if member_id is None:
                return E.UNKNOWN_MEMBER_ID
            self._drop_member(group, member_id, now_ms)
            return E.NONE
        if leaving.member_id in group.pending_members:
            group.remove(leaving.member_id)
            self.c.timer.cancel(heartbeat_key(group.group_id, leaving.member_id))
            return E.NONE
        error = group.validate_member(leaving.member_id, leaving.group_instance_id)
        if error is not None:
            return error
        log.info("member %s left group %s (%s)", leaving.member_id, group.group_id, leaving.reason or "no reason")
        self._drop_member(group, leaving.member_id, now_ms)
        return E.NONE


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
