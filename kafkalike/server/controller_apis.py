"""What a controller answers on its CONTROLLER listener besides the quorum's own requests
(Kafka's ``ControllerApis``): each API turns a request into a controller operation, runs it
through :meth:`ControllerHost.write` (answered once its records are committed) and builds the
response body from the operation's reply.

When this node is not the active controller every API answers NOT_CONTROLLER, shaped as Kafka's
``getErrorResponse`` shapes it (every topic or resource of the request carries it), with Kafka's
message naming the active controller where one is known.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalike.controller.api_error import ApiError
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_host import ControllerRequestContext, NotActiveError, WriteTimedOutError

if TYPE_CHECKING:
    from kafkalike.server.controller_host import ControllerHost

Body = dict[str, Any]
ApiFn = Callable[["ControllerHost", int, Message, ControllerRequestContext], Awaitable[Body]]
NOT_REQUESTED = -(2**31)


@dataclass(frozen=True)
class ControllerApi:
    """One API the controller serves, at the versions it advertises (Kafka 4.4's controller's,
    capped by what this project's codec knows), and its NOT_CONTROLLER answer."""

    min_version: int
    max_version: int
    fn: ApiFn
    refusal: Callable[[Message, ApiError], Body]


def not_controller(host: ControllerHost) -> ApiError:
    """Kafka's QuorumController.newNotControllerException."""
    leader = host.leader_id
    if leader >= 0 and leader != host.node_id:
        return ApiError(ErrorCode.NOT_CONTROLLER, f"The active controller appears to be node {leader}.")
    return ApiError(ErrorCode.NOT_CONTROLLER, "No controller appears to be active.")


async def handle_controller_request(
    host: ControllerHost, api_key: int, version: int, body: Message, context: ControllerRequestContext
) -> Body:
    api = CONTROLLER_APIS[api_key]
    try:
        return await api.fn(host, version, body, context)
    except NotActiveError:
        return {"throttle_time_ms": 0, **api.refusal(body, not_controller(host))}
    except WriteTimedOutError:
        return {"throttle_time_ms": 0, **api.refusal(body, ApiError(ErrorCode.REQUEST_TIMED_OUT))}


def _error_fields(error: ApiError) -> Body:
    return {"error_code": error.code, "error_message": error.message}


# -- CreateTopics (19) ------------------------------------------------------------------------------


def topic_config_lister(config: BrokerConfig) -> Callable[[Mapping[str, str]], list[Body]]:
    """CreateTopics v5+'s list of a new topic's configs: every topic config with its value and
    source, as DescribeConfigs reports them (the same for topics asked with the same configs)."""
    from kafkalike.server.handlers.describe_configs import topic_config_entry, topic_config_names

    def listed(configs: Mapping[str, str]) -> list[Body]:
        overrides = dict(configs)
        return [
            {k: entry[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
            for entry in (topic_config_entry(config, overrides, n, False, False) for n in topic_config_names(overrides))
        ]

    return listed


async def create_topics(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
    now = host.now_ms()
    results = await host.write(lambda _: host.controller.create_topics(body, now), body.timeout_ms)
    asked = {t.name: {c.name: c.value for c in t.configs} for t in body.topics}
    lists: dict[tuple[tuple[str, str], ...], list[Body]] = {}
    topics = []
    for r in results:
        entry: Body = {
            "name": r.name,
            "topic_id": r.topic_id,
            **_error_fields(r.error),
            "num_partitions": r.num_partitions,
            "replication_factor": r.replication_factor,
            "configs": [],
        }
        if r.error.ok and host.topic_config_list is not None:
            configs = asked.get(r.name, {})
            key = tuple(sorted(configs.items()))
            if key not in lists:
                lists[key] = host.topic_config_list(configs)
            entry["configs"] = lists[key]
        topics.append(entry)
    return {"throttle_time_ms": 0, "topics": topics}


def _refuse_create_topics(body: Message, error: ApiError) -> Body:
    return {
        "topics": [
            {"name": t.name, **_error_fields(error), "num_partitions": -1, "replication_factor": -1, "configs": []}
            for t in body.topics
        ]
    }


# -- CreatePartitions (37) --------------------------------------------------------------------------


async def create_partitions(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
    now = host.now_ms()
    results = await host.write(lambda _: host.controller.create_partitions(body, now), body.timeout_ms)
    return {"throttle_time_ms": 0, "results": [{"name": r.name, **_error_fields(r.error)} for r in results]}


def _refuse_create_partitions(body: Message, error: ApiError) -> Body:
    return {"results": [{"name": t.name, **_error_fields(error)} for t in body.topics]}


# -- DeleteTopics (20) ------------------------------------------------------------------------------


async def delete_topics(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
    now = host.now_ms()
    results = await host.write(lambda _: host.controller.delete_topics(body, version, now), body.timeout_ms)
    return {
        "throttle_time_ms": 0,
        "responses": [{"name": r.name, "topic_id": r.topic_id, **_error_fields(r.error)} for r in results],
    }


def _refuse_delete_topics(body: Message, error: ApiError) -> Body:
    if body.get("topics"):
        named = [{"name": t.name, "topic_id": t.topic_id} for t in body.topics]
    else:
        named = [{"name": n} for n in body.get("topic_names") or ()]
    return {"responses": [{**n, **_error_fields(error)} for n in named]}


# -- AlterConfigs (33) and IncrementalAlterConfigs (44) ---------------------------------------------


async def alter_configs(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
    now = host.now_ms()
    results = await host.write(lambda _: host.controller.alter_configs(body, now))
    return {
        "throttle_time_ms": 0,
        "responses": [_config_result(r.resource_type, r.resource_name, r.error) for r in results],
    }


async def incremental_alter_configs(
    host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext
) -> Body:
    now = host.now_ms()
    results = await host.write(lambda _: host.controller.incremental_alter_configs(body, now))
    return {
        "throttle_time_ms": 0,
        "responses": [_config_result(r.resource_type, r.resource_name, r.error) for r in results],
    }


def _config_result(resource_type: int, resource_name: str, error: ApiError) -> Body:
    return {"resource_type": resource_type, "resource_name": resource_name, **_error_fields(error)}


def _refuse_configs(body: Message, error: ApiError) -> Body:
    return {"responses": [_config_result(r.resource_type, r.resource_name, error) for r in body.resources]}


# -- AllocateProducerIds (67) -----------------------------------------------------------------------


async def allocate_producer_ids(
    host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext
) -> Body:
    now = host.now_ms()
    block = await host.write(lambda _: host.controller.allocate_producer_ids(body, now))
    if not block.error.ok:
        return {"throttle_time_ms": 0, **_refuse_allocate_producer_ids(body, block.error)}
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id_start": block.first_id,
        "producer_id_len": block.size,
    }


def _refuse_allocate_producer_ids(body: Message, error: ApiError) -> Body:
    return {"error_code": error.code, "producer_id_start": 0, "producer_id_len": 0}  # Kafka's defaults


# -- BrokerRegistration (62), BrokerHeartbeat (63), UnregisterBroker (64) ---------------------------


async def broker_registration(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
    now = host.now_ms()
    reply = await host.write(
        host.run_cluster(
            lambda cluster, image, next_offset: cluster.register_broker(
                image, body, api_version=version, next_offset=next_offset, now_ms=now
            )
        )
    )
    return reply.to_response()


def _refuse_broker_registration(body: Message, error: ApiError) -> Body:
    return {"error_code": error.code, "broker_epoch": -1}


async def broker_heartbeat(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
    def expired() -> None:
        # Kept waiting behind other writes: still contact, but no state change (Kafka's
        # processExpiredBrokerHeartbeat); the broker sends the next one on its interval.
        if host.cluster is not None:
            host.cluster.expired_heartbeat(host.controller.latest_image, body, host.now_ms())

    reply = await host.write(
        host.run_cluster(
            lambda cluster, image, next_offset: cluster.heartbeat(
                image, body, next_offset=next_offset, now_ms=host.now_ms()
            )
        ),
        start_within_ms=host.heartbeat_interval_ms // 2,  # Kafka's deadline for a heartbeat
        on_expired=expired,
    )
    return reply.to_response()


def _refuse_broker_heartbeat(body: Message, error: ApiError) -> Body:
    return {"error_code": error.code, "is_caught_up": False, "is_fenced": True, "should_shut_down": False}


async def unregister_broker(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
    reply = await host.write(
        host.run_cluster(lambda cluster, image, _: cluster.unregister_broker(image, body.broker_id))
    )
    return reply.to_response()


def _refuse_unregister_broker(body: Message, error: ApiError) -> Body:
    return _error_fields(error)


# -- AlterPartition (56) and ElectLeaders (43) ------------------------------------------------------


async def alter_partition(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
    now = host.now_ms()
    reply = await host.write(
        host.run_partitions(lambda partitions: host.controller.alter_partition(partitions, body, version, now))
    )
    return reply.to_response()


def _refuse_alter_partition(body: Message, error: ApiError) -> Body:
    return {"error_code": error.code, "topics": []}  # Kafka's AlterPartitionRequest.getErrorResponse


async def elect_leaders(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
    now = host.now_ms()
    reply = await host.write(
        host.run_partitions(lambda partitions: host.controller.elect_leaders(partitions, body, version, now)),
        body.timeout_ms,
    )
    return reply.to_response()


def _refuse_elect_leaders(body: Message, error: ApiError) -> Body:
    from kafkalike.controller.partition_control import refused_elect_leaders

    response = refused_elect_leaders(body, error).to_response()
    del response["throttle_time_ms"]
    return response


# -- AlterPartitionReassignments (45) and ListPartitionReassignments (46) ------------------------


async def alter_partition_reassignments(
    host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext
) -> Body:
    reply = await host.write(
        host.run_partitions(
            lambda partitions: host.controller.alter_partition_reassignments(partitions, body, version)
        ),
        body.timeout_ms,
    )
    return reply.to_response()


def _refuse_alter_partition_reassignments(body: Message, error: ApiError) -> Body:
    # Kafka's AlterPartitionReassignmentsRequest.getErrorResponse: the error on every partition.
    return {
        "allow_replication_factor_change": bool(body.get("allow_replication_factor_change", True)),
        "error_code": error.code,
        "error_message": error.message,
        "responses": [
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": error.code, "error_message": error.message}
                    for p in topic.partitions
                ],
            }
            for topic in body.topics
        ],
    }


async def list_partition_reassignments(
    host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext
) -> Body:
    await host.wait_active()
    if host.active_epoch is None:
        raise NotActiveError
    return host.controller.list_partition_reassignments(body)


def _refuse_list_partition_reassignments(body: Message, error: ApiError) -> Body:
    return {**_error_fields(error), "topics": []}


# -- AddRaftVoter (80), RemoveRaftVoter (81), UpdateRaftVoter (82): the quorum's own (KIP-853) -----


def _quorum_api(api_key: int) -> ApiFn:
    """A voter change, answered by this node's quorum: its raft leader carries it out (and
    answers NOT_LEADER_OR_FOLLOWER elsewhere, as Kafka's raft client does)."""

    async def handle(host: ControllerHost, version: int, body: Message, ctx: ControllerRequestContext) -> Body:
        timeout_s = host.driver.node.config.request_timeout_ms / 1000 + 1
        answer = await host.driver.request(api_key, body, -1, timeout_s)
        if answer is None:
            return {"throttle_time_ms": 0, **_refuse_voter_change(body, ApiError(ErrorCode.REQUEST_TIMED_OUT))}
        return dict(answer)

    return handle


def _refuse_voter_change(body: Message, error: ApiError) -> Body:
    return {
        "error_code": error.code,
        "error_message": error.message,
        "current_leader": {"leader_id": -1, "leader_epoch": -1, "host": "", "port": -1},
    }


CONTROLLER_APIS: dict[int, ControllerApi] = {
    19: ControllerApi(2, 7, create_topics, _refuse_create_topics),
    20: ControllerApi(1, 6, delete_topics, _refuse_delete_topics),
    33: ControllerApi(0, 2, alter_configs, _refuse_configs),
    37: ControllerApi(0, 3, create_partitions, _refuse_create_partitions),
    43: ControllerApi(0, 2, elect_leaders, _refuse_elect_leaders),
    44: ControllerApi(0, 1, incremental_alter_configs, _refuse_configs),
    45: ControllerApi(0, 1, alter_partition_reassignments, _refuse_alter_partition_reassignments),
    46: ControllerApi(0, 0, list_partition_reassignments, _refuse_list_partition_reassignments),
    62: ControllerApi(0, 4, broker_registration, _refuse_broker_registration),
    63: ControllerApi(0, 1, broker_heartbeat, _refuse_broker_heartbeat),
    56: ControllerApi(2, 3, alter_partition, _refuse_alter_partition),  # Kafka 4.0 removed v0-1
    64: ControllerApi(0, 0, unregister_broker, _refuse_unregister_broker),
    67: ControllerApi(0, 0, allocate_producer_ids, _refuse_allocate_producer_ids),
    80: ControllerApi(0, 1, _quorum_api(80), _refuse_voter_change),
    81: ControllerApi(0, 0, _quorum_api(81), _refuse_voter_change),
    82: ControllerApi(0, 0, _quorum_api(82), _refuse_voter_change),
}
