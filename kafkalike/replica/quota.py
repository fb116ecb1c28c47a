"""Replication throttles (KIP-73, Kafka's ReplicationQuotaManager): a byte rate for what a
leader sends to followers outside the ISR, and one for what a follower outside the ISR fetches,
each over only the replicas a topic's ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` names for this broker.

- A replica is throttled when its partition's topic lists ``*`` or ``partition:this-broker``;
  the lists come from the metadata image, parsed again only when the image's configs change.
- The rate is measured as Kafka's ``Rate`` over a ``SampledStat``: ``samples`` windows of
  ``sample_ms`` each, the oldest purged once ``samples * sample_ms`` old, and divided by the
  time since the oldest window began, never less than ``samples - 1`` whole windows (so a first
  burst is not measured over a few milliseconds).
- Exceeded when the measured rate is above the bound (Kafka's ``Quota.upperBound``); a leader
  then answers a throttled follower's partition with no records, a follower leaves it out of its
  next fetch. A replica in the ISR is never throttled.

No clock reads: every call takes ``now_ms``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
UNLIMITED = 2**63 - 1  # Kafka's QuotaConfig.QUOTA_BYTES_PER_SECOND_DEFAULT (Long.MAX_VALUE)
TOPIC_RESOURCE = 2
ALL_PARTITIONS: frozenset[int] | None = None  # a topic listing "*"


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a throttled-replicas value names for ``broker_id`` (Kafka's
    TopicConfigHandler.parseThrottledPartitions); None for ``*``, every partition."""
    value = value.strip()
    if value == "*":
        return ALL_PARTITIONS
    found = set()
    for item in value.split(","):
        parts = item.strip().split(":")
        if len(parts) == 2 and parts[1].strip() == str(broker_id):
            found.add(int(parts[0]))
    return frozenset(found)


class ReplicationQuota:
    """One direction's throttle on this broker: the throttled replicas and the measured rate."""

    def __init__(self, config_name: str, broker_id: int, samples: int = 11, sample_ms: int = 1000) -> None:
        self.config_name = config_name
        self.broker_id = broker_id
        self.samples = max(samples, 1)
        self.sample_ms = max(sample_ms, 1)
        self._windows: deque[list[int]] = deque()  # [start_ms, bytes], oldest first
        self._configs: object = None  # the image configs the throttled map was built from
        self._throttled: dict[str, frozenset[int] | None] = {}

    # -- which replicas ---------------------------------------------------------------------

    def update(self, configs: Mapping[Any, Mapping[str, str]]) -> None:
        """The throttled replicas from the image's configs (resource -> name -> value); nothing
        to do when they are the same mapping as last time."""
        if configs is self._configs:
            return
        self._configs = configs
        throttled: dict[str, frozenset[int] | None] = {}
        for (resource_type, name), values in configs.items():  # (type, name) resources
            value = values.get(self.config_name) if resource_type == TOPIC_RESOURCE else None
            if value:
                partitions = throttled_partitions(value, self.broker_id)
                if partitions is ALL_PARTITIONS or partitions:
                    throttled[name] = partitions
        self._throttled = throttled

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._throttled:
            return False
        partitions = self._throttled[topic]
        return partitions is None or partition in partitions

    @property
    def any_throttled(self) -> bool:
        return bool(self._throttled)

    # -- the rate -----------------------------------------------------------------------------

    def record(self, size: int, now_ms: int) -> None:
        """``size`` bytes of throttled replicas sent (leader) or fetched (follower)."""
        if size <= 0:
            return
        windows = self._windows
        if not windows or now_ms - windows[-1][0] >= self.sample_ms:
            windows.append([now_ms, 0])
            while len(windows) > self.samples:
                windows.popleft()
        windows[-1][1] += size

    def rate(self, now_ms: int) -> float:
        """Bytes a second, as Kafka's Rate measures it."""
        windows = self._windows
        expire_ms = self.samples * self.sample_ms
        while windows and now_ms - windows[0][0] >= expire_ms:
            windows.popleft()
        if not windows:
            return 0.0
        elapsed = now_ms - windows[0][0]
        full = elapsed // self.sample_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.sample_ms
        return sum(w[1] for w in windows) * 1000 / max(elapsed, 1)

    def is_exceeded(self, bound: int, now_ms: int) -> bool:
        return bound < UNLIMITED and self.rate(now_ms) > bound

    def throttles(self, topic: str, partition: int, in_sync: bool, bound: int, now_ms: int) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: a replica outside the ISR,
        throttled, while the rate is above ``bound``."""
        return not in_sync and self.is_throttled(topic, partition) and self.is_exceeded(bound, now_ms)
