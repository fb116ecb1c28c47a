"""Record versions read but written only when asked for: Kafka 4.4's broker records (the cordoned
log directories) are read from a 4.4 node's log; kafkalike writes the versions of the
metadata.version it formats with, as a 4.0 node reads them."""

from __future__ import annotations

import uuid

from kafkalike.protocol.metadata_records import (
    MetadataRecordType,
    decode_metadata_record,
    encode_metadata_record,
    latest_version,
    metadata_record,
)

T = MetadataRecordType
DIRECTORY = uuid.UUID(int=7)


def test_the_broker_records_are_written_below_the_newest_version_read() -> None:
    assert (latest_version(T.REGISTER_BROKER_RECORD), latest_version(T.BROKER_REGISTRATION_CHANGE_RECORD)) == (4, 3)
    assert metadata_record(T.REGISTER_BROKER_RECORD, broker_id=1).version == 3
    assert metadata_record(T.BROKER_REGISTRATION_CHANGE_RECORD, broker_id=1).version == 2
    assert metadata_record(T.TOPIC_RECORD, name="t").version == latest_version(T.TOPIC_RECORD)


def test_a_newer_record_with_cordoned_directories_is_read() -> None:
    for record_type, version in ((T.REGISTER_BROKER_RECORD, 4), (T.BROKER_REGISTRATION_CHANGE_RECORD, 3)):
        written = metadata_record(record_type, version, broker_id=1, cordoned_log_dirs=[DIRECTORY])
        read = decode_metadata_record(encode_metadata_record(written))
        assert (read.version, list(read.message.cordoned_log_dirs)) == (version, [DIRECTORY])
        # Not given: null (no change; none reported yet).
        assert metadata_record(record_type, version, broker_id=1).message.cordoned_log_dirs is None
