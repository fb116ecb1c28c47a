"""Moving one member from its current assignment towards the target assignment (KIP-848).

This is Kafka's CurrentAssignmentBuilder. A member is in one of three states; each heartbeat
may move it along, and the transitions are all here:

- STABLE, at the target epoch: nothing to do.
- STABLE, behind the target epoch: compute the next step (below).
- UNREVOKED_PARTITIONS: the member was told to give up some partitions and keeps its epoch
  until a heartbeat reports owned partitions that no longer include any of them; then it
  moves to the next epoch and the next step is computed. (A heartbeat that does not report
  its owned partitions does not count as a revocation.)
- UNRELEASED_PARTITIONS: the member is at the target epoch but some of its target partitions
  are still owned by others; each heartbeat re-computes, picking up those released since.
- UNKNOWN (a state value from a newer version): the member must rejoin from scratch.

The next step, from the partitions the member has and its target:

1. keep = assigned & target; revoke = assigned - target; new = target - keep, minus the
   partitions still owned by another member (their epoch is not -1): those are unreleased.
2. Something to revoke that the member still owns: UNREVOKED_PARTITIONS at the current epoch,
   owning only ``keep``; the member hears it must give up ``revoke``.
3. Otherwise, something new: the target epoch, owning keep + new, UNRELEASED_PARTITIONS if
   some partitions were unreleased, else STABLE.
4. Otherwise: the target epoch, owning keep, UNRELEASED_PARTITIONS or STABLE as above.

A new owner is thus only ever given a partition whose previous owner confirmed it let go:
revocation comes before reassignment.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence

from kafkalike.group.assignors import Assignment
from kafkalike.group.consumer_group import ConsumerMember, MemberState

OwnedPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]]
PartitionEpoch = Callable[[uuid.UUID, int], int]


class FencedMemberError(Exception):
    """The member must abandon its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: OwnedPartitions | None,
) -> ConsumerMember:
    """The member after one reconciliation step; the same object when nothing changes."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise FencedMemberError(
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin."
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: OwnedPartitions | None, partitions: Assignment) -> bool:
    """Whether the member still reports any of ``partitions``; not reporting at all counts as yes."""
    if owned is None:
        return True
    return any(p in partitions.get(topic_id, ()) for topic_id, ps in owned for p in ps)


def _next(
    member: ConsumerMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: OwnedPartitions | None,
) -> ConsumerMember:
    keep: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    new: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in sorted(set(target) | set(member.assigned)):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        kept = current & wanted
        pending = wanted - kept
        free = frozenset(p for p in pending if partition_epoch(topic_id, p) == -1)
        unreleased = unreleased or free != pending
        for out, parts in ((keep, kept), (revoke, current - kept), (new, free)):
            if parts:
                out[topic_id] = parts
    if revoke and _owns_any(owned, revoke):
        return _updated(member, MemberState.UNREVOKED_PARTITIONS, member_epoch, keep, revoke)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    assigned = dict(keep)
    for topic_id, parts in new.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
    return _updated(member, state, target_epoch, assigned, {})


def _updated(
    member: ConsumerMember,
    state: MemberState,
    epoch: int,
    assigned: dict[uuid.UUID, frozenset[int]],
    revoke: dict[uuid.UUID, frozenset[int]],
) -> ConsumerMember:
    # Kafka's updateMemberEpoch: the epoch the member had becomes the previous one.
    return dataclasses.replace(
        member,
        state=state,
        member_epoch=epoch,
        previous_member_epoch=member.member_epoch,
        assigned=assigned,
        pending_revocation=revoke,
    )
