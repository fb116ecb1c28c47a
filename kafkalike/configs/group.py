"""The group coordinator and the __consumer_offsets topic (Kafka's GroupCoordinatorConfig), and
what those settings require of each other."""

from __future__ import annotations

from kafkalike.configs.declaration import INT_MAX, ConfigKey, ConfigType, NonEmptyList, OneOf, at_least

MIGRATION_POLICIES = ("DISABLED", "DOWNGRADE", "UPGRADE", "BIDIRECTIONAL")

GROUP = (
    ConfigKey(
        "offsets.topic.num.partitions",
        ConfigType.INT,
        "50",
        "How many partitions the __consumer_offsets topic gets when it is created; not to be changed afterwards.",
        at_least(1),
    ),
    ConfigKey(
        "offsets.topic.replication.factor",
        ConfigType.SHORT,
        "3",
        "The replication factor the __consumer_offsets topic is created with (at most the brokers "
        "registered when it is created).",
        at_least(1),
    ),
    ConfigKey(
        "offsets.topic.segment.bytes",
        ConfigType.INT,
        "104857600",
        "The segment size of the __consumer_offsets topic, kept small so it compacts and loads quickly.",
        at_least(1),
    ),
    ConfigKey(
        "offsets.retention.minutes",
        ConfigType.INT,
        "10080",
        "How long, in minutes, committed offsets are kept once their group is empty "
        "(or, for offsets committed without a group membership, after their last commit).",
        at_least(1),
    ),
    ConfigKey(
        "offsets.retention.check.interval.ms",
        ConfigType.LONG,
        "600000",
        "How often, in milliseconds, the coordinator looks for committed offsets past their retention.",
        at_least(1),
    ),
    ConfigKey(
        "offset.metadata.max.bytes",
        ConfigType.INT,
        "4096",
        "The largest metadata string a client may store with a committed offset.",
    ),
    ConfigKey(
        "group.initial.rebalance.delay.ms",
        ConfigType.INT,
        "3000",
        "How long, in milliseconds, the coordinator waits for more members to join a new group "
        "before its first rebalance.",
    ),
    ConfigKey(
        "group.min.session.timeout.ms",
        ConfigType.INT,
        "6000",
        "The shortest session timeout, in milliseconds, a group member may ask for.",
    ),
    ConfigKey(
        "group.max.session.timeout.ms",
        ConfigType.INT,
        "1800000",
        "The longest session timeout, in milliseconds, a group member may ask for.",
    ),
    ConfigKey(
        "group.max.size",
        ConfigType.INT,
        str(INT_MAX),
        "The most members one consumer group may have.",
        at_least(1),
    ),
    ConfigKey(
        "group.consumer.session.timeout.ms",
        ConfigType.INT,
        "45000",
        "How long, in milliseconds, a member of a consumer group (KIP-848 protocol) may go without "
        "heartbeating before it is fenced.",
        at_least(1),
    ),
    ConfigKey(
        "group.consumer.min.session.timeout.ms",
        ConfigType.INT,
        "45000",
        "The shortest session timeout, in milliseconds, of consumer groups (KIP-848 protocol); "
        "group.consumer.session.timeout.ms may not be below it.",
        at_least(1),
    ),
    ConfigKey(
        "group.consumer.max.session.timeout.ms",
        ConfigType.INT,
        "60000",
        "The longest session timeout, in milliseconds, of consumer groups (KIP-848 protocol); "
        "group.consumer.session.timeout.ms may not be above it.",
        at_least(1),
    ),
    ConfigKey(
        "group.consumer.heartbeat.interval.ms",
        ConfigType.INT,
        "5000",
        "The heartbeat interval, in milliseconds, the coordinator gives the members of consumer groups "
        "(KIP-848 protocol).",
        at_least(1),
    ),
    ConfigKey(
        "group.consumer.min.heartbeat.interval.ms",
        ConfigType.INT,
        "5000",
        "The shortest heartbeat interval, in milliseconds, of consumer groups (KIP-848 protocol); "
        "group.consumer.heartbeat.interval.ms may not be below it.",
        at_least(1),
    ),
    ConfigKey(
        "group.consumer.max.heartbeat.interval.ms",
        ConfigType.INT,
        "15000",
        "The longest heartbeat interval, in milliseconds, of consumer groups (KIP-848 protocol); "
        "group.consumer.heartbeat.interval.ms may not be above it.",
        at_least(1),
    ),
    ConfigKey(
        "group.consumer.max.size",
        ConfigType.INT,
        str(INT_MAX),
        "The most members one consumer group of the KIP-848 protocol may have; group.max.size limits classic groups.",
        at_least(1),
    ),
    ConfigKey(
        "group.consumer.assignors",
        ConfigType.LIST,
        "uniform,range",
        "The server-side assignors consumer groups may ask for, by name (uniform, range) or Kafka class name; "
        "the first is used when a member names none.",
        NonEmptyList(),
    ),
    ConfigKey(
        "group.consumer.migration.policy",
        ConfigType.STRING,
        "bidirectional",
        "Which conversions between classic and consumer groups with members are allowed: bidirectional, "
        "upgrade, downgrade or disabled; kafkalike converts only empty groups, whatever this says.",
        OneOf(MIGRATION_POLICIES, any_case=True),
    ),
)

# What Kafka's GroupCoordinatorConfig requires between the consumer group settings, in its order:
# (config, relation, other config).
CONSUMER_GROUP_BOUNDS = (
    ("group.consumer.max.heartbeat.interval.ms", ">=", "group.consumer.min.heartbeat.interval.ms"),
    ("group.consumer.heartbeat.interval.ms", ">=", "group.consumer.min.heartbeat.interval.ms"),
    ("group.consumer.heartbeat.interval.ms", "<=", "group.consumer.max.heartbeat.interval.ms"),
    ("group.consumer.max.session.timeout.ms", ">=", "group.consumer.min.session.timeout.ms"),
    ("group.consumer.session.timeout.ms", ">=", "group.consumer.min.session.timeout.ms"),
    ("group.consumer.session.timeout.ms", "<=", "group.consumer.max.session.timeout.ms"),
    ("group.consumer.heartbeat.interval.ms", "<", "group.consumer.session.timeout.ms"),
)
