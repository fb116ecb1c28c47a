"""A broker's producer ids, drawn from blocks the controller hands out (Kafka's RPCProducerIdManager).

The controller gives each AllocateProducerIds request a block of its own (its ProducerIds
record moves the next block's start), so no two brokers ever hand out the same id. A broker
serves ids from its current block; once the ids handed out pass 90% of it, the next block is
asked for ahead of need (Kafka's prefetch rule), so that the current one rarely runs dry; when
it does and no next block has come, the caller waits for one (Kafka answers
COORDINATOR_LOAD_IN_PROGRESS then, and its client retries: the same outcome, one round trip
sooner). Plain state: the requests themselves are the ``ClusterController``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFETCH_FRACTION = 0.9  # Kafka's RPCProducerIdManager.PercentageBlockPrefetch (90)


@dataclass(frozen=True)
class ProducerIdBlock:
    first: int
    size: int

    @property
    def end(self) -> int:
        return self.first + self.size

    @property
    def prefetch_at(self) -> int:
        """The id whose hand-out makes the next block wanted."""
        return self.first + int(self.size * PREFETCH_FRACTION)


class ProducerIdBlocks:
    """The current block, the one fetched ahead of it, and the next id to hand out."""

    def __init__(self) -> None:
        self.current: ProducerIdBlock | None = None
        self.following: ProducerIdBlock | None = None
        self._next = 0

    def take(self) -> int | None:
        """The next id (moving on to the fetched block when the current one is used up), or
        None while no block has an id left."""
        if self.current is None or self._next >= self.current.end:
            if self.following is None:
                return None
            self.current, self.following = self.following, None
            self._next = self.current.first
        taken = self._next
        self._next += 1
        return taken

    def has_id(self) -> bool:
        current_left = self.current is not None and self._next < self.current.end
        return current_left or self.following is not None

    def wants_block(self) -> bool:
        """Whether a block should be asked for now: none is left, or the current one is past
        its prefetch point and none has been fetched ahead."""
        if self.following is not None:
            return False
        return self.current is None or self._next >= self.current.prefetch_at

    def add(self, block: ProducerIdBlock) -> None:
        """A block the controller gave: current if none has ids left, else the next one."""
        if self.current is None or self._next >= self.current.end:
            self.current, self._next = block, block.first
        else:
            self.following = block
