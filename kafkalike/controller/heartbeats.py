"""The controller's soft state about brokers: last contact, metadata offset, controlled shutdown.

Kafka's ``BrokerHeartbeatManager`` and ``BrokerHeartbeatTracker`` (4.0). None of this is in the
metadata log: only the active controller has it, and a newly active controller starts every
registered broker's session at the moment it takes over (so fencing after a failover can take
up to one more session timeout).

- Contact times are kept by (broker id, broker epoch), recorded for every heartbeat received,
  before it is checked. A session is valid while ``now <= contact + session timeout``; an
  entry expires once ``now > contact + session timeout``.
- Per broker: fenced or not, the last metadata offset it reported, and the offset at which its
  controlled shutdown completes (-1 when not shutting down). A fenced broker leaves controlled
  shutdown. *Active* brokers are the unfenced ones not shutting down.
- The next state after a heartbeat (``next_state``) follows Kafka's table: a fenced broker is
  unfenced once it asks to be (``want_fence`` false) and has caught up with the offset of its
  RegisterBrokerRecord; any broker that asks to shut down while fenced, or while unfenced and
  leading nothing, shuts down now; an unfenced broker that leads partitions enters controlled
  shutdown, which completes when it leads nothing and every active broker has replayed the
  shutdown's records (the lowest active metadata offset reaches its shutdown offset).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

NO_OFFSET = -1
NO_ACTIVE_BROKER_OFFSET = 2**63 - 1  # Kafka's Long.MAX_VALUE: nothing to wait for


class BrokerControlState(Enum):
    """(fenced, in controlled shutdown, should shut down), as Kafka's BrokerControlState."""

    FENCED = (True, False, False)
    UNFENCED = (False, False, False)
    CONTROLLED_SHUTDOWN = (False, True, False)
    SHUTDOWN_NOW = (True, False, True)

    @property
    def fenced(self) -> bool:
        return self.value[0]

    @property
    def in_controlled_shutdown(self) -> bool:
        return self.value[1]

    @property
    def should_shut_down(self) -> bool:
        return self.value[2]


@dataclass
class BrokerHeartbeatState:
    broker_id: int
    fenced: bool
    metadata_offset: int = NO_OFFSET
    controlled_shutdown_offset: int = NO_OFFSET

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0

    @property
    def active(self) -> bool:
        return not self.fenced and not self.shutting_down


class BrokerHeartbeats:
    """Soft broker state of the active controller. Plain data; every call passes ``now_ms``."""

    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.brokers: dict[int, BrokerHeartbeatState] = {}
        self._contact_ms: dict[tuple[int, int], int] = {}

    # -- contact times (the tracker)

    def track(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        self._contact_ms[(broker_id, broker_epoch)] = now_ms

    def contact_ms(self, broker_id: int, broker_epoch: int) -> int | None:
        return self._contact_ms.get((broker_id, broker_epoch))

    def _expired(self, contact_ms: int, now_ms: int) -> bool:
        return now_ms > contact_ms and contact_ms + self.session_timeout_ms < now_ms

    def has_valid_session(self, broker_id: int, broker_epoch: int, now_ms: int) -> bool:
        contact = self._contact_ms.get((broker_id, broker_epoch))
        return contact is not None and not self._expired(contact, now_ms)

    def remove_expired(self, now_ms: int) -> tuple[int, int] | None:
        """Forget one expired session (the oldest) and return its (broker id, epoch)."""
        oldest = min(self._contact_ms.items(), key=lambda kv: (kv[1], kv[0]), default=None)
        if oldest is None or not self._expired(oldest[1], now_ms):
            return None
        del self._contact_ms[oldest[0]]
        return oldest[0]

    # -- per-broker state

    def register(self, broker_id: int, fenced: bool) -> None:
        """Start tracking a broker, or bring its fencing in line with its registration."""
        state = self.brokers.get(broker_id)
        if state is None:
            self.brokers[broker_id] = state = BrokerHeartbeatState(broker_id, fenced)
            self.touch(broker_id, fenced, NO_OFFSET)
        elif state.fenced != fenced:
            self.touch(broker_id, fenced, state.metadata_offset)
        else:
            self.touch(broker_id, fenced, NO_OFFSET)

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int) -> None:
        state = self.brokers[broker_id]
        state.fenced = fenced
        state.metadata_offset = metadata_offset
        if fenced:
            state.controlled_shutdown_offset = NO_OFFSET

    def fence(self, broker_id: int) -> None:
        state = self.brokers.get(broker_id)
        if state is not None:
            state.fenced = True

    def remove(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def lowest_active_offset(self) -> int:
        offsets = [s.metadata_offset for s in self.brokers.values() if s.active]
        return min(offsets, default=NO_ACTIVE_BROKER_OFFSET)

    def update_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        """The offset at which a broker's controlled shutdown completes (kept if already set)."""
        state = self.brokers[broker_id]
        if state.fenced:
            raise RuntimeError("Fenced brokers cannot enter controlled shutdown.")
        if state.controlled_shutdown_offset < 0:
            state.controlled_shutdown_offset = offset

    def current_state(self, broker_id: int) -> BrokerControlState:
        state = self.brokers[broker_id]
        if state.shutting_down:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.FENCED if state.fenced else BrokerControlState.UNFENCED

    def next_state(
        self,
        broker_id: int,
        *,
        want_fence: bool,
        want_shut_down: bool,
        current_metadata_offset: int,
        register_record_offset: int,
        has_leaderships: Callable[[], bool],
    ) -> tuple[BrokerControlState, BrokerControlState]:
        """(current, next) state of a broker that has just sent a heartbeat."""
        current = self.current_state(broker_id)
        S = BrokerControlState
        if current is S.FENCED:
            if want_shut_down:
                return current, S.SHUTDOWN_NOW
            if not want_fence and current_metadata_offset >= register_record_offset:
                return current, S.UNFENCED
            return current, S.FENCED
        if current is S.UNFENCED:
            if want_fence:
                return current, S.SHUTDOWN_NOW if want_shut_down else S.FENCED
            if want_shut_down:
                return current, S.CONTROLLED_SHUTDOWN if has_leaderships() else S.SHUTDOWN_NOW
            return current, S.UNFENCED
        # In controlled shutdown: done once it leads nothing and the active brokers caught up.
        if has_leaderships():
            return current, S.CONTROLLED_SHUTDOWN
        if self.brokers[broker_id].controlled_shutdown_offset <= self.lowest_active_offset():
            return current, S.SHUTDOWN_NOW
        return current, S.CONTROLLED_SHUTDOWN
