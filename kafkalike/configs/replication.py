"""Replication (Kafka's ReplicationConfigs): replication factors, in-sync replicas, leader election
and the follower fetcher (server/replication.py reads the ``replica.*`` settings). What is declared
with Kafka's facts but not implemented yet says so (``ConfigKey.implemented``)."""

from __future__ import annotations

from kafkalike.configs.declaration import ConfigKey, ConfigType, Scope, at_least

REPLICATION = (
    ConfigKey(
        "default.replication.factor",
        ConfigType.INT,
        "1",
        "The replication factor of topics created automatically or with -1 as their replication factor.",
    ),
    ConfigKey(
        "min.insync.replicas",
        ConfigType.INT,
        "1",
        "How many in-sync replicas must have a write before a produce with acks=all succeeds; "
        "fewer make such produces fail.",
        at_least(1),
        scope=Scope.BOTH,
        dynamic=True,
    ),
    ConfigKey(
        "unclean.leader.election.enable",
        ConfigType.BOOLEAN,
        "false",
        "Whether a replica that is not in sync may become leader as a last resort, at the risk of losing data.",
        scope=Scope.BOTH,
        dynamic=True,
    ),
    ConfigKey(
        "unclean.leader.election.interval.ms",
        ConfigType.LONG,
        "300000",
        "How often, in milliseconds, the active controller checks for leaderless partitions of topics "
        "that allow unclean leader election, and elects a leader for them (an internal config in Kafka).",
        at_least(1),
        internal=True,  # not listed by DescribeConfigs, as Kafka's defineInternal
    ),
    ConfigKey(
        "replica.lag.time.max.ms",
        ConfigType.LONG,
        "30000",
        "How long, in milliseconds, a follower may go without fetching up to the leader's log end before "
        "it is removed from the in-sync replicas.",
    ),
    ConfigKey(
        "replica.socket.timeout.ms",
        ConfigType.INT,
        "30000",
        "How long, in milliseconds, a follower's fetch request may wait for its answer.",
    ),
    ConfigKey(
        "replica.fetch.max.bytes",
        ConfigType.INT,
        "1048576",
        "How many bytes a follower asks for per partition in one fetch; a larger first batch is still returned.",
        at_least(0),
    ),
    ConfigKey(
        "replica.fetch.wait.max.ms",
        ConfigType.INT,
        "500",
        "How long, in milliseconds, the leader may hold a follower's fetch while too little data is there.",
    ),
    ConfigKey(
        "replica.fetch.min.bytes",
        ConfigType.INT,
        "1",
        "How many bytes the leader waits for before it answers a follower's fetch.",
    ),
    ConfigKey(
        "replica.fetch.backoff.ms",
        ConfigType.INT,
        "1000",
        "How long, in milliseconds, a follower waits after a failed fetch before it fetches again.",
        at_least(0),
    ),
    ConfigKey(
        "replica.fetch.response.max.bytes",
        ConfigType.INT,
        "10485760",
        "How many bytes a follower asks for in one whole fetch answer.",
        at_least(0),
    ),
    ConfigKey(
        "num.replica.fetchers",
        ConfigType.INT,
        "1",
        "How many fetchers a broker runs per source broker to replicate its partitions.",
        at_least(1),
        dynamic=True,
        implemented=False,
    ),
    ConfigKey(
        "replica.high.watermark.checkpoint.interval.ms",
        ConfigType.LONG,
        "5000",
        "How often, in milliseconds, the high watermarks of the partitions are written to disk.",
    ),
    ConfigKey(
        "auto.leader.rebalance.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether the active controller gives each partition's leadership back to its preferred replica "
        "(the first of its replicas) once that replica is in sync again, checked every "
        "leader.imbalance.check.interval.seconds.",
    ),
    ConfigKey(
        "leader.imbalance.check.interval.seconds",
        ConfigType.LONG,
        "300",
        "How often, in seconds, the active controller looks for partitions not led by their preferred "
        "replica (auto.leader.rebalance.enable).",
        at_least(1),
    ),
    ConfigKey(
        "leader.replication.throttled.rate",
        ConfigType.LONG,
        str(2**63 - 1),
        "The most bytes a second a leader sends to followers outside the ISR of the replicas its topics list in "
        "leader.replication.throttled.replicas; set dynamically only, and best kept above 1 MB/s.",
        at_least(0),
        dynamic=True,
        listed_when_set=True,
    ),
    ConfigKey(
        "follower.replication.throttled.rate",
        ConfigType.LONG,
        str(2**63 - 1),
        "The most bytes a second a follower outside the ISR fetches for the replicas its topics list in "
        "follower.replication.throttled.replicas; set dynamically only, and best kept above 1 MB/s.",
        at_least(0),
        dynamic=True,
        listed_when_set=True,
    ),
    ConfigKey(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        ConfigType.LONG,
        str(2**63 - 1),
        "The most bytes a second of disk IO spent moving a replica between log directories of one broker; set "
        "dynamically only (kafkalike has one log directory per broker, so there is no such move to limit).",
        at_least(0),
        dynamic=True,
        listed_when_set=True,
    ),
    ConfigKey(
        "replication.quota.window.num",
        ConfigType.INT,
        "11",
        "How many samples the replication throttles' byte rates are measured over.",
        at_least(1),
    ),
    ConfigKey(
        "replication.quota.window.size.seconds",
        ConfigType.INT,
        "1",
        "How long, in seconds, each sample of the replication throttles' byte rates spans.",
        at_least(1),
    ),
    ConfigKey(
        "replica.selector.class",
        ConfigType.STRING,
        None,
        "The replica a leader tells a consumer (Fetch v11+) to read from; "
        "org.apache.kafka.common.replica.RackAwareReplicaSelector picks one in the consumer's client.rack.",
    ),
)
