"""Feature levels (Kafka's FeatureControlManager): the metadata versions, the features a new
cluster starts with, and the bootstrap records that the first active controller of an empty
metadata log writes.

``kafkalike storage format`` writes the same bootstrap records into ``bootstrap.checkpoint``
(``bootstrap_records``); when the log is empty the active controller appends them (from that
file, else the release defaults), wrapped in a metadata transaction from metadata.version
3.6-IV1 on, as Kafka's ActivationRecordsGenerator does, so that a controller failing half-way
leaves no partial bootstrap (the next one aborts it and starts again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.image import BROKER_RESOURCE
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record

T = MetadataRecordType
# The bootstrap metadata ``kafkalike storage format`` writes into the metadata directory.
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
METADATA_VERSION_FEATURE = "metadata.version"
KRAFT_VERSION_FEATURE = "kraft.version"
ELR_FEATURE = "eligible.leader.replicas.version"  # as broker_partition_changes names it
MIN_INSYNC_REPLICAS = "min.insync.replicas"

# Kafka 4.4's metadata versions: (release name, feature level). All but the last are production
# versions; a non-production one needs unstable.feature.versions.enable.
METADATA_VERSIONS = (
    ("3.3-IV3", 7),
    ("3.4-IV0", 8),
    ("3.5-IV0", 9),
    ("3.5-IV1", 10),
    ("3.5-IV2", 11),
    ("3.6-IV0", 12),
    ("3.6-IV1", 13),
    ("3.6-IV2", 14),
    ("3.7-IV0", 15),
    ("3.7-IV1", 16),
    ("3.7-IV2", 17),
    ("3.7-IV3", 18),
    ("3.7-IV4", 19),
    ("3.8-IV0", 20),
    ("3.9-IV0", 21),
    ("4.0-IV0", 22),
    ("4.0-IV1", 23),
    ("4.0-IV2", 24),
    ("4.0-IV3", 25),
    ("4.1-IV0", 26),
    ("4.1-IV1", 27),
    ("4.2-IV0", 28),
    ("4.2-IV1", 29),
    ("4.3-IV0", 30),
    ("4.4-IV0", 31),
    ("4.4-IV1", 32),
    ("4.4-IV2", 33),
    ("4.5-IV0", 34),
)
LATEST_PRODUCTION = "4.4-IV2"
LEVELS_BY_NAME: Mapping[str, int] = dict(METADATA_VERSIONS)
# What ``kafkalike storage format`` offers: Kafka 4.0's table (4.1-IV0 its unstable version), as
# kafka-storage 4.0 formats (bootstrap.checkpoint; 4.4's format is FINDINGS.md K1).
FORMAT_VERSIONS = METADATA_VERSIONS[: [name for name, _ in METADATA_VERSIONS].index("4.1-IV0") + 1]
FORMAT_LATEST_PRODUCTION = "4.0-IV3"
# The levels the controller's rules change at, by their release names.
MV_3_2_IV0 = 3  # leader recovery state (below every version above: always on)
MV_3_3_IV3 = LEVELS_BY_NAME["3.3-IV3"]  # in_controlled_shutdown in the registration
MV_3_4_IV0 = LEVELS_BY_NAME["3.4-IV0"]  # RegisterBrokerRecord v2
MV_3_6_IV0 = LEVELS_BY_NAME["3.6-IV0"]  # ISR shrinks no longer bump the leader epoch
MV_3_7_IV2 = LEVELS_BY_NAME["3.7-IV2"]  # log directories: registration, PartitionChangeRecord v1
MV_4_0_IV1 = LEVELS_BY_NAME["4.0-IV1"]  # ELR fields (PartitionChangeRecord v2)
MV_4_3_IV0 = LEVELS_BY_NAME["4.3-IV0"]  # cordoned log directories: RegisterBrokerRecord v4, heartbeats
# From this metadata.version on, the bootstrap records go in a metadata transaction (KIP-868).
METADATA_TRANSACTIONS_LEVEL = LEVELS_BY_NAME["3.6-IV1"]
# The other features, and the metadata.version level from which each default rises (Kafka's
# Features.defaultValue). kraft.version is decided by the quorum arguments instead, and is never
# a bootstrap record. Kafka 4.2+ also finalizes share.version (2 from 4.4-IV0) and streams.version
# (1 from 4.2-IV1): left at 0 here, since kafkalike serves neither share nor streams groups and a
# finalized level would tell clients it does.
FEATURE_DEFAULTS: Mapping[str, tuple[tuple[int, int], ...]] = {
    "eligible.leader.replicas.version": ((26, 1),),
    "group.version": ((22, 1),),
    "transaction.version": ((24, 2),),
}


def feature_levels(version: str, *, dynamic_quorum: bool) -> dict[str, int]:
    """Every feature's level for a new cluster at ``version``, metadata.version first."""
    level = LEVELS_BY_NAME[version]
    levels = {METADATA_VERSION_FEATURE: level, KRAFT_VERSION_FEATURE: 1 if dynamic_quorum else 0}
    for name, steps in sorted(FEATURE_DEFAULTS.items()):
        levels[name] = max((value for since, value in steps if level >= since), default=0)
    return levels


