"""The broker's own settings that belong to no other area: the cluster id, topic creation and
deletion, fetch sessions."""

from __future__ import annotations

from kafkalike.configs.declaration import ConfigKey, ConfigType, at_least

BROKER = (
    ConfigKey(
        "cluster.id",
        ConfigType.STRING,
        None,
        "The cluster's id; unset means the id stored in the data directory, or a new random one.",
    ),
    ConfigKey(
        "num.partitions",
        ConfigType.INT,
        "1",
        "How many partitions a topic gets when it is created without a partition count, "
        "including topics created automatically.",
        at_least(1),
    ),
    ConfigKey(
        "auto.create.topics.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether a topic named in a Metadata request or by a producer is created when it does not exist.",
    ),
    ConfigKey(
        "delete.topic.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether DeleteTopics may remove topics; when false, deletion requests have no effect.",
    ),
    ConfigKey(
        "max.incremental.fetch.session.cache.slots",
        ConfigType.INT,
        "1000",
        "The most incremental fetch sessions the broker keeps at once.",
        at_least(0),
    ),
    ConfigKey(
        "max.request.partition.size.limit",
        ConfigType.INT,
        "2000",
        "The maximum number of partitions can be served in one request.",
        at_least(1),
    ),
    ConfigKey(
        "broker.rack",
        ConfigType.STRING,
        None,
        "The rack this broker stands in, so that partition placement spreads a topic's replicas over racks.",
    ),
)
