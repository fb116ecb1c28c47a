"""Broker configuration with Apache Kafka's names, types and defaults.

Values come from (lowest to highest): the defaults below, a ``server.properties`` file, and
``--override key=value``. Topic-level configs default to the matching broker config
(``retention.ms`` <- ``log.retention.ms``...), which is what DescribeConfigs reports as the source.
Every config carries a short description, which DescribeConfigs v3+ returns as its documentation.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import dropwhile
from pathlib import Path

from kafkalike.group.assignors import assignors_from_config
from kafkalike.log.config import INTERNAL_SEGMENT_BYTES, MIN_SEGMENT_BYTES
from kafkalike.server.connection_configs import socket_server_problem

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# DescribeConfigs config_source values.
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 4, 5


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # boolean, int, long, double, string, list, password, class, short
    default: str | None
    read_only: bool = True
    doc: str = ""  # what DescribeConfigs v3+ returns as the config's documentation


_BROKER_DEFS = [
    ConfigDef("node.id", "int", "1", doc="This node's id, the one Metadata lists as the broker and controller."),
    ConfigDef(
        "process.roles",
        "list",
        "broker,controller",
        doc="The roles this process plays; kafkalike always acts as both broker and controller.",
    ),
    ConfigDef(
        "listeners",
        "string",
        "PLAINTEXT://127.0.0.1:9092",
        doc="The addresses the broker binds and accepts connections on, as NAME://host:port.",
    ),
    ConfigDef(
        "advertised.listeners",
        "string",
        None,
        doc="The addresses given to clients in Metadata answers, when they differ from the bound listeners. "
        "Unset means clients are told the listener address.",
    ),
    ConfigDef(
        "log.dirs",
        "string",
        None,
        doc="Comma-separated directories holding the partition logs. Unset means log.dir is used.",
    ),
    ConfigDef("log.dir", "string", "./kafkalike-data", doc="The log directory used when log.dirs is not set."),
    ConfigDef(
        "num.partitions",
        "int",
        "1",
        doc="How many partitions a topic gets when it is created without a partition count, "
        "including topics created automatically.",
    ),
    ConfigDef(
        "default.replication.factor",
        "int",
        "1",
        doc="The replication factor of topics created automatically or with -1 as their replication factor.",
    ),
    ConfigDef(
        "auto.create.topics.enable",
        "boolean",
        "true",
        doc="Whether a topic named in a Metadata request or by a producer is created when it does not exist.",
    ),
    ConfigDef(
        "delete.topic.enable",
        "boolean",
        "true",
        doc="Whether DeleteTopics may remove topics; when false, deletion requests have no effect.",
    ),
    ConfigDef(
        "log.retention.ms",
        "long",
        None,
        read_only=False,
        doc="How long a log segment is kept, in milliseconds, before retention deletes it; -1 keeps data "
        "without a time limit. Unset means log.retention.minutes, or else log.retention.hours, decides.",
    ),
    ConfigDef(
        "log.retention.minutes",
        "int",
        None,
        doc="Retention time in minutes, used when log.retention.ms is unset. Unset means log.retention.hours decides.",
    ),
    ConfigDef(
        "log.retention.hours",
        "int",
        "168",
        doc="Retention time in hours, used when neither log.retention.ms nor log.retention.minutes is set.",
    ),
    ConfigDef(
        "log.retention.bytes",
        "long",
        "-1",
        read_only=False,
        doc="The largest size a partition's log may reach before its oldest segments are deleted; "
        "-1 means no size limit.",
    ),
    ConfigDef(
        "log.retention.check.interval.ms",
        "long",
        "300000",
        doc="How often, in milliseconds, the broker looks for log segments that retention may delete.",
    ),
    ConfigDef(
        "log.segment.bytes",
        "int",
        "1073741824",
        read_only=False,
        doc="The size at which a log's active segment is closed and a new one started.",
    ),
    ConfigDef(
        "log.roll.ms",
        "long",
        None,
        read_only=False,
        doc="The longest time, in milliseconds, a segment stays active before a new one is rolled, even if it "
        "is not full. Unset means log.roll.hours decides.",
    ),
    ConfigDef(
        "log.roll.hours",
        "int",
        "168",
        doc="The longest time, in hours, a segment stays active before a new one is rolled, "
        "used when log.roll.ms is unset.",
    ),
    ConfigDef(
        "log.roll.jitter.ms",
        "long",
        None,
        read_only=False,
        doc="The most, in milliseconds, randomly taken off a segment's roll time so that many logs do not roll "
        "at once. Unset means log.roll.jitter.hours decides.",
    ),
    ConfigDef(
        "log.roll.jitter.hours",
        "int",
        "0",
        doc="The roll-time jitter in hours, used when log.roll.jitter.ms is unset.",
    ),
    ConfigDef(
        "log.index.interval.bytes",
        "int",
        "4096",
        read_only=False,
        doc="How many bytes of records are appended between two entries of a segment's offset index.",
    ),
    ConfigDef(
        "log.index.size.max.bytes",
        "int",
        "10485760",
        read_only=False,
        doc="The largest size of a segment's offset index; a full index makes the log roll a new segment.",
    ),
    ConfigDef(
        "log.flush.interval.messages",
        "long",
        str(LONG_MAX),
        read_only=False,
        doc="How many messages a partition accepts before its log is forced to disk with fsync. "
        "The default leaves flushing to the operating system.",
    ),
    ConfigDef(
        "log.flush.interval.ms",
        "long",
        None,
        read_only=False,
        doc="The longest time, in milliseconds, appended data may wait before the log is forced to disk. "
        "Unset means no time-based flush.",
    ),
    ConfigDef(
        "log.flush.offset.checkpoint.interval.ms",
        "int",
        "60000",
        doc="How often, in milliseconds, the recovery point of every log (the offset below which it "
        "was flushed) is written to the log dir's checkpoint; a restart after a crash checks every "
        "segment after it. The log start offset checkpoint is written with it.",
    ),
    ConfigDef(
        "log.segment.delete.delay.ms",
        "long",
        "60000",
        read_only=False,
        doc="How long a deleted segment's files stay on disk, renamed, before they are removed, "
        "so that reads already in progress can finish.",
    ),
    ConfigDef(
        "log.cleanup.policy",
        "list",
        "delete",
        read_only=False,
        doc="The default cleanup policy of topics: delete (drop old segments by time or size), "
        "compact (keep the latest record per key), or both.",
    ),
    ConfigDef(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        read_only=False,
        doc="The default timestamp type of topics: CreateTime keeps the producer's timestamps, "
        "LogAppendTime replaces them with the broker's time of append.",
    ),
    ConfigDef(
        "log.message.timestamp.before.max.ms",
        "long",
        str(LONG_MAX),
        read_only=False,
        doc="The default of how far, in milliseconds, a CreateTime record's timestamp may lie before the "
        "broker's clock; records further in the past are rejected.",
    ),
    ConfigDef(
        "log.message.timestamp.after.max.ms",
        "long",
        "3600000",
        read_only=False,
        doc="The default of how far, in milliseconds, a CreateTime record's timestamp may lie after the "
        "broker's clock; records further in the future are rejected.",
    ),
    ConfigDef(
        "log.preallocate",
        "boolean",
        "false",
        read_only=False,
        doc="The default of whether a new segment file is allocated at its full size when it is created.",
    ),
    ConfigDef(
        "compression.gzip.level",
        "int",
        "-1",
        read_only=False,
        doc="The gzip level used when the broker itself compresses with gzip (-1: the codec's default).",
    ),
    ConfigDef(
        "compression.lz4.level",
        "int",
        "9",
        read_only=False,
        doc="The lz4 level used when the broker itself compresses with lz4.",
    ),
    ConfigDef(
        "compression.zstd.level",
        "int",
        "3",
        read_only=False,
        doc="The zstd level used when the broker itself compresses with zstd.",
    ),
    ConfigDef(
        "log.local.retention.ms",
        "long",
        "-2",
        read_only=False,
        doc="With tiered storage, how long segments stay on local disk (-2: as long as retention.ms).",
    ),
    ConfigDef(
        "log.local.retention.bytes",
        "long",
        "-2",
        read_only=False,
        doc="With tiered storage, how many bytes stay on local disk (-2: as many as retention.bytes).",
    ),
    ConfigDef(
        "log.cleaner.enable",
        "boolean",
        "true",
        doc="Whether the log cleaner runs. Without it, topics with cleanup.policy=compact are never compacted "
        "and keep growing.",
    ),
    ConfigDef(
        "log.cleaner.backoff.ms",
        "long",
        "15000",
        read_only=False,
        doc="How long, in milliseconds, the log cleaner waits before looking again when no log needs cleaning.",
    ),
    ConfigDef(
        "log.cleaner.dedupe.buffer.size",
        "long",
        "134217728",
        read_only=False,
        doc="The memory the log cleaner may use for its map of keys to latest offsets; "
        "a larger map lets one pass clean more of a log.",
    ),
    ConfigDef(
        "log.cleaner.delete.retention.ms",
        "long",
        "86400000",
        read_only=False,
        doc="The default of how long, in milliseconds, a tombstone stays in a compacted log after the cleaner "
        "first keeps it; readers starting from the beginning have this long to see the deletion.",
    ),
    ConfigDef(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        "0",
        read_only=False,
        doc="The default of the shortest time, in milliseconds, a record stays uncompacted after it is written.",
    ),
    ConfigDef(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        str(LONG_MAX),
        read_only=False,
        doc="The default of the longest time, in milliseconds, a record may wait before its log becomes "
        "eligible for compaction whatever its dirty ratio.",
    ),
    ConfigDef(
        "log.cleaner.min.cleanable.ratio",
        "double",
        "0.5",
        read_only=False,
        doc="The default of the share of a compacted log that must be dirty (written since the last clean) "
        "before the cleaner compacts it.",
    ),
    ConfigDef(
        "message.max.bytes",
        "int",
        "1048588",
        read_only=False,
        doc="The largest record batch the broker accepts, after compression; topics can override it with "
        "max.message.bytes.",
    ),
    ConfigDef(
        "min.insync.replicas",
        "int",
        "1",
        read_only=False,
        doc="The default number of in-sync replicas that must have a write before an acks=all produce succeeds.",
    ),
    ConfigDef(
        "unclean.leader.election.enable",
        "boolean",
        "false",
        read_only=False,
        doc="The default of whether a replica that is not in sync may become leader as a last resort, "
        "at the risk of losing data.",
    ),
    ConfigDef(
        "compression.type",
        "string",
        "producer",
        read_only=False,
        doc="The default compression of stored batches: producer keeps the producer's codec; uncompressed, "
        "gzip, snappy, lz4 or zstd recompress to that codec.",
    ),
    ConfigDef(
        "socket.request.max.bytes",
        "int",
        "104857600",
        doc="The largest request, in bytes, the broker reads from a connection; a larger one closes the connection.",
    ),
    ConfigDef(
        "queued.max.request.bytes",
        "long",
        "-1",
        doc="How many bytes of requests may be in flight (being received or handled) across all connections "
        "before the broker stops reading from them until memory frees; -1 means no limit. At least "
        "socket.request.max.bytes when set.",
    ),
    ConfigDef(
        "max.connections",
        "int",
        str(INT_MAX),
        read_only=False,
        doc="The most connections the broker has at once; further ones wait, not accepted, until one closes.",
    ),
    ConfigDef(
        "max.connections.per.ip",
        "int",
        str(INT_MAX),
        read_only=False,
        doc="The most connections from one IP address; a further one from that address is closed at once. "
        "May be 0 only if max.connections.per.ip.overrides is set.",
    ),
    ConfigDef(
        "max.connections.per.ip.overrides",
        "string",
        "",
        read_only=False,
        doc="Per-address exceptions to max.connections.per.ip, as comma-separated host:count pairs, for example "
        '"hostName:100,127.0.0.1:200".',
    ),
    ConfigDef(
        "connections.max.idle.ms",
        "long",
        "600000",
        doc="How long, in milliseconds, a connection may go without a request before the broker closes it; "
        "a negative value never closes idle connections.",
    ),
    ConfigDef(
        "offsets.topic.num.partitions",
        "int",
        "50",
        doc="How many partitions the __consumer_offsets topic gets when it is created; not to be changed afterwards.",
    ),
    ConfigDef(
        "offsets.topic.replication.factor",
        "short",
        "1",
        doc="The replication factor the __consumer_offsets topic is created with.",
    ),
    ConfigDef(
        "transaction.state.log.num.partitions",
        "int",
        "50",
        doc="How many partitions the __transaction_state topic gets when it is created; not to be changed afterwards.",
    ),
    ConfigDef(
        "group.initial.rebalance.delay.ms",
        "int",
        "3000",
        doc="How long, in milliseconds, the coordinator waits for more members to join a new group "
        "before its first rebalance.",
    ),
    ConfigDef(
        "group.min.session.timeout.ms",
        "int",
        "6000",
        doc="The shortest session timeout, in milliseconds, a group member may ask for.",
    ),
    ConfigDef(
        "group.max.session.timeout.ms",
        "int",
        "1800000",
        doc="The longest session timeout, in milliseconds, a group member may ask for.",
    ),
    ConfigDef(
        "group.max.size",
        "int",
        "2147483647",
        doc="The most members one consumer group may have.",
    ),
    ConfigDef(
        "group.consumer.session.timeout.ms",
        "int",
        "45000",
        doc="How long, in milliseconds, a member of a consumer group (KIP-848 protocol) may go without "
        "heartbeating before it is fenced.",
    ),
    ConfigDef(
        "group.consumer.min.session.timeout.ms",
        "int",
        "45000",
        doc="The shortest session timeout, in milliseconds, of consumer groups (KIP-848 protocol); "
        "group.consumer.session.timeout.ms may not be below it.",
    ),
    ConfigDef(
        "group.consumer.max.session.timeout.ms",
        "int",
        "60000",
        doc="The longest session timeout, in milliseconds, of consumer groups (KIP-848 protocol); "
        "group.consumer.session.timeout.ms may not be above it.",
    ),
    ConfigDef(
        "group.consumer.heartbeat.interval.ms",
        "int",
        "5000",
        doc="The heartbeat interval, in milliseconds, the coordinator gives the members of consumer groups "
        "(KIP-848 protocol).",
    ),
    ConfigDef(
        "group.consumer.min.heartbeat.interval.ms",
        "int",
        "5000",
        doc="The shortest heartbeat interval, in milliseconds, of consumer groups (KIP-848 protocol); "
        "group.consumer.heartbeat.interval.ms may not be below it.",
    ),
    ConfigDef(
        "group.consumer.max.heartbeat.interval.ms",
        "int",
        "15000",
        doc="The longest heartbeat interval, in milliseconds, of consumer groups (KIP-848 protocol); "
        "group.consumer.heartbeat.interval.ms may not be above it.",
    ),
    ConfigDef(
        "group.consumer.max.size",
        "int",
        "2147483647",
        doc="The most members one consumer group of the KIP-848 protocol may have; "
        "group.max.size limits classic groups.",
    ),
    ConfigDef(
        "group.consumer.assignors",
        "list",
        "uniform,range",
        doc="The server-side assignors consumer groups may ask for, by name (uniform, range) or Kafka class name; "
        "the first is used when a member names none.",
    ),
    ConfigDef(
        "group.consumer.migration.policy",
        "string",
        "bidirectional",
        doc="Which conversions between classic and consumer groups with members are allowed: bidirectional, "
        "upgrade, downgrade or disabled; kafkalike converts only empty groups, whatever this says.",
    ),
    ConfigDef(
        "offsets.retention.minutes",
        "int",
        "10080",
        doc="How long, in minutes, committed offsets are kept once their group is empty "
        "(or, for offsets committed without a group membership, after their last commit).",
    ),
    ConfigDef(
        "offsets.retention.check.interval.ms",
        "long",
        "600000",
        doc="How often, in milliseconds, the coordinator looks for committed offsets past their retention.",
    ),
    ConfigDef(
        "offsets.topic.segment.bytes",
        "int",
        "104857600",
        doc="The segment size of the __consumer_offsets topic, kept small so it compacts and loads quickly.",
    ),
    ConfigDef(
        "offset.metadata.max.bytes",
        "int",
        "4096",
        doc="The largest metadata string a client may store with a committed offset.",
    ),
    ConfigDef(
        "transaction.max.timeout.ms",
        "int",
        "900000",
        doc="The longest transaction timeout, in milliseconds, a producer may ask for in InitProducerId.",
    ),
    ConfigDef(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        "10000",
        doc="How often, in milliseconds, the transaction coordinator aborts transactions open longer than "
        "their timeout.",
    ),
    ConfigDef(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        "3600000",
        doc="How often, in milliseconds, the transaction coordinator forgets transactional ids idle for "
        "longer than transactional.id.expiration.ms.",
    ),
    ConfigDef(
        "transactional.id.expiration.ms",
        "int",
        "604800000",
        doc="How long, in milliseconds, a transactional id may go without a transaction before the coordinator "
        "forgets it; ids with an ongoing transaction do not expire.",
    ),
    ConfigDef(
        "transaction.state.log.segment.bytes",
        "int",
        "104857600",
        doc="The segment size of the __transaction_state topic, kept small so it compacts and loads quickly.",
    ),
    ConfigDef(
        "transaction.state.log.replication.factor",
        "short",
        "1",
        doc="The replication factor the __transaction_state topic is created with (1 here, as in the "
        "server.properties Kafka ships for a single node).",
    ),
    ConfigDef(
        "transaction.state.log.min.isr",
        "int",
        "1",
        doc="The min.insync.replicas of the __transaction_state topic (1 here, as in the "
        "server.properties Kafka ships for a single node).",
    ),
    ConfigDef(
        "transaction.partition.verification.enable",
        "boolean",
        "true",
        read_only=False,
        doc="Whether a partition leader checks with the transaction coordinator that a transactional producer "
        "added the partition to its transaction before accepting its first batch there.",
    ),
    ConfigDef(
        "producer.id.expiration.ms",
        "int",
        "86400000",
        read_only=False,
        doc="How long, in milliseconds, a partition remembers an idle producer id before forgetting its "
        "sequence state; ids with an open transaction do not expire.",
    ),
    ConfigDef(
        "max.incremental.fetch.session.cache.slots",
        "int",
        "1000",
        doc="The most incremental fetch sessions the broker keeps at once.",
    ),
    ConfigDef(
        "cluster.id",
        "string",
        None,
        doc="The cluster's id; unset means the id stored in the data directory, or a new random one.",
    ),
]
BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _BROKER_DEFS}

# Topic config -> (type, broker config it defaults to, or a fixed default, documentation).
TOPIC_CONFIGS: dict[str, tuple[str, str | None, str | None, str]] = {
    "compression.gzip.level": (
        "int",
        "compression.gzip.level",
        None,
        "The gzip level when the broker recompresses this topic's batches.",
    ),
    "compression.lz4.level": (
        "int",
        "compression.lz4.level",
        None,
        "The lz4 level when the broker recompresses this topic's batches.",
    ),
    "compression.zstd.level": (
        "int",
        "compression.zstd.level",
        None,
        "The zstd level when the broker recompresses this topic's batches.",
    ),
    "follower.replication.throttled.replicas": (
        "list",
        None,
        "",
        "Replicas whose follower fetching is throttled during reassignment (partition:broker pairs, or *).",
    ),
    "leader.replication.throttled.replicas": (
        "list",
        None,
        "",
        "Replicas whose leader-side replication is throttled during reassignment (partition:broker pairs, or *).",
    ),
    "local.retention.bytes": (
        "long",
        "log.local.retention.bytes",
        None,
        "With tiered storage, bytes kept on local disk per partition (-2: retention.bytes).",
    ),
    "local.retention.ms": (
        "long",
        "log.local.retention.ms",
        None,
        "With tiered storage, how long data stays on local disk (-2: retention.ms).",
    ),
    "remote.log.copy.disable": (
        "boolean",
        None,
        "false",
        "With tiered storage, stop copying new segments to remote storage.",
    ),
    "remote.log.delete.on.disable": (
        "boolean",
        None,
        "false",
        "With tiered storage, delete the remote data when tiering is turned off.",
    ),
    "remote.storage.enable": (
        "boolean",
        None,
        "false",
        "Whether this topic's segments are copied to tiered (remote) storage; kafkalike has no tiered storage.",
    ),
    "cleanup.policy": (
        "list",
        "log.cleanup.policy",
        None,
        "What happens to old data: delete drops whole segments past retention.ms or retention.bytes, "
        "compact keeps only the latest record of each key; both may be listed.",
    ),
    "compression.type": (
        "string",
        "compression.type",
        None,
        "The codec batches are stored with: producer keeps the producer's codec; uncompressed, gzip, snappy, "
        "lz4 or zstd recompress to that codec.",
    ),
    "delete.retention.ms": (
        "long",
        "log.cleaner.delete.retention.ms",
        None,
        "How long, in milliseconds, a tombstone stays in a compacted log after the cleaner first keeps it; "
        "a reader starting from the beginning has this long to see the deletion.",
    ),
    "file.delete.delay.ms": (
        "long",
        "log.segment.delete.delay.ms",
        None,
        "How long, in milliseconds, a deleted segment's files stay on disk before they are removed.",
    ),
    "flush.messages": (
        "long",
        "log.flush.interval.messages",
        None,
        "How many messages are appended between two forced flushes (fsync) of the log. "
        "The default leaves flushing to the operating system.",
    ),
    "flush.ms": (
        "long",
        "log.flush.interval.ms",
        str(LONG_MAX),
        "The longest time, in milliseconds, appended data may wait before the log is forced to disk. "
        "The default leaves flushing to the operating system.",
    ),
    "index.interval.bytes": (
        "int",
        "log.index.interval.bytes",
        None,
        "How many bytes of records are appended between two offset index entries; "
        "denser entries make lookups land closer but the index larger.",
    ),
    "max.compaction.lag.ms": (
        "long",
        "log.cleaner.max.compaction.lag.ms",
        None,
        "The longest time, in milliseconds, a record may stay uncompacted: after it the log is cleaned "
        "whatever its dirty ratio. Only for compacted topics.",
    ),
    "max.message.bytes": (
        "int",
        "message.max.bytes",
        None,
        "The largest record batch, after compression, this topic accepts; larger ones are rejected "
        "with MESSAGE_TOO_LARGE.",
    ),
    "message.timestamp.type": (
        "string",
        "log.message.timestamp.type",
        None,
        "CreateTime keeps the timestamps producers set; LogAppendTime stamps records with the broker's time of append.",
    ),
    "message.timestamp.before.max.ms": (
        "long",
        "log.message.timestamp.before.max.ms",
        None,
        "How far, in milliseconds, a record's timestamp may lie before the broker's clock under CreateTime; "
        "records older than that are rejected.",
    ),
    "message.timestamp.after.max.ms": (
        "long",
        "log.message.timestamp.after.max.ms",
        None,
        "How far, in milliseconds, a record's timestamp may lie after the broker's clock under CreateTime; "
        "records further in the future are rejected.",
    ),
    "min.cleanable.dirty.ratio": (
        "double",
        "log.cleaner.min.cleanable.ratio",
        None,
        "The share of a compacted log that must be dirty (written since the last clean) before the cleaner "
        "compacts it; lower values clean more often and leave fewer duplicates.",
    ),
    "min.compaction.lag.ms": (
        "long",
        "log.cleaner.min.compaction.lag.ms",
        None,
        "The shortest time, in milliseconds, a record stays uncompacted after it is written. "
        "Only for compacted topics.",
    ),
    "min.insync.replicas": (
        "int",
        "min.insync.replicas",
        None,
        "How many in-sync replicas must have a write before a produce with acks=all succeeds; "
        "fewer make such produces fail.",
    ),
    "preallocate": (
        "boolean",
        "log.preallocate",
        None,
        "Whether a new segment file is allocated at its full size when it is created.",
    ),
    "retention.bytes": (
        "long",
        "log.retention.bytes",
        None,
        "The largest size, in bytes, one partition's log may reach before its oldest segments are deleted "
        "(delete policy); -1 means no size limit.",
    ),
    "retention.ms": (
        "long",
        "log.retention.ms",
        None,
        "How long, in milliseconds, records are kept before their segment is deleted (delete policy); "
        "-1 means no time limit.",
    ),
    "segment.bytes": (
        "int",
        "log.segment.bytes",
        None,
        "The size at which the active segment is closed and a new one begun. Retention and compaction "
        "work a whole segment at a time.",
    ),
    "segment.index.bytes": (
        "int",
        "log.index.size.max.bytes",
        None,
        "The largest size, in bytes, of a segment's offset index; a full index rolls a new segment.",
    ),
    "segment.jitter.ms": (
        "long",
        "log.roll.jitter.ms",
        "0",
        "The most, in milliseconds, randomly taken off segment.ms so that many logs do not roll at once.",
    ),
    "segment.ms": (
        "long",
        "log.roll.ms",
        None,
        "The longest time, in milliseconds, a segment stays active before a new one is rolled, even if it "
        "is not full, so that retention and compaction can reach its data.",
    ),
    "unclean.leader.election.enable": (
        "boolean",
        "unclean.leader.election.enable",
        None,
        "Whether a replica that is not in sync may become leader as a last resort, at the risk of losing data.",
    ),
}

# Kafka's internal topic configs (4.1+): accepted in CreateTopics and AlterConfigs like the
# others, listed by DescribeConfigs and CreateTopics only for a topic that sets them, with no
# broker default. Same shape as TOPIC_CONFIGS.
INTERNAL_TOPIC_CONFIGS: dict[str, tuple[str, str | None, str | None, str]] = {
    INTERNAL_SEGMENT_BYTES: (
        "int",
        None,
        None,
        "For tests only: the segment size in bytes, below segment.bytes' floor of 1 MiB; when set it "
        "wins over segment.bytes.",
    ),
}


def is_topic_config(name: str) -> bool:
    """Whether a topic may set ``name`` (a public or an internal topic config)."""
    return name in TOPIC_CONFIGS or name in INTERNAL_TOPIC_CONFIGS


# Broker configs Kafka also accepts in coarser units, finest first: when the first is unset, the
# next one set decides. DescribeConfigs lists them as each other's synonyms.
_UNIT_SYNONYMS = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
}
_UNIT_MS = {"minutes": 60_000, "hours": 3_600_000}


def _synonym_names(name: str) -> tuple[str, ...]:
    for names in _UNIT_SYNONYMS.values():
        if name in names:
            return names
    return (name,)


# What Kafka's GroupCoordinatorConfig requires between the consumer group settings, in its order.
_CONSUMER_GROUP_BOUNDS = (
    ("group.consumer.max.heartbeat.interval.ms", ">=", "group.consumer.min.heartbeat.interval.ms"),
    ("group.consumer.heartbeat.interval.ms", ">=", "group.consumer.min.heartbeat.interval.ms"),
    ("group.consumer.heartbeat.interval.ms", "<=", "group.consumer.max.heartbeat.interval.ms"),
    ("group.consumer.max.session.timeout.ms", ">=", "group.consumer.min.session.timeout.ms"),
    ("group.consumer.session.timeout.ms", ">=", "group.consumer.min.session.timeout.ms"),
    ("group.consumer.session.timeout.ms", "<=", "group.consumer.max.session.timeout.ms"),
    ("group.consumer.heartbeat.interval.ms", "<", "group.consumer.session.timeout.ms"),
)
_RELATIONS: dict[str, tuple[Callable[[int, int], bool], str]] = {
    ">=": (operator.ge, "greater than or equal to"),
    "<=": (operator.le, "less than or equal to"),
    "<": (operator.lt, "less than"),
}


# For test suites, like a dev-container broker: topics appear on first use, groups form at
# once, small internal topics.
TEST_PROFILE = {
    "auto.create.topics.enable": "true",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "100",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "log.retention.check.interval.ms": "1000",
}


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset Kafka's files use: key=value or key: value, # and ! comments."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                out[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            out[line] = ""
    return out


class BrokerConfig:
    """The broker's effective configuration: Kafka names, string values, typed accessors."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self.explicit: dict[str, str] = dict(values or {})
        # Set at run time through AlterConfigs, kept in the metadata log: per this broker, and
        # cluster-wide defaults. They win over the static file.
        self.dynamic_broker: dict[str, str] = {}
        self.dynamic_default: dict[str, str] = {}

    @classmethod
    def load(cls, path: Path | None, overrides: Iterable[str] = ()) -> BrokerConfig:
        values = parse_properties(path.read_text(encoding="utf-8")) if path else {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"override {item!r} is not key=value")
            values[key.strip()] = value.strip()
        return cls(values)

    def check(self) -> None:
        """Refuse static values a broker cannot start with, as Kafka does (a ConfigException, or a
        failed requirement between group.consumer.* settings): raises ValueError, in Kafka's words."""
        for name, value in self.explicit.items():
            problem = validate_value(name, value) if name in BROKER_CONFIGS else None
            if problem is not None:
                raise ValueError(problem)
        problem = socket_server_problem(self)
        if problem is not None:
            raise ValueError(problem)
        for name, relation, other in _CONSUMER_GROUP_BOUNDS:
            holds, words = _RELATIONS[relation]
            if not holds(self.get_int(name), self.get_int(other)):
                raise ValueError(f"{name} must be {words} {other}")
        problem = self.requirement_problem()
        if problem is not None:
            raise ValueError(problem)
        assignors_from_config((self.get("group.consumer.assignors") or "").split(","))

    def dynamic_log_problem(self) -> str | None:
        """What Kafka's dynamic broker config check refuses of the local (tiered) retention settings
        against the overall ones, worded as it wraps them ("Invalid dynamic configuration")."""
        for unit, unlimited in (("ms", -1), ("bytes", -1)):
            total, local = self.get_int(f"log.retention.{unit}"), self.get_int(f"log.local.retention.{unit}")
            applies = total != unlimited if unit == "ms" else total > unlimited
            if not applies or local == -2:
                continue
            if local == -1:
                inner = f"Value must not be -1 as log.retention.{unit} value is set as {total}."
            elif local > total:
                inner = f"Value must not be more than log.retention.{unit} property value: {total}"
            else:
                continue
            return (
                f"Invalid value org.apache.kafka.common.config.ConfigException: Invalid value {local} for "
                f"configuration log.local.retention.{unit}: {inner} for configuration Invalid dynamic configuration"
            )
        return None

    def requirement_problem(self) -> str | None:
        """What KafkaConfig requires of the settings together, checked at start-up and for every
        dynamic change; None when all hold. In Kafka's words, Scala's ``require`` prefix included."""
        # A negative log.retention.ms means no limit (as -1), so only the roll times are required.
        if self.get_int("log.roll.ms") < 1:
            return "requirement failed: log.roll.ms must be greater than or equal to 1"
        if self.get_int("log.roll.jitter.ms") < 0:
            return "requirement failed: log.roll.jitter.ms must be greater than or equal to 0"
        # One cleaner thread here (Kafka's default log.cleaner.threads), so the whole buffer is its.
        if not self.get_int("log.cleaner.dedupe.buffer.size") > 1024 * 1024:
            return "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
        return None

    def unknown_names(self) -> list[str]:
        """The static configs set that are no broker config kafkalike knows, sorted (Kafka logs
        them as supplied but not used)."""
        return sorted(name for name in self.explicit if name not in BROKER_CONFIGS)

    def get(self, name: str) -> str | None:
        for layer in (self.dynamic_broker, self.dynamic_default, self.explicit):
            if name in layer:
                return layer[name]
        if name in _UNIT_SYNONYMS:
            return self._derived_ms(name)
        d = BROKER_CONFIGS.get(name)
        return d.default if d else None

    def _derived_ms(self, name: str) -> str:
        """An unset ``*.ms`` config from its minutes or hours form (static only: those are read-only)."""
        coarser = _UNIT_SYNONYMS[name][1:]
        for unit_name in coarser:
            if unit_name in self.explicit:
                return str(int(self.explicit[unit_name]) * _UNIT_MS[unit_name.rsplit(".", 1)[1]])
        return str(int(BROKER_CONFIGS[coarser[-1]].default or "0") * _UNIT_MS["hours"])

    def get_int(self, name: str) -> int:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return int(value)

    def get_bool(self, name: str) -> bool:
        return (self.get(name) or "false").lower() == "true"

    def source(self, name: str) -> int:
        """Where the effective value comes from, as DescribeConfigs' config_source numbers it."""
        if name in self.dynamic_broker:
            return DYNAMIC_BROKER_CONFIG
        if name in self.dynamic_default:
            return DYNAMIC_DEFAULT_BROKER_CONFIG
        return STATIC_BROKER_CONFIG if name in self.explicit else DEFAULT_CONFIG

    def synonyms(self, name: str) -> list[tuple[str, str | None, int]]:
        """The layers that set ``name`` or a synonym of it, strongest first: (name, value, source).

        As Kafka lists them: layer by layer, each synonym in turn (``log.retention.ms``, then
        ``.minutes``, then ``.hours``), dropping whatever comes before the first entry for ``name``
        itself. So a value that only a coarser unit sets (the default ``log.retention.hours=168``)
        lists no synonyms for ``log.retention.ms``.
        """
        names = _synonym_names(name)
        defaults = {n: d.default for n in names if (d := BROKER_CONFIGS.get(n)) is not None and d.default is not None}
        layers = (
            (self.dynamic_broker, DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.explicit, STATIC_BROKER_CONFIG),
            (defaults, DEFAULT_CONFIG),
        )
        found = [(n, layer[n], source) for layer, source in layers for n in names if n in layer]
        return list(dropwhile(lambda entry: entry[0] != name, found))

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs") or self.get("log.dir") or "./kafkalike-data"
        return [Path(d.strip()) for d in dirs.split(",") if d.strip()]

    def topic_default(self, name: str) -> str | None:
        """The value a topic gets for ``name`` when the topic does not set it."""
        entry = TOPIC_CONFIGS.get(name)
        if entry is None:
            return None
        _, broker_name, fixed, _ = entry
        value = self.get(broker_name) if broker_name else None
        return fixed if value is None else value


