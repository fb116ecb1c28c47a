"""What the group and transaction coordinators share: shards per partition of their internal
topics, loaded and unloaded with leadership (the pure part of Kafka's CoordinatorRuntime; the
trio driver is ``kafkalike.server.coordinator_runtime``)."""

from kafkalike.coordinator.shards import NotActive, Shard, ShardSlot, ShardState, ShardTable

__all__ = ["NotActive", "Shard", "ShardSlot", "ShardState", "ShardTable"]
