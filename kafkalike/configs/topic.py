"""Topic configs: what CreateTopics and AlterConfigs may set on a topic, and what an unset one
follows (its broker synonym: ``retention.ms`` <- ``log.retention.ms``). A topic config's
``default`` is Kafka's topic default, which a topic gets only where the broker synonym has no value
(``flush.ms`` while ``log.flush.interval.ms`` is unset). The compression configs have one name on
the broker and the topic (scope BOTH)."""

from __future__ import annotations

from kafkalike.configs.declaration import (
    LONG_MAX,
    Between,
    BetweenOr,
    ConfigKey,
    ConfigType,
    OneOf,
    RefusedWhenTrue,
    Scope,
    ThrottledReplicas,
    Validator,
    at_least,
)
from kafkalike.configs.log import CLEANUP_POLICIES, MIN_SEGMENT_BYTES, TIMESTAMP_TYPES

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
# Kafka's internal topic config for tiny segments in tests (4.1+); when set it wins over segment.bytes.
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"
# The smallest segment a log is built with: segment.bytes' floor before Kafka 4.1.
SMALLEST_SEGMENT_BYTES = 14


def _topic(
    name: str,
    type_: ConfigType,
    default: str | None,
    doc: str,
    validator: Validator | None = None,
    *,
    follows: str | None,
) -> ConfigKey:
    """A topic-only config; ``follows``: its broker synonym, if it has one."""
    return ConfigKey(name, type_, default, doc, validator, scope=Scope.TOPIC, broker_synonym=follows)