# NAME://host:port, where host may be empty (every address) or a bracketed IPv6 address.
_ENDPOINT = re.compile(r"(?:[^:/]*://)?\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)")


def parse_listener(text: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` or ``host:port`` -> (host, port); ValueError in Kafka's words
    (SocketServerConfigs) when it is neither, or the port is not one."""
    match = _ENDPOINT.fullmatch(text.strip())
    if match is None or int(match.group(2)) > 65535:
        raise ValueError(f"Unable to parse {text} to a broker endpoint")
    return match.group(1) or "0.0.0.0", int(match.group(2))


# Configs whose value (each item, for lists) is one of these, in the order Kafka's message lists them.
_CHOICES = {
    "cleanup.policy": ("compact", "delete"),
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "log.cleanup.policy": ("compact", "delete"),
    "log.message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "process.roles": ("broker", "controller"),
}
# Configs whose value is one of these in any case, in the order Kafka's message lists them.
_CHOICES_ANY_CASE = {"group.consumer.migration.policy": ("DISABLED", "DOWNGRADE", "UPGRADE", "BIDIRECTIONAL")}
# Smallest accepted values, as Kafka's ConfigDef validators state them.
_AT_LEAST = {
    "segment.bytes": MIN_SEGMENT_BYTES,  # 14 before Kafka 4.1 (KIP-1030)
    "log.segment.bytes": MIN_SEGMENT_BYTES,
    # Kafka sets none; kafkalike keeps segment.bytes' old floor, below which no log is built.
    INTERNAL_SEGMENT_BYTES: 14,
    "segment.ms": 1,
    "segment.index.bytes": 4,
    "retention.ms": -1,
    "max.message.bytes": 0,
    "message.max.bytes": 0,
    "min.insync.replicas": 1,
    "flush.messages": 1,
    "flush.ms": 0,
    "socket.request.max.bytes": 1,
    "max.connections": 0,
    "max.connections.per.ip": 0,
    "index.interval.bytes": 0,
    "delete.retention.ms": 0,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 1,
    "file.delete.delay.ms": 0,
    "segment.jitter.ms": 0,
    "num.partitions": 1,
    "log.index.size.max.bytes": 4,
    "log.index.interval.bytes": 0,
    "log.flush.interval.messages": 1,
    "log.flush.offset.checkpoint.interval.ms": 0,
    "log.segment.delete.delay.ms": 0,
    "log.cleaner.backoff.ms": 0,
    "log.cleaner.delete.retention.ms": 0,
    "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.max.compaction.lag.ms": 1,
    "message.timestamp.before.max.ms": 0,
    "message.timestamp.after.max.ms": 0,
    "log.message.timestamp.before.max.ms": 0,
    "log.message.timestamp.after.max.ms": 0,
    "producer.id.expiration.ms": 1,
    "group.consumer.session.timeout.ms": 1,
    "group.consumer.min.session.timeout.ms": 1,
    "group.consumer.max.session.timeout.ms": 1,
    "group.consumer.heartbeat.interval.ms": 1,
    "group.consumer.min.heartbeat.interval.ms": 1,
    "group.consumer.max.heartbeat.interval.ms": 1,
    "group.consumer.max.size": 1,
    "transaction.max.timeout.ms": 1,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 1,
    "transactional.id.expiration.ms": 1,
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.segment.bytes": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "local.retention.ms": -2,
    "local.retention.bytes": -2,
    "log.local.retention.ms": -2,
    "log.local.retention.bytes": -2,
    "compression.lz4.level": 1,
    "compression.zstd.level": -131072,
    "node.id": 0,
    "group.max.size": 1,
    "log.retention.check.interval.ms": 1,
    "log.roll.hours": 1,
    "log.roll.jitter.hours": 0,
    "max.incremental.fetch.session.cache.slots": 0,
    "offsets.retention.check.interval.ms": 1,
    "offsets.retention.minutes": 1,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.segment.bytes": 1,
}
# Largest accepted values of integer configs.
_AT_MOST = {"compression.lz4.level": 17, "compression.zstd.level": 22}
# Integer configs accepted in a range or at one extra value (Kafka's "between ... or equal to").
_BETWEEN_OR = {"compression.gzip.level": (1, 9, -1)}
_THROTTLED_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")
# Accepted ranges of double-typed configs.
_BETWEEN = {"min.cleanable.dirty.ratio": (0.0, 1.0), "log.cleaner.min.cleanable.ratio": (0.0, 1.0)}


def config_type(name: str) -> str | None:
    if name in TOPIC_CONFIGS:
        return TOPIC_CONFIGS[name][0]
    if name in INTERNAL_TOPIC_CONFIGS:
        return INTERNAL_TOPIC_CONFIGS[name][0]
    d = BROKER_CONFIGS.get(name)
    return d.type if d else None


def validate_value(name: str, value: str | None) -> str | None:
    """None when ``value`` is acceptable for config ``name``, else Kafka's message for it (as its
    ConfigDef validators word them)."""
    type_ = config_type(name)
    if type_ is None:
        return f"Unknown config name: {name}"
    if value is None:
        return f"Null value not supported for config {name}"
    invalid = f"Invalid value {value} for configuration {name}"
    try:
        if type_ in ("int", "long", "short"):
            problem = _number_problem(name, int(value.strip()), type_)
            if problem is not None:
                return f"{invalid}: {problem}"
        elif type_ == "double":
            ratio = float(value)
            if not math.isfinite(ratio):
                raise ValueError
            low, high = _BETWEEN.get(name, (-math.inf, math.inf))
            if ratio < low:
                return f"{invalid}: Value must be at least {low:g}"
            if ratio > high:
                return f"{invalid}: Value must be no more than {high:g}"
        elif type_ == "boolean" and value.strip().lower() not in ("true", "false"):
            return f"{invalid}: Expected value to be either true or false"
    except ValueError:
        return f"{invalid}: Not a number of type {type_.upper()}"
    any_case = _CHOICES_ANY_CASE.get(name)
    if any_case is not None and value.upper() not in any_case:
        return f"{invalid}: String must be one of (case insensitive): " + ", ".join(any_case)
    return _choice_problem(name, type_, value) or _special_problem(name, value)


def _number_problem(name: str, number: int, type_: str) -> str | None:
    limit = {"int": INT_MAX, "short": 2**15 - 1, "long": LONG_MAX}[type_]
    if not -limit - 1 <= number <= limit:
        raise ValueError
    if name in _BETWEEN_OR:
        low, high, extra = _BETWEEN_OR[name]
        if not (low <= number <= high or number == extra):
            return f"Value must be between {low} and {high} or equal to {extra}"
    if number < _AT_LEAST.get(name, -limit - 1):
        return f"Value must be at least {_AT_LEAST[name]}"
    if number > _AT_MOST.get(name, limit):
        return f"Value must be no more than {_AT_MOST[name]}"
    return None


def _list_items(value: str) -> list[str]:
    """A list config's items as Kafka's ConfigDef parses them: comma-separated, trimmed, and
    empty for an empty (or all-blank) value."""
    return [item.strip() for item in value.split(",")] if value.strip() else []


def _choice_problem(name: str, type_: str, value: str) -> str | None:
    choices = _CHOICES.get(name)
    if choices is None:
        return None
    items = _list_items(value) if type_ == "list" else [value]
    # A list names its first bad item; an empty list is no bad item (ValidList).
    bad = next((item for item in items if item not in choices), None)
    if bad is None:
        return None
    return f"Invalid value {bad} for configuration {name}: String must be one of: {', '.join(choices)}"


def _special_problem(name: str, value: str) -> str | None:
    """What Kafka refuses beyond a value's type and bounds."""
    if name in _THROTTLED_REPLICAS:
        items = _list_items(value)
        if items != ["*"] and not all(_THROTTLED_REPLICA.fullmatch(item) for item in items):
            return (
                f"Invalid value [{', '.join(items)}] for configuration {name}: {name} must be the literal '*' or a "
                "list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )
    if name == "remote.storage.enable" and value.strip().lower() == "true":
        # No tiered storage here, as a Kafka broker with remote.log.storage.system.enable=false.
        return "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
    return None
