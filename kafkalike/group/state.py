"""The states of a classic group and every legal transition, in one place.

A classic group moves through these states (Kafka's ClassicGroupState); the trigger of each
transition is listed beside it. ``ClassicGroup.transition_to`` refuses anything else.

- Empty -> PreparingRebalance: the first member joins (JoinGroup). The join phase then waits
  ``group.initial.rebalance.delay.ms``, extended while new members keep arriving, up to the
  largest rebalance timeout.
- PreparingRebalance -> CompletingRebalance: every known member has rejoined, or the rebalance
  timeout expired (members that did not rejoin are dropped). The generation id goes up, a
  protocol is chosen, and every parked JoinGroup is answered.
- PreparingRebalance -> Empty: the join phase completes with no member left.
- CompletingRebalance -> Stable: the leader's SyncGroup hands in the assignment and it is
  persisted; every parked SyncGroup is answered.
- CompletingRebalance / Stable -> PreparingRebalance: a member joins, leaves, changes its
  metadata, the leader rejoins, a session expires, or some member did not send SyncGroup within
  the rebalance timeout.
- any -> Dead: the group is being removed (DeleteGroups, offsets expired on an empty group);
  it is then dropped from the coordinator, so Dead is only ever seen transiently.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def lower(self) -> str:
        """The lower-case name ListGroups state filters are compared with."""
        return self.value.lower()


# Target state -> the states it may be entered from.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalTransition(Exception):
    """A transition that ``VALID_PREVIOUS_STATES`` does not allow: a coordinator bug."""
