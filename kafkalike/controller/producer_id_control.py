"""Producer id blocks (Kafka's ProducerIdControlManager): AllocateProducerIds.

A broker asks for a block of 1,000 producer ids when its current one runs out; the block starts
where the last one handed out ended (0 for the first), and the ProducerIdsRecord of the block
names the broker, its epoch and the first id of the next block, so that no id is ever given
twice, across controller failovers and restarts. A broker that is not registered with that
epoch gets STALE_BROKER_EPOCH, as from Kafka's ClusterControlManager.checkBrokerEpoch.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalike.controller.api_error import ApiError, ControllerApiError
from kafkalike.controller.cluster_control import check_broker_epoch
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.image import MetadataImage
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import MetadataRecordType, metadata_record

PRODUCER_ID_BLOCK_SIZE = 1000
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    """``[first_id, first_id + size)``, handed to ``broker_id``; size 0 with an error."""

    broker_id: int
    first_id: int
    size: int
    error: ApiError = ApiError.NONE


def allocate_producer_ids(
    image: MetadataImage, broker_id: int, broker_epoch: int
) -> ControllerResult[ProducerIdsBlock]:
    """The next block for the broker and its record, or the error (and no record)."""
    try:
        check_broker_epoch(image, broker_id, broker_epoch)
    except ControllerApiError as exc:
        return ControllerResult.of([], ProducerIdsBlock(broker_id, -1, 0, exc.error))
    first = max(image.next_producer_id, 0)
    if first > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
        error = ApiError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit",
        )
        return ControllerResult.of([], ProducerIdsBlock(broker_id, -1, 0, error))
    record = metadata_record(
        MetadataRecordType.PRODUCER_IDS_RECORD,
        broker_id=broker_id,
        broker_epoch=broker_epoch,
        next_producer_id=first + PRODUCER_ID_BLOCK_SIZE,
    )
    return ControllerResult.of([record], ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE))
