"""The transaction coordinator, the __transaction_state topic and producer ids (Kafka's
TransactionStateManagerConfig, TransactionLogConfig)."""

from __future__ import annotations

from kafkalike.configs.declaration import ConfigKey, ConfigType, at_least

TXN = (
    ConfigKey(
        "transaction.state.log.num.partitions",
        ConfigType.INT,
        "50",
        "How many partitions the __transaction_state topic gets when it is created; not to be changed afterwards.",
        at_least(1),
    ),
    ConfigKey(
        "transaction.state.log.segment.bytes",
        ConfigType.INT,
        "104857600",
        "The segment size of the __transaction_state topic, kept small so it compacts and loads quickly.",
        at_least(1),
    ),
    ConfigKey(
        "transaction.state.log.replication.factor",
        ConfigType.SHORT,
        "3",
        "The replication factor the __transaction_state topic is created with (at most the brokers "
        "registered when it is created).",
        at_least(1),
    ),
    ConfigKey(
        "transaction.state.log.min.isr",
        ConfigType.INT,
        "2",
        "The min.insync.replicas of the __transaction_state topic (never more than its replicas).",
        at_least(1),
    ),
    ConfigKey(
        "transaction.max.timeout.ms",
        ConfigType.INT,
        "900000",
        "The longest transaction timeout, in milliseconds, a producer may ask for in InitProducerId.",
        at_least(1),
    ),
    ConfigKey(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        ConfigType.INT,
        "10000",
        "How often, in milliseconds, the transaction coordinator aborts transactions open longer than their timeout.",
        at_least(1),
    ),
    ConfigKey(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        ConfigType.INT,
        "3600000",
        "How often, in milliseconds, the transaction coordinator forgets transactional ids idle for "
        "longer than transactional.id.expiration.ms.",
        at_least(1),
    ),
    ConfigKey(
        "transactional.id.expiration.ms",
        ConfigType.INT,
        "604800000",
        "How long, in milliseconds, a transactional id may go without a transaction before the coordinator "
        "forgets it; ids with an ongoing transaction do not expire.",
        at_least(1),
    ),
    ConfigKey(
        "transaction.partition.verification.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether a partition leader checks with the transaction coordinator that a transactional producer "
        "added the partition to its transaction before accepting its first batch there.",
        dynamic=True,
    ),
    ConfigKey(
        "producer.id.expiration.ms",
        ConfigType.INT,
        "86400000",
        "How long, in milliseconds, a partition remembers an idle producer id before forgetting its "
        "sequence state; ids with an open transaction do not expire.",
        at_least(1),
        dynamic=True,
    ),
)
