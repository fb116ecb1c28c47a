"""The node's identity and the KRaft controller quorum (Kafka's KRaftConfigs and QuorumConfig).

kafkalike runs one node that is broker and controller at once; ``node.id``, ``process.roles``,
``controller.quorum.voters`` (its only voter: itself), ``controller.quorum.bootstrap.servers`` and
``controller.listener.names`` (listeners clients are not served on) are read today. The quorum's
timeouts and metadata-log settings are declared with Kafka's types, defaults and
validators for the Raft quorum and the cluster to read; until then they are not implemented (see
``ConfigKey.implemented``); the broker's heartbeat settings (``broker.*``) are read by its
registration and heartbeats (server/broker_lifecycle_task.py). None of them can change on a running node.
"""

from __future__ import annotations

from kafkalike.configs.declaration import (
    ConfigKey,
    ConfigType,
    NonEmptyList,
    QuorumBootstrapServers,
    QuorumVoters,
    Validator,
    at_least,
)

PROCESS_ROLES = ("broker", "controller")
# Kafka 4.4's floor of metadata.log.segment.bytes (8 MiB; 4.0's was 12, one batch's offset and length).
METADATA_SEGMENT_BYTES_MIN = 8 * 1024 * 1024


def _pending(
    name: str, type_: ConfigType, default: str | None, doc: str, validator: Validator | None = None
) -> ConfigKey:
    """A read-only config declared before kafkalike acts on it."""
    return ConfigKey(name, type_, default, doc, validator, implemented=False)


QUORUM = (
    ConfigKey(
        "node.id",
        ConfigType.INT,
        "1",
        "This node's id, the one Metadata lists as the broker and controller.",
        at_least(0),
    ),
    ConfigKey(
        "process.roles",
        ConfigType.LIST,
        "broker,controller",
        "The roles this process plays; kafkalike always acts as both broker and controller.",
        NonEmptyList(PROCESS_ROLES),
    ),
    ConfigKey(
        "controller.quorum.voters",
        ConfigType.LIST,
        "",
        "The controller quorum's static voters, as comma-separated id@host:port entries.",
        QuorumVoters(),
    ),
    ConfigKey(
        "controller.quorum.bootstrap.servers",
        ConfigType.LIST,
        "",
        "The host:port addresses a node first asks for the controller quorum, when the voters are not listed "
        "in controller.quorum.voters.",
        QuorumBootstrapServers(),
    ),
    ConfigKey(
        "controller.listener.names",
        ConfigType.LIST,
        None,
        "The names of the listeners the controller accepts connections on, comma-separated; brokers reach "
        "the quorum through the first.",
        NonEmptyList(),
    ),
    _pending(
        "controller.quorum.election.timeout.ms",
        ConfigType.INT,
        "1000",
        "How long, in milliseconds, a voter waits without hearing from a leader before it starts an election.",
        at_least(0),
    ),
    _pending(
        "controller.quorum.fetch.timeout.ms",
        ConfigType.INT,
        "2000",
        "How long, in milliseconds, a follower goes without a successful fetch before it stands as candidate, "
        "and a leader without fetches from a majority before it resigns.",
        at_least(0),
    ),
    _pending(
        "controller.quorum.election.backoff.max.ms",
        ConfigType.INT,
        "1000",
        "The longest random wait, in milliseconds, before a candidate tries another election after a failed one.",
        at_least(0),
    ),
    _pending(
        "controller.quorum.append.linger.ms",
        ConfigType.INT,
        "25",
        "How long, in milliseconds, the quorum leader lets writes gather before it appends and flushes them.",
        at_least(0),
    ),
    _pending(
        "controller.quorum.request.timeout.ms",
        ConfigType.INT,
        "2000",
        "How long, in milliseconds, a quorum request may wait for its answer before it is sent again or fails.",
        at_least(0),
    ),
    _pending(
        "controller.quorum.retry.backoff.ms",
        ConfigType.INT,
        "20",
        "How long, in milliseconds, a node waits before retrying a failed quorum request.",
        at_least(0),
    ),
    ConfigKey(
        "broker.heartbeat.interval.ms",
        ConfigType.INT,
        "2000",
        "How often, in milliseconds, a broker sends the controller a heartbeat.",
    ),
    ConfigKey(
        "broker.session.timeout.ms",
        ConfigType.INT,
        "9000",
        "How long, in milliseconds, a broker stays registered without a heartbeat before the controller fences it.",
    ),
    ConfigKey(
        "initial.broker.registration.timeout.ms",
        ConfigType.INT,
        "60000",
        "How long, in milliseconds, a starting broker waits for the controller to accept its registration "
        "before it gives up and exits.",
    ),
    _pending(
        "metadata.log.dir",
        ConfigType.STRING,
        None,
        "The directory of the metadata log. Unset means the first of the log directories.",
    ),
    _pending(
        "metadata.log.max.record.bytes.between.snapshots",
        ConfigType.LONG,
        "20971520",
        "How many bytes of committed metadata records may follow the latest snapshot before a new snapshot is taken.",
        at_least(1),
    ),
    _pending(
        "metadata.log.max.snapshot.interval.ms",
        ConfigType.LONG,
        "3600000",
        "The longest time, in milliseconds, committed metadata records may wait for a snapshot; 0 takes "
        "snapshots by size only.",
        at_least(0),
    ),
    _pending(
        "metadata.log.segment.bytes",
        ConfigType.INT,
        "1073741824",
        "The size at which a metadata log segment is closed and a new one started.",
        at_least(METADATA_SEGMENT_BYTES_MIN),
    ),
    _pending(
        "metadata.log.segment.ms",
        ConfigType.LONG,
        "604800000",
        "The longest time, in milliseconds, a metadata log segment stays active before a new one is rolled.",
    ),
    _pending(
        "metadata.max.retention.bytes",
        ConfigType.LONG,
        "104857600",
        "How many bytes of metadata log and snapshots are kept before the oldest are deleted; a soft limit, "
        "as one snapshot always stays.",
    ),
    _pending(
        "metadata.max.retention.ms",
        ConfigType.LONG,
        "604800000",
        "How long, in milliseconds, a metadata log segment or snapshot is kept; a soft limit, as one snapshot "
        "always stays.",
    ),
    _pending(
        "metadata.max.idle.interval.ms",
        ConfigType.INT,
        "500",
        "How often, in milliseconds, the active controller writes a no-op record to the metadata log when it "
        "has nothing else to write; 0 writes none.",
        at_least(0),
    ),
)
