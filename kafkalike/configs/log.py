"""The broker's log settings: where logs live, and the defaults of the topic configs that follow
them (``log.retention.ms`` for ``retention.ms``...). Dynamic where Kafka's DynamicLogConfig and
log cleaner reconfigure them at run time."""

from __future__ import annotations

from kafkalike.configs.declaration import LONG_MAX, Between, ConfigKey, ConfigType, NonEmptyList, OneOf, at_least

# The smallest topic segment.bytes (and broker log.segment.bytes) Kafka 4.1+ accepts (KIP-1030).
MIN_SEGMENT_BYTES = 1 << 20
CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
HOUR_MS, MINUTE_MS = 3_600_000, 60_000

LOG = (
    ConfigKey(
        "log.dirs",
        ConfigType.LIST,
        None,
        "Comma-separated directories holding the partition logs. Unset means log.dir is used.",
        NonEmptyList(),
    ),
    ConfigKey(
        "log.dir",
        ConfigType.LIST,
        "./kafkalike-data",
        "The log directory used when log.dirs is not set.",
        NonEmptyList(),
    ),
    ConfigKey(
        "log.retention.ms",
        ConfigType.LONG,
        None,
        "How long a log segment is kept, in milliseconds, before retention deletes it; -1 keeps data "
        "without a time limit. Unset means log.retention.minutes, or else log.retention.hours, decides.",
        dynamic=True,
        coarser=("log.retention.minutes", "log.retention.hours"),
    ),
    ConfigKey(
        "log.retention.minutes",
        ConfigType.INT,
        None,
        "Retention time in minutes, used when log.retention.ms is unset. Unset means log.retention.hours decides.",
        unit_ms=MINUTE_MS,
    ),
    ConfigKey(
        "log.retention.hours",
        ConfigType.INT,
        "168",
        "Retention time in hours, used when neither log.retention.ms nor log.retention.minutes is set.",
        unit_ms=HOUR_MS,
    ),
    ConfigKey(
        "log.retention.bytes",
        ConfigType.LONG,
        "-1",
        "The largest size a partition's log may reach before its oldest segments are deleted; -1 means no size limit.",
        dynamic=True,
    ),
    ConfigKey(
        "log.retention.check.interval.ms",
        ConfigType.LONG,
        "300000",
        "How often, in milliseconds, the broker looks for log segments that retention may delete.",
        at_least(1),
    ),
    ConfigKey(
        "log.segment.bytes",
        ConfigType.INT,
        "1073741824",
        "The size at which a log's active segment is closed and a new one started.",
        at_least(MIN_SEGMENT_BYTES),
        dynamic=True,
    ),
    ConfigKey(
        "log.roll.ms",
        ConfigType.LONG,
        None,
        "The longest time, in milliseconds, a segment stays active before a new one is rolled, even if it "
        "is not full. Unset means log.roll.hours decides.",
        dynamic=True,
        coarser=("log.roll.hours",),
    ),
    ConfigKey(
        "log.roll.hours",
        ConfigType.INT,
        "168",
        "The longest time, in hours, a segment stays active before a new one is rolled, "
        "used when log.roll.ms is unset.",
        at_least(1),
        unit_ms=HOUR_MS,
    ),
    ConfigKey(
        "log.roll.jitter.ms",
        ConfigType.LONG,
        None,
        "The most, in milliseconds, randomly taken off a segment's roll time so that many logs do not roll "
        "at once. Unset means log.roll.jitter.hours decides.",
        dynamic=True,
        coarser=("log.roll.jitter.hours",),
    ),
    ConfigKey(
        "log.roll.jitter.hours",
        ConfigType.INT,
        "0",
        "The roll-time jitter in hours, used when log.roll.jitter.ms is unset.",
        at_least(0),
        unit_ms=HOUR_MS,
    ),
    ConfigKey(
        "log.index.interval.bytes",
        ConfigType.INT,
        "4096",
        "How many bytes of records are appended between two entries of a segment's offset index.",
        at_least(0),
        dynamic=True,
    ),
    ConfigKey(
        "log.index.size.max.bytes",
        ConfigType.INT,
        "10485760",
        "The largest size of a segment's offset index; a full index makes the log roll a new segment.",
        at_least(4),
        dynamic=True,
    ),
    ConfigKey(
        "log.flush.interval.messages",
        ConfigType.LONG,
        str(LONG_MAX),
        "How many messages a partition accepts before its log is forced to disk with fsync. "
        "The default leaves flushing to the operating system.",
        at_least(1),
        dynamic=True,
    ),
    ConfigKey(
        "log.flush.interval.ms",
        ConfigType.LONG,
        None,
        "The longest time, in milliseconds, appended data may wait before the log is forced to disk. "
        "Unset means no time-based flush.",
        dynamic=True,
    ),
    ConfigKey(
        "log.flush.offset.checkpoint.interval.ms",
        ConfigType.INT,
        "60000",
        "How often, in milliseconds, the recovery point of every log (the offset below which it "
        "was flushed) is written to the log dir's checkpoint; a restart after a crash checks every "
        "segment after it. The log start offset checkpoint is written with it.",
        at_least(0),
    ),
    ConfigKey(
        "log.segment.delete.delay.ms",
        ConfigType.LONG,
        "60000",
        "How long a deleted segment's files stay on disk, renamed, before they are removed, "
        "so that reads already in progress can finish.",
        at_least(0),
        dynamic=True,
    ),
    ConfigKey(
        "log.cleanup.policy",
        ConfigType.LIST,
        "delete",
        "The default cleanup policy of topics: delete (drop old segments by time or size), "
        "compact (keep the latest record per key), or both.",
        OneOf(CLEANUP_POLICIES, distinct=True),
        dynamic=True,
    ),
    ConfigKey(
        "log.message.timestamp.type",
        ConfigType.STRING,
        "CreateTime",
        "The default timestamp type of topics: CreateTime keeps the producer's timestamps, "
        "LogAppendTime replaces them with the broker's time of append.",
        OneOf(TIMESTAMP_TYPES),
        dynamic=True,
    ),
    ConfigKey(
        "log.message.timestamp.before.max.ms",
        ConfigType.LONG,
        str(LONG_MAX),
        "The default of how far, in milliseconds, a CreateTime record's timestamp may lie before the "
        "broker's clock; records further in the past are rejected.",
        at_least(0),
        dynamic=True,
    ),
    ConfigKey(
        "log.message.timestamp.after.max.ms",
        ConfigType.LONG,
        "3600000",
        "The default of how far, in milliseconds, a CreateTime record's timestamp may lie after the "
        "broker's clock; records further in the future are rejected.",
        at_least(0),
        dynamic=True,
    ),
    ConfigKey(
        "log.preallocate",
        ConfigType.BOOLEAN,
        "false",
        "The default of whether a new segment file is allocated at its full size when it is created.",
        dynamic=True,
    ),
    ConfigKey(
        "log.local.retention.ms",
        ConfigType.LONG,
        "-2",
        "With tiered storage, how long segments stay on local disk (-2: as long as retention.ms).",
        at_least(-2),
        dynamic=True,
    ),
    ConfigKey(
        "log.local.retention.bytes",
        ConfigType.LONG,
        "-2",
        "With tiered storage, how many bytes stay on local disk (-2: as many as retention.bytes).",
        at_least(-2),
        dynamic=True,
    ),
    ConfigKey(
        "log.remote.copy.lag.bytes",
        ConfigType.LONG,
        "-1",
        "With tiered storage, the default of how many bytes may wait to be copied to remote storage (-1: no bound).",
        at_least(-1),
        dynamic=True,
    ),
    ConfigKey(
        "log.remote.copy.lag.ms",
        ConfigType.LONG,
        "0",
        "With tiered storage, the default of how long a segment may wait to be copied to remote storage.",
        at_least(-1),
        dynamic=True,
    ),
    ConfigKey(
        "log.cleaner.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether the log cleaner runs. Without it, topics with cleanup.policy=compact are never compacted "
        "and keep growing.",
    ),
    ConfigKey(
        "log.cleaner.backoff.ms",
        ConfigType.LONG,
        "15000",
        "How long, in milliseconds, the log cleaner waits before looking again when no log needs cleaning.",
        at_least(0),
        dynamic=True,
    ),
    ConfigKey(
        "log.cleaner.dedupe.buffer.size",
        ConfigType.LONG,
        "134217728",
        "The memory the log cleaner may use for its map of keys to latest offsets; "
        "a larger map lets one pass clean more of a log.",
        dynamic=True,
    ),
    ConfigKey(
        "log.cleaner.delete.retention.ms",
        ConfigType.LONG,
        "86400000",
        "The default of how long, in milliseconds, a tombstone stays in a compacted log after the cleaner "
        "first keeps it; readers starting from the beginning have this long to see the deletion.",
        at_least(0),
        dynamic=True,
    ),
    ConfigKey(
        "log.cleaner.min.compaction.lag.ms",
        ConfigType.LONG,
        "0",
        "The default of the shortest time, in milliseconds, a record stays uncompacted after it is written.",
        at_least(0),
        dynamic=True,
    ),
    ConfigKey(
        "log.cleaner.max.compaction.lag.ms",
        ConfigType.LONG,
        str(LONG_MAX),
        "The default of the longest time, in milliseconds, a record may wait before its log becomes "
        "eligible for compaction whatever its dirty ratio.",
        at_least(1),
        dynamic=True,
    ),
    ConfigKey(
        "log.cleaner.min.cleanable.ratio",
        ConfigType.DOUBLE,
        "0.5",
        "The default of the share of a compacted log that must be dirty (written since the last clean) "
        "before the cleaner compacts it.",
        Between(0.0, 1.0),
        dynamic=True,
    ),
    ConfigKey(
        "message.max.bytes",
        ConfigType.INT,
        "1048588",
        "The largest record batch the broker accepts, after compression; topics can override it with "
        "max.message.bytes.",
        at_least(0),
        dynamic=True,
    ),
)