TOPIC = (
    ConfigKey(
        "compression.type",
        ConfigType.STRING,
        "producer",
        "The codec batches are stored with: producer keeps the producer's codec; uncompressed, gzip, snappy, "
        "lz4 or zstd recompress to that codec.",
        OneOf(COMPRESSION_TYPES),
        scope=Scope.BOTH,
        dynamic=True,
    ),
    ConfigKey(
        "compression.gzip.level",
        ConfigType.INT,
        "-1",
        "The gzip level used when the broker recompresses batches with gzip (-1: the codec's default).",
        BetweenOr(1, 9, -1),
        scope=Scope.BOTH,
        dynamic=True,
    ),
    ConfigKey(
        "compression.lz4.level",
        ConfigType.INT,
        "9",
        "The lz4 level used when the broker recompresses batches with lz4.",
        Between(1, 17),
        scope=Scope.BOTH,
        dynamic=True,
    ),
    ConfigKey(
        "compression.zstd.level",
        ConfigType.INT,
        "3",
        "The zstd level used when the broker recompresses batches with zstd.",
        Between(-131072, 22),
        scope=Scope.BOTH,
        dynamic=True,
    ),
    _topic(
        "follower.replication.throttled.replicas",
        ConfigType.LIST,
        "",
        "Replicas whose follower fetching is throttled during reassignment (partition:broker pairs, or *).",
        ThrottledReplicas(),
        follows=None,
    ),
    _topic(
        "leader.replication.throttled.replicas",
        ConfigType.LIST,
        "",
        "Replicas whose leader-side replication is throttled during reassignment (partition:broker pairs, or *).",
        ThrottledReplicas(),
        follows=None,
    ),
    _topic(
        "local.retention.bytes",
        ConfigType.LONG,
        "-2",
        "With tiered storage, bytes kept on local disk per partition (-2: retention.bytes).",
        at_least(-2),
        follows="log.local.retention.bytes",
    ),
    _topic(
        "local.retention.ms",
        ConfigType.LONG,
        "-2",
        "With tiered storage, how long data stays on local disk (-2: retention.ms).",
        at_least(-2),
        follows="log.local.retention.ms",
    ),
    _topic(
        "remote.copy.lag.bytes",
        ConfigType.LONG,
        "-1",
        "With tiered storage, how many bytes of a partition may wait to be copied to remote storage "
        "(-1: no bound); kafkalike has no tiered storage.",
        at_least(-1),
        follows="log.remote.copy.lag.bytes",
    ),
    _topic(
        "remote.copy.lag.ms",
        ConfigType.LONG,
        "0",
        "With tiered storage, how long a segment may wait to be copied to remote storage; kafkalike has no "
        "tiered storage.",
        at_least(-1),
        follows="log.remote.copy.lag.ms",
    ),
    _topic(
        "remote.log.copy.disable",
        ConfigType.BOOLEAN,
        "false",
        "With tiered storage, stop copying new segments to remote storage.",
        follows=None,
    ),
    _topic(
        "remote.log.delete.on.disable",
        ConfigType.BOOLEAN,
        "false",
        "With tiered storage, delete the remote data when tiering is turned off.",
        follows=None,
    ),
    _topic(
        "remote.storage.enable",
        ConfigType.BOOLEAN,
        "false",
        "Whether this topic's segments are copied to tiered (remote) storage; kafkalike has no tiered storage.",
        # As a Kafka broker with remote.log.storage.system.enable=false answers.
        RefusedWhenTrue(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
        ),
        follows=None,
    ),
    _topic(
        "cleanup.policy",
        ConfigType.LIST,
        "delete",
        "What happens to old data: delete drops whole segments past retention.ms or retention.bytes, "
        "compact keeps only the latest record of each key; both may be listed.",
        OneOf(CLEANUP_POLICIES),
        follows="log.cleanup.policy",
    ),
    _topic(
        "errors.deadletterqueue.group.enable",
        ConfigType.BOOLEAN,
        "false",
        "Whether share groups may write undeliverable records of this topic to a dead-letter queue; "
        "kafkalike serves no share groups.",
        follows=None,
    ),
    ConfigKey(
        "max.decompressed.message.bytes",
        ConfigType.INT,
        "2147483639",
        "The largest a record batch may be once decompressed (Kafka 4.4); accepted and reported, not yet "
        "enforced by kafkalike beyond its own decompression bound.",
        Between(1, 2147483639),
        scope=Scope.BOTH,
        dynamic=True,
    ),
    _topic(
        "delete.retention.ms",
        ConfigType.LONG,
        "86400000",
        "How long, in milliseconds, a tombstone stays in a compacted log after the cleaner first keeps it; "
        "a reader starting from the beginning has this long to see the deletion.",
        at_least(0),
        follows="log.cleaner.delete.retention.ms",
    ),
    _topic(
        "file.delete.delay.ms",
        ConfigType.LONG,
        "60000",
        "How long, in milliseconds, a deleted segment's files stay on disk before they are removed.",
        at_least(0),
        follows="log.segment.delete.delay.ms",
    ),
    _topic(
        "flush.messages",
        ConfigType.LONG,
        str(LONG_MAX),
        "How many messages are appended between two forced flushes (fsync) of the log. "
        "The default leaves flushing to the operating system.",
        at_least(1),
        follows="log.flush.interval.messages",
    ),
    _topic(
        "flush.ms",
        ConfigType.LONG,
        str(LONG_MAX),
        "The longest time, in milliseconds, appended data may wait before the log is forced to disk. "
        "The default leaves flushing to the operating system.",
        at_least(0),
        follows="log.flush.interval.ms",
    ),
    _topic(
        "index.interval.bytes",
        ConfigType.INT,
        "4096",
        "How many bytes of records are appended between two offset index entries; "
        "denser entries make lookups land closer but the index larger.",
        at_least(0),
        follows="log.index.interval.bytes",
    ),
    _topic(
        "max.compaction.lag.ms",
        ConfigType.LONG,
        str(LONG_MAX),
        "The longest time, in milliseconds, a record may stay uncompacted: after it the log is cleaned "
        "whatever its dirty ratio. Only for compacted topics.",
        at_least(1),
        follows="log.cleaner.max.compaction.lag.ms",
    ),
    _topic(
        "max.message.bytes",
        ConfigType.INT,
        "1048588",
        "The largest record batch, after compression, this topic accepts; larger ones are rejected "
        "with MESSAGE_TOO_LARGE.",
        at_least(0),
        follows="message.max.bytes",
    ),
    _topic(
        "message.timestamp.type",
        ConfigType.STRING,
        "CreateTime",
        "CreateTime keeps the timestamps producers set; LogAppendTime stamps records with the broker's time of append.",
        OneOf(TIMESTAMP_TYPES),
        follows="log.message.timestamp.type",
    ),
    _topic(
        "message.timestamp.before.max.ms",
        ConfigType.LONG,
        str(LONG_MAX),
        "How far, in milliseconds, a record's timestamp may lie before the broker's clock under CreateTime; "
        "records older than that are rejected.",
        at_least(0),
        follows="log.message.timestamp.before.max.ms",
    ),
    _topic(
        "message.timestamp.after.max.ms",
        ConfigType.LONG,
        "3600000",
        "How far, in milliseconds, a record's timestamp may lie after the broker's clock under CreateTime; "
        "records further in the future are rejected.",
        at_least(0),
        follows="log.message.timestamp.after.max.ms",
    ),
    _topic(
        "min.cleanable.dirty.ratio",
        ConfigType.DOUBLE,
        "0.5",
        "The share of a compacted log that must be dirty (written since the last clean) before the cleaner "
        "compacts it; lower values clean more often and leave fewer duplicates.",
        Between(0.0, 1.0),
        follows="log.cleaner.min.cleanable.ratio",
    ),
    _topic(
        "min.compaction.lag.ms",
        ConfigType.LONG,
        "0",
        "The shortest time, in milliseconds, a record stays uncompacted after it is written. "
        "Only for compacted topics.",
        at_least(0),
        follows="log.cleaner.min.compaction.lag.ms",
    ),
    _topic(
        "preallocate",
        ConfigType.BOOLEAN,
        "false",
        "Whether a new segment file is allocated at its full size when it is created.",
        follows="log.preallocate",
    ),
    _topic(
        "retention.bytes",
        ConfigType.LONG,
        "-1",
        "The largest size, in bytes, one partition's log may reach before its oldest segments are deleted "
        "(delete policy); -1 means no size limit.",
        follows="log.retention.bytes",
    ),
    _topic(
        "retention.ms",
        ConfigType.LONG,
        "604800000",
        "How long, in milliseconds, records are kept before their segment is deleted (delete policy); "
        "-1 means no time limit.",
        at_least(-1),
        follows="log.retention.ms",
    ),
    _topic(
        "segment.bytes",
        ConfigType.INT,
        "1073741824",
        "The size at which the active segment is closed and a new one begun. Retention and compaction "
        "work a whole segment at a time.",
        at_least(MIN_SEGMENT_BYTES),  # 14 before Kafka 4.1 (KIP-1030)
        follows="log.segment.bytes",
    ),
    _topic(
        "segment.index.bytes",
        ConfigType.INT,
        "10485760",
        "The largest size, in bytes, of a segment's offset index; a full index rolls a new segment.",
        at_least(4),
        follows="log.index.size.max.bytes",
    ),
    _topic(
        "segment.jitter.ms",
        ConfigType.LONG,
        "0",
        "The most, in milliseconds, randomly taken off segment.ms so that many logs do not roll at once.",
        at_least(0),
        follows="log.roll.jitter.ms",
    ),
    _topic(
        "segment.ms",
        ConfigType.LONG,
        "604800000",
        "The longest time, in milliseconds, a segment stays active before a new one is rolled, even if it "
        "is not full, so that retention and compaction can reach its data.",
        at_least(1),
        follows="log.roll.ms",
    ),
    # Kafka's internal topic configs (4.1+): accepted in CreateTopics and AlterConfigs like the others,
    # listed by DescribeConfigs and CreateTopics only for a topic that sets them, with no broker default.
    ConfigKey(
        INTERNAL_SEGMENT_BYTES,
        ConfigType.INT,
        None,
        "For tests only: the segment size in bytes, below segment.bytes' floor of 1 MiB; when set it "
        "wins over segment.bytes.",
        # Kafka sets none; kafkalike keeps segment.bytes' old floor, below which no log is built.
        at_least(SMALLEST_SEGMENT_BYTES),
        scope=Scope.TOPIC,
        internal=True,
    ),
)