def bootstrap_records(levels: Mapping[str, int]) -> list[ApiMessageAndVersion]:
    """The FeatureLevel records of the bootstrap metadata: metadata.version, then every other
    feature above level 0 by name (kraft.version is the quorum's, not a record here)."""
    others = sorted(n for n in levels if n not in (METADATA_VERSION_FEATURE, KRAFT_VERSION_FEATURE))
    return [
        metadata_record(T.FEATURE_LEVEL_RECORD, name=n, feature_level=levels[n])
        for n in [METADATA_VERSION_FEATURE, *others]
        if n == METADATA_VERSION_FEATURE or levels[n] > 0
    ]


def default_bootstrap_records() -> list[ApiMessageAndVersion]:
    """The bootstrap records of a node started without ``bootstrap.checkpoint``: the latest
    production metadata.version and its default features (as kafka-storage would write them)."""
    return bootstrap_records(feature_levels(LATEST_PRODUCTION, dynamic_quorum=False))


def bootstrap_metadata_version(records: Sequence[ApiMessageAndVersion]) -> int:
    """The metadata.version the bootstrap records set; ValueError when they set none."""
    for r in records:
        if r.type == T.FEATURE_LEVEL_RECORD and r.name == METADATA_VERSION_FEATURE:
            return int(r.feature_level)
    raise ValueError("the bootstrap metadata sets no metadata.version")


def bootstrap_feature_level(records: Sequence[ApiMessageAndVersion], name: str) -> int:
    """The level the bootstrap records give feature ``name`` (0 when they name it not)."""
    levels = [int(r.feature_level) for r in records if r.type == T.FEATURE_LEVEL_RECORD and r.name == name]
    return levels[-1] if levels else 0


def activation_records(
    bootstrap: Sequence[ApiMessageAndVersion], *, partial_transaction: bool = False, min_insync_replicas: int = 1
) -> ControllerResult[None]:
    """What a controller becoming active over an empty log appends: the bootstrap records, in a
    metadata transaction where the version has them. ``partial_transaction``: the log holds a
    bootstrap transaction a failed controller began; it is aborted first (Kafka's
    recordsForEmptyLog). With eligible leader replicas on (KIP-966), the cluster gets a
    cluster-level min.insync.replicas, the controller's static one: under ELR it is the only
    level besides the topics' (broker-level values are refused)."""
    level = bootstrap_metadata_version(bootstrap)
    transactions = level >= METADATA_TRANSACTIONS_LEVEL
    if partial_transaction and not transactions:
        raise ValueError(
            f"a partial bootstrap transaction in the log, but metadata.version {level} has no transactions"
        )
    records: list[ApiMessageAndVersion] = []
    if partial_transaction:
        records.append(metadata_record(T.ABORT_TRANSACTION_RECORD, reason="Controller failover"))
    if transactions:
        records.append(metadata_record(T.BEGIN_TRANSACTION_RECORD, name="Bootstrap records"))
    records += bootstrap
    if bootstrap_feature_level(bootstrap, ELR_FEATURE) > 0:
        records.append(
            metadata_record(
                T.CONFIG_RECORD,
                0,
                resource_type=BROKER_RESOURCE,
                resource_name="",
                name=MIN_INSYNC_REPLICAS,
                value=str(min_insync_replicas),
            )
        )
    if transactions:
        records.append(metadata_record(T.END_TRANSACTION_RECORD))
    return ControllerResult.of(records, None)
