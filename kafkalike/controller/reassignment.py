"""A partition's replicas while it moves (Kafka's PartitionReassignmentReplicas).

A reassignment from the current replicas to a target keeps both sets until it completes: the
partition's replicas are the target's, in the target's order, followed by the replicas being
removed (ascending); ``adding`` are the target's new ones, ``removing`` the ones that go (both
ascending, as Kafka's TreeSet orders them). The new replicas fetch from the leader like any
follower and join the ISR once caught up; the reassignment completes at the first partition
change whose target ISR, the removed replicas left out, holds the added replicas (see
``completed``): then the replicas are the target and the ISR loses the removed ones (a removed
leader loses its leadership in the same change).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkalike.controller.image import PartitionRegistration


@dataclass(frozen=True)
class ReassignmentReplicas:
    removing: tuple[int, ...]
    adding: tuple[int, ...]
    replicas: tuple[int, ...]

    @classmethod
    def between(cls, current: Sequence[int], target: Sequence[int]) -> ReassignmentReplicas:
        """The state of a reassignment from ``current`` to ``target`` as it starts."""
        removing = tuple(sorted(set(current) - set(target)))
        adding = tuple(sorted(set(target) - set(current)))
        return cls(removing, adding, (*target, *removing))

    @classmethod
    def of(cls, partition: PartitionRegistration) -> ReassignmentReplicas:
        return cls(partition.removing_replicas, partition.adding_replicas, partition.replicas)

    @property
    def in_progress(self) -> bool:
        return bool(self.removing or self.adding)

    @property
    def original_replicas(self) -> list[int]:
        """The replicas before the reassignment (what cancelling it goes back to)."""
        return [r for r in self.replicas if r not in self.adding]

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]

    def completed(self, target_isr: Sequence[int]) -> tuple[list[int], list[int]] | None:
        """The replicas and ISR once the reassignment completes with ``target_isr``, or None.

        Kafka 4.4's rule (KAFKA-19975): every added replica must be in the ISR, the removed ones
        left out; a reassignment that shrinks the replicas also needs every remaining replica
        in it (so completing never shrinks the ISR), one that does not tolerates a remaining
        replica out of sync. Nothing may be left empty."""
        if not self.in_progress:
            return None
        isr = [r for r in target_isr if r not in self.removing]
        replicas = self.target_replicas
        if not isr or not replicas or not set(self.adding) <= set(isr):
            return None
        if len(self.adding) < len(self.removing) and not set(replicas) <= set(isr):
            return None
        return replicas, isr
