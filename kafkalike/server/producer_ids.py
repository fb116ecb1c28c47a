"""A broker's producer ids, drawn from blocks the controller hands out (Kafka's RPCProducerIdManager).

The controller gives each AllocateProducerIds request a block of its own (its ProducerIds
record moves the next block's start), so no two brokers ever hand out the same id. As Kafka's
manager does:

- ``generate`` never waits. It hands out the next id of the current block; the id at 90% of
  the block asks for the next block in the background. A call that finds the current block
  used up moves on to the block fetched ahead, or, when none has come, asks for one (if no
  request is in flight and no backoff holds) and fails with COORDINATOR_LOAD_IN_PROGRESS, which
  clients retry (Kafka answers it rather than REQUEST_TIMED_OUT, which old clients take as fatal).
  The first call of a broker's life is such a call: there is no block before it.
- One request at a time. An error answer (or a block that does not follow the current one)
  holds the next request back 50 ms (Kafka's RETRY_BACKOFF_MS); no answer in time holds nothing
  back. A failed request is not retried by itself: the next call that wants a block asks again.

``ProducerIdManager`` is the pure state (the time passed in); ``ClusterController`` sends the
requests it asks for, from a task of its own (``run_producer_ids``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kafkalike.controller.api_error import ControllerError
from kafkalike.protocol.errors import ErrorCode
from kafkalike.txn.api import ProducerIdUnavailable

log = logging.getLogger("kafkalike.producer_ids")

PREFETCH_FRACTION = 0.9  # Kafka's RPCProducerIdManager.PID_PREFETCH_THRESHOLD
RETRY_BACKOFF_MS = 50  # Kafka's RPCProducerIdManager.RETRY_BACKOFF_MS
ITERATION_LIMIT = 3  # blocks moved through by one call at most (Kafka's ITERATION_LIMIT)
MAX_PRODUCER_ID = (1 << 63) - 1


@dataclass(frozen=True)
class ProducerIdBlock:
    first: int
    size: int

    @property
    def end(self) -> int:
        return self.first + self.size

    @property
    def last(self) -> int:
        return self.end - 1

    @property
    def prefetch_at(self) -> int:
        """The id whose hand-out asks for the next block."""
        return self.first + int(self.size * PREFETCH_FRACTION)


EMPTY_BLOCK = ProducerIdBlock(-1, 0)  # Kafka's ProducerIdsBlock.EMPTY: no id in it


class NoProducerId(ControllerError, ProducerIdUnavailable):
    """No id to hand out now (COORDINATOR_LOAD_IN_PROGRESS, retriable): a block is on its way."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "Producer ID block is full. Waiting for next block")


class ProducerIdManager:
    """See the module docstring."""

    def __init__(self) -> None:
        self.current = EMPTY_BLOCK
        self.following: ProducerIdBlock | None = None
        self._next = EMPTY_BLOCK.first
        self.request_in_flight = False
        self.request_wanted = False  # asked for by ``generate``, not yet taken by the sender
        self._backoff_until_ms: int | None = None
        self.requests_sent = 0

    def generate(self, now_ms: int) -> int:
        """The next id; raises NoProducerId (and asks for a block) when none is left."""
        for _ in range(ITERATION_LIMIT + 1):
            if self.current.size and self._next < self.current.end:
                taken, self._next = self._next, self._next + 1
                if taken == self.current.prefetch_at:
                    self._maybe_request_next_block(now_ms)
                return taken
            following, self.following = self.following, None
            if following is None:
                self._maybe_request_next_block(now_ms)
                raise NoProducerId()
            self.current, self._next = following, following.first
            self.request_in_flight, self._backoff_until_ms = False, None
        raise NoProducerId()

    def has_id(self) -> bool:
        return (self.current.size > 0 and self._next < self.current.end) or self.following is not None

    def _maybe_request_next_block(self, now_ms: int) -> None:
        if self.following is not None or self.request_in_flight:
            return
        if self._backoff_until_ms is not None and now_ms < self._backoff_until_ms:
            return
        self.request_in_flight = self.request_wanted = True

    def take_request(self) -> bool:
        """Whether the sender should send an AllocateProducerIds now (once per ask)."""
        wanted, self.request_wanted = self.request_wanted, False
        if wanted:
            self.requests_sent += 1
        return wanted

    def on_response(self, error: ErrorCode, first: int, size: int, now_ms: int) -> None:
        """The controller's answer: the next block, or (an error, a block that does not follow
        the current one) the next request held back RETRY_BACKOFF_MS."""
        if error is ErrorCode.NONE:
            if first <= self.current.last:
                log.error("producer id block %d+%d does not follow the current one %s", first, size, self.current)
            elif first < 0 or size < 0 or first > MAX_PRODUCER_ID - size:
                log.error("producer id block %d+%d holds invalid ids", first, size)
            else:
                self.following = ProducerIdBlock(first, size)
                return  # in flight until it is taken: no other request meanwhile
        elif error in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            log.warning("no producer id block yet (%s), trying again", error.name)
        else:
            log.error("the controller answered AllocateProducerIds with %s", error.name)
        self._backoff_until_ms = now_ms + RETRY_BACKOFF_MS
        self.request_in_flight = False

    def on_no_answer(self) -> None:
        """No answer in time: the next call that wants a block asks again at once."""
        log.warning("timed out when requesting AllocateProducerIds from the controller")
        self._backoff_until_ms = None
        self.request_in_flight = False
