"""The requests a controller listener serves, each with the small :class:`ControllerContext`.

The quorum's own (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot of
``__cluster_metadata``) go to the node through the driver and are answered with what it answers;
DescribeQuorum with the node's per-voter state (on the leader; NOT_LEADER_OR_FOLLOWER elsewhere,
as Kafka's, and the admin client goes to the leader); DescribeCluster with endpoint type 2 lists
the voters' controller endpoints and the active controller (what ``--bootstrap-controller``
clients look up first, KIP-919); ApiVersions lists these APIs at the versions Kafka 4.0's
controller advertises for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkalike.protocol.api import RequestHeader
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.raft import messages as m
from kafkalike.raft.voters import SUPPORTED_KRAFT_VERSIONS
from kafkalike.server.quorum.channel import NetworkFaults
from kafkalike.server.quorum.describe import describe_quorum_answer, voter_nodes
from kafkalike.server.quorum.driver import QuorumDriver

API_VERSIONS_KEY = 18
DESCRIBE_QUORUM = 55
DESCRIBE_CLUSTER = 60
CONTROLLER_ENDPOINT = 2
NOT_REQUESTED = -(2**31)


class ControllerApis(Protocol):
    """The controller's own APIs (CreateTopics, BrokerRegistration...: server/controller_host),
    served on the same listener when this node runs a controller."""

    def api_versions(self) -> Mapping[int, tuple[int, int]]: ...

    async def handle_request(
        self, header: RequestHeader, body: Message, listener_name: str
    ) -> Mapping[str, Any] | None: ...


@dataclass
class ControllerContext:
    """What a controller listener's handlers may touch."""

    driver: QuorumDriver
    cluster_id: str
    listener_name: str
    faults: NetworkFaults = field(default_factory=NetworkFaults)
    request_timeout_ms: int = 2000
    apis: ControllerApis | None = None  # the APIs not in HANDLERS go here


HandlerFn = Callable[[ControllerContext, RequestHeader, Message], Awaitable[Mapping[str, Any] | None]]


@dataclass(frozen=True)
class ControllerHandler:
    """One API a controller listener serves, at the versions Kafka 4.0's controller advertises."""

    min_version: int
    max_version: int
    fn: HandlerFn

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def api_versions_table(apis: ControllerApis | None = None) -> list[dict[str, int]]:
    """ApiVersions' list, derived from HANDLERS and the controller's APIs."""
    served = {key: (h.min_version, h.max_version) for key, h in HANDLERS.items()}
    if apis is not None:
        served = {**apis.api_versions(), **served}
    return [{"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in sorted(served.items())]


async def handle_api_versions(ctx: ControllerContext, header: RequestHeader, body: Message) -> Mapping[str, Any]:
    # The kraft.version range this controller supports: what a leader adding it as a voter checks.
    low, high = SUPPORTED_KRAFT_VERSIONS
    features = [{"name": m.KRAFT_VERSION_FEATURE, "min_version": low, "max_version": high}]
    return {
        "error_code": ErrorCode.NONE,
        "api_keys": api_versions_table(ctx.apis),
        "throttle_time_ms": 0,
        "supported_features": features,
    }


def request_source(api_key: int, body: Message) -> int:
    """The node a quorum request comes from, as its body names it."""
    if api_key == m.FETCH:
        return m.fetch_replica_id(body)
    if api_key == m.FETCH_SNAPSHOT:
        return int(body.get("replica_id", -1))
    p = m.partition_of(body)
    if p is None:
        return -1
    if api_key == m.VOTE:
        return int(p.get("replica_id", p.get("candidate_id", -1)))
    return int(p.get("leader_id", -1))


async def handle_raft_request(ctx: ControllerContext, header: RequestHeader, body: Message) -> Mapping[str, Any] | None:
    """A quorum request, answered by the node; None (no answer) when the network fault hook
    cuts its sender off, or the node gave none in time."""
    source = request_source(header.api_key, body)
    if ctx.faults.blocks(source, ctx.driver.node_id):
        return None
    timeout_ms = ctx.request_timeout_ms
    if header.api_key == m.FETCH:
        timeout_ms += max(0, int(body.get("max_wait_ms", 0)))
    answer = await ctx.driver.request(header.api_key, body, source, timeout_ms / 1000)
    if answer is not None and header.api_key == m.FETCH and header.api_version < m.FETCH_NODE_ENDPOINTS_VERSION:
        return m.without_node_endpoints(answer)
    return answer


async def handle_describe_quorum(ctx: ControllerContext, header: RequestHeader, body: Message) -> Mapping[str, Any]:
    voters = await ctx.driver.voter_endpoints()
    return await describe_quorum_answer(body, ctx.driver.describe, voter_nodes(voters, ctx.listener_name))


async def handle_describe_cluster(ctx: ControllerContext, header: RequestHeader, body: Message) -> Mapping[str, Any]:
    """Kafka's computeDescribeClusterResponse on a controller: only endpoint type 2."""
    endpoint_type = int(body.get("endpoint_type", 1))
    if endpoint_type != CONTROLLER_ENDPOINT:
        error = ErrorCode.INVALID_REQUEST if header.api_version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        if endpoint_type not in (1, 2):
            error = ErrorCode.INVALID_REQUEST if header.api_version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            message = f"Unsupported endpoint type {endpoint_type}"
        else:
            message = "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"
        return {"error_code": error, "error_message": message, "cluster_id": "", "brokers": []}
    in_force = await ctx.driver.voter_endpoints()
    voters = {v.key.node_id: v for v in in_force}
    leader = ctx.driver.leader_id
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": CONTROLLER_ENDPOINT,
        "cluster_id": ctx.cluster_id,
        "controller_id": leader if leader in voters else -1,
        "brokers": [
            {"broker_id": v.key.node_id, "host": v.host, "port": v.port, "rack": None, "is_fenced": False}
            for v in in_force
        ],
        "cluster_authorized_operations": NOT_REQUESTED,
    }


HANDLERS: dict[int, ControllerHandler] = {
    m.FETCH: ControllerHandler(4, 18, handle_raft_request),  # from v4 (KIP-896); v18: KIP-1166
    API_VERSIONS_KEY: ControllerHandler(0, 4, handle_api_versions),
    m.VOTE: ControllerHandler(0, 2, handle_raft_request),
    m.BEGIN_QUORUM_EPOCH: ControllerHandler(0, 1, handle_raft_request),
    m.END_QUORUM_EPOCH: ControllerHandler(0, 1, handle_raft_request),
    DESCRIBE_QUORUM: ControllerHandler(0, 2, handle_describe_quorum),
    m.FETCH_SNAPSHOT: ControllerHandler(0, 1, handle_raft_request),
    DESCRIBE_CLUSTER: ControllerHandler(0, 2, handle_describe_cluster),
}
