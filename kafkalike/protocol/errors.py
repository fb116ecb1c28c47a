"""One error hierarchy for everything the protocol layer rejects.

The server maps each to a Kafka error code (``error_code``) or, for frames it cannot even
split, to closing the connection. Nothing else may escape the decoders.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Kafka's error codes (a subset grows into the full table)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    INVALID_REQUIRED_ACKS = 21
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    INVALID_RECORD = 87


class ProtocolError(Exception):
    """Bytes that do not follow the Kafka protocol."""

    error_code: ErrorCode = ErrorCode.INVALID_REQUEST


class FrameError(ProtocolError):
    """A frame that cannot be split off the stream (bad size prefix): close the connection."""


class DecodeError(ProtocolError):
    """A frame whose contents do not decode: truncated, bad varint, bad UTF-8, absurd length."""


class UnsupportedVersionError(ProtocolError):
    """An API key or version we have no schema for."""

    error_code = ErrorCode.UNSUPPORTED_VERSION

    def __init__(self, api_key: int, version: int) -> None:
        super().__init__(f"API key {api_key} version {version} is not supported")
        self.api_key = api_key
        self.version = version


class CorruptRecordError(ProtocolError):
    """A record batch whose CRC or framing is wrong."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(ProtocolError):
    """A record batch that is well-formed but not acceptable (bad magic, bad counts...)."""

    error_code = ErrorCode.INVALID_RECORD


class EncodeError(ProtocolError):
    """A message object that cannot be written at the requested version (a bug on our side)."""
