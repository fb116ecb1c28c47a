"""Topic names as Kafka's ``Topic`` class checks them: legal names and colliding names.

Kafka's metrics replace '.' by '_' in a topic's name, so two topics whose names differ only
there would share metrics; the controller refuses the second (``collision_key``).
"""

from __future__ import annotations

import re

from kafkalike.controller.api_error import ControllerApiError
from kafkalike.protocol.errors import ErrorCode

MAX_TOPIC_NAME = 249
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def check_topic_name(name: str) -> None:
    """Kafka's Topic.validate: not empty, not '.' or '..', at most 249 legal characters."""
    if not name:
        raise ControllerApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise ControllerApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME:
        raise ControllerApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, topic name: {name}",
        )
    if not _LEGAL_TOPIC.fullmatch(name):
        raise ControllerApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def collision_key(name: str) -> str:
    """The name as Kafka's metrics see it (Topic.unifyCollisionChars)."""
    return name.replace(".", "_")
