"""The states of a transactional id and every legal transition, in one place (Kafka's
TransactionState). ``TxnMetadata.prepare`` refuses anything else.

Each state has the id its TransactionLogValue record stores and the name DescribeTransactions
and ListTransactions show. The trigger of each transition:

- Empty / CompleteCommit / CompleteAbort -> Empty: InitProducerId (a new or bumped epoch, or a
  new producer id once the epochs are exhausted).
- Empty / CompleteCommit / CompleteAbort / Ongoing -> Ongoing: AddPartitionsToTxn or
  AddOffsetsToTxn (the transaction starts with its first partition).
- Ongoing -> PrepareCommit / PrepareAbort: EndTxn. The markers are then written to every
  partition of the transaction.
- Ongoing -> PrepareEpochFence: InitProducerId from a new producer instance, or the
  transaction timed out. Never persisted: it is immediately followed by PrepareAbort with the
  epoch bumped, which fences the old producer.
- PrepareEpochFence -> PrepareAbort: the abort that fences.
- PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort: every marker is written.
- Empty / CompleteCommit / CompleteAbort -> Dead: transactional.id.expiration.ms passed; a
  tombstone is written and the id is forgotten, so Dead is only ever seen transiently.
"""

from __future__ import annotations

import enum


class TxnState(enum.Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def display_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.display_name == name), None)

    @property
    def expiration_allowed(self) -> bool:
        """Whether transactional.id.expiration.ms may remove an id in this state."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


S = TxnState
# Target state -> the states it may be entered from.
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(Exception):
    """A transition that ``VALID_PREVIOUS_STATES`` does not allow: a coordinator bug."""
