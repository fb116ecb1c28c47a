"""A whole error response for a request, without handling it (for injected faults).

APIs with a top-level error code get just that; the partition-level APIs mirror the request's
topics and partitions with the error on each, as Apache Kafka's getErrorResponse does.
"""

from __future__ import annotations

from typing import Any

from kafkalike.protocol.codec import Message, response_schema


def error_response(api_key: int, version: int, request: Message, code: int) -> dict[str, Any] | None:
    """The response carrying ``code``, or None when this API has no way to say it."""
    builder = _BUILDERS.get(api_key)
    if builder is not None:
        return builder(request, code)
    if "error_code" in response_schema(api_key, version).field_names():
        return {"error_code": code}
    return None


def _produce(request: Message, code: int) -> dict[str, Any]:
    return {
        "responses": [
            {
                "name": t.name,
                "partition_responses": [
                    {"index": p.index, "error_code": code, "base_offset": -1} for p in t.partition_data
                ],
            }
            for t in request.topic_data
        ]
    }


def _fetch(request: Message, code: int) -> dict[str, Any]:
    return {
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": t.topic,
                "topic_id": t.topic_id,
                "partitions": [
                    {"partition_index": p.partition, "error_code": code, "high_watermark": -1, "records": b""}
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ],
    }


def _list_offsets(request: Message, code: int) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
            }
            for t in request.topics
        ]
    }


def _metadata(request: Message, code: int) -> dict[str, Any]:
    return {"brokers": [], "topics": [{"name": t.name, "error_code": code} for t in request.topics or []]}


def _offset_commit(request: Message, code: int) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
            }
            for t in request.topics
        ]
    }


_BUILDERS = {0: _produce, 1: _fetch, 2: _list_offsets, 3: _metadata, 8: _offset_commit}
