"""A broker of a cluster: its metadata is the quorum's committed log, its changes go to the
active controller (Kafka's brokers forward admin requests to the controller).

- :class:`ImageTopics` shows the published image (``controller.image.MetadataImage``) through
  the accessors the broker's handlers and coordinators read (``topics`` by name with partition
  counts and configs, ``topic_names_by_id``, ``broker_configs``), computed per name on demand.
- :class:`ClusterController` is what the broker's metadata operations become: each is one
  request over the :class:`~kafkalike.server.controller_channel.ControllerChannel` (CreateTopics
  v7, CreatePartitions v3, DeleteTopics v6, IncrementalAlterConfigs v1, AllocateProducerIds v0),
  answered once the controller answered *and* this broker's published image shows the change (so
  a client that creates a topic through this broker can produce to it here next), bounded by the
  request's timeout. ``forward`` does the same for a client's own request, passed on as it came.

Kafka's brokers answer a forwarded CreateTopics as soon as the controller answered and let
Metadata lag until their metadata cache catches up; waiting for the image here answers the same
response a little later, and never shows a client a topic the broker it asked cannot serve yet.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from kafkalike.controller.api_error import ApiError, ControllerError
from kafkalike.controller.image import BROKER_RESOURCE, MetadataImage
from kafkalike.protocol.api import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.clock import Clock
from kafkalike.server.controller_channel import ControllerChannel, ControllerUnavailable
from kafkalike.server.metadata_publisher import MetadataPublisher
from kafkalike.server.producer_ids import ProducerIdManager
from kafkalike.server.quorum.describe import TIMED_OUT_MESSAGE, timed_out

log = logging.getLogger("kafkalike.cluster_metadata")

CREATE_TOPICS, DELETE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 33, 37, 44
ALLOCATE_PRODUCER_IDS = 67
DESCRIBE_QUORUM = 55
CONFIG_SET, CONFIG_DELETE = 0, 1
DEFAULT_TIMEOUT_MS = 30_000
ZERO_UUID = uuid.UUID(int=0)


@dataclass
class TopicView:
    """A topic as handlers and coordinators read it: its name, id, partition count and configs."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class TopicsImage(Protocol):
    """What handlers and coordinators read of the metadata (a broker's ``ImageTopics``)."""

    @property
    def topics(self) -> Mapping[str, TopicView]: ...

    @property
    def topic_names_by_id(self) -> Mapping[uuid.UUID, str]: ...

    @property
    def broker_configs(self) -> Mapping[str, Mapping[str, str]]: ...


class _Topics(Mapping[str, TopicView]):
    def __init__(self, image: MetadataImage) -> None:
        self._image = image

    def __getitem__(self, name: str) -> TopicView:
        topic = self._image.topics_by_name[name]
        return TopicView(topic.name, topic.topic_id, len(topic.partitions), dict(self._image.topic_configs(name)))

    def __iter__(self) -> Iterator[str]:
        return iter(self._image.topics_by_name)

    def __len__(self) -> int:
        return len(self._image.topics_by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._image.topics_by_name


class _NamesById(Mapping[uuid.UUID, str]):
    def __init__(self, image: MetadataImage) -> None:
        self._image = image

    def __getitem__(self, topic_id: uuid.UUID) -> str:
        return self._image.topics_by_id[topic_id].name

    def __iter__(self) -> Iterator[uuid.UUID]:
        return iter(self._image.topics_by_id)

    def __len__(self) -> int:
        return len(self._image.topics_by_id)


class ImageTopics:
    """The published image, as the broker's handlers read topics and broker configs."""

    def __init__(self, image: MetadataImage) -> None:
        self.cluster = image
        self.topics: Mapping[str, TopicView] = _Topics(image)
        self.topic_names_by_id: Mapping[uuid.UUID, str] = _NamesById(image)

    @property
    def broker_configs(self) -> Mapping[str, Mapping[str, str]]:
        return {r.name: values for r, values in self.cluster.configs.items() if r.type == BROKER_RESOURCE}


class ClusterController:
    """The broker's metadata operations over the controller channel (see the module docstring)."""

    def __init__(
        self,
        node_id: int,
        channel: ControllerChannel,
        publisher: MetadataPublisher,
        clock: Clock,
        committed_offset: Callable[[], int | None],
    ) -> None:
        """``committed_offset``: the last offset of the metadata log this node knows committed
        (None: not known yet)."""
        self.node_id = node_id
        self.committed_offset = committed_offset
        self.channel = channel
        self.publisher = publisher
        self.clock = clock
        self.broker_epoch = -1  # set by the broker's registration
        self.producer_ids = ProducerIdManager()
        self._producer_id_wanted = trio.Event()  # ``producer_ids`` asked for a block
        self._view: ImageTopics | None = None

    @property
    def image(self) -> ImageTopics:
        published = self.publisher.image
        if self._view is None or self._view.cluster is not published:
            self._view = ImageTopics(published)
        return self._view

    # -- waiting for the image -------------------------------------------------------------------

    def _deadline(self, timeout_ms: int | None) -> float:
        timeout = DEFAULT_TIMEOUT_MS if timeout_ms is None or timeout_ms <= 0 else timeout_ms
        return self.clock.monotonic_s() + timeout / 1000

    async def _until(self, check: Callable[[MetadataImage], bool], deadline_s: float, what: str) -> None:
        if not await self.publisher.wait_until(check, deadline_s):
            log.warning("node %d: %s answered by the controller, not yet in this broker's metadata", self.node_id, what)

    async def _request(self, api_key: int, version: int, body: Any, timeout_ms: int | None) -> Message:
        return await self.channel.request(
            api_key, version, body, timeout_ms=None if timeout_ms is None or timeout_ms <= 0 else timeout_ms
        )

    # -- a client's request, forwarded ------------------------------------------------------------

    async def forward(self, api_key: int, version: int, request: Message) -> Any:
        """The controller's answer to a client's CreateTopics / CreatePartitions / DeleteTopics /
        AlterConfigs / IncrementalAlterConfigs, once this broker's image shows what it did."""
        from kafkalike.server.controller_apis import CONTROLLER_APIS

        timeout_ms = request.get("timeout_ms")
        deadline = self._deadline(timeout_ms)
        try:
            response = await self._request(api_key, version, request, timeout_ms)
        except ControllerUnavailable as exc:
            error = ApiError(ErrorCode.REQUEST_TIMED_OUT, str(exc))
            refusal = {"throttle_time_ms": 0, **CONTROLLER_APIS[api_key].refusal(request, error)}
            # Shaped as a decoded response, as the controller's answers are.
            frame = encode_response(api_key, version, 0, refusal)
            return decode_response(api_key, version, memoryview(frame)[4:])[1]
        if request.get("validate_only"):
            return response
        if api_key == CREATE_TOPICS:
            # v5+ answers the partition count; before it, the topic's existence is what is known.
            made = {t.name: max(t.get("num_partitions") or 0, 0) for t in response.topics if t.error_code == 0}
            await self._until(lambda i: _has_topics(i, made), deadline, "CreateTopics")
        elif api_key == CREATE_PARTITIONS:
            grown = {t.name: t.count for t in request.topics}
            done = {r.name: grown[r.name] for r in response.results if r.error_code == 0 and r.name in grown}
            await self._until(lambda i: _has_topics(i, done), deadline, "CreatePartitions")
        elif api_key == DELETE_TOPICS:
            gone = [(r.name, r.get("topic_id") or ZERO_UUID) for r in response.responses if r.error_code == 0]
            await self._until(lambda i: _lacks_topics(i, gone), deadline, "DeleteTopics")
        else:
            await self._caught_up(deadline)
        return response

    async def forward_to_quorum(self, api_key: int, version: int, request: Message) -> Any:
        """A client's DescribeQuorum, AddRaftVoter or RemoveRaftVoter, passed on to the active
        controller as it came, as Kafka's broker forwards them; REQUEST_TIMED_OUT when no
        controller answered in time."""
        try:
            return await self.channel.request(api_key, version, request)
        except ControllerUnavailable:
            if api_key == DESCRIBE_QUORUM:
                return timed_out()
            return {
                "throttle_time_ms": 0,
                "error_code": ErrorCode.REQUEST_TIMED_OUT,
                "error_message": TIMED_OUT_MESSAGE,
            }

    async def _caught_up(self, deadline_s: float) -> None:
        """Until the image holds what the quorum had committed when the controller answered."""
        committed = self.committed_offset()
        if committed is not None:
            await self._until(lambda i: i.provenance.last_offset >= committed, deadline_s, "a config change")

    # -- the broker's own operations (auto-creation, internal topics, producer ids) ---------------

    async def create_topics(
        self, wanted: list[Any], validate_only: bool = False, timeout_ms: int | None = None
    ) -> list[TopicView | ControllerError]:
        """``wanted``: NewTopic (name, partitions, configs); per topic the topic or why not."""
        body = {
            "topics": [
                {
                    "name": t.name,
                    "num_partitions": t.partitions,
                    "replication_factor": t.replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                }
                for t in wanted
            ],
            "timeout_ms": timeout_ms or DEFAULT_TIMEOUT_MS,
            "validate_only": validate_only,
        }
        response = await self._checked(self.forward(CREATE_TOPICS, 7, request_message(CREATE_TOPICS, 7, body)))
        results: list[TopicView | ControllerError] = []
        for asked, answer in zip(wanted, response.topics, strict=False):
            if answer.error_code:
                results.append(ControllerError(ErrorCode(answer.error_code), answer.error_message))
            else:
                results.append(TopicView(asked.name, answer.topic_id, answer.num_partitions, dict(asked.configs)))
        return results

    async def grow_topics(
        self, wanted: list[tuple[str, int]], validate_only: bool = False
    ) -> list[TopicView | ControllerError]:
        body = {
            "topics": [{"name": n, "count": c, "assignments": None} for n, c in wanted],
            "timeout_ms": DEFAULT_TIMEOUT_MS,
            "validate_only": validate_only,
        }
        response = await self._checked(self.forward(CREATE_PARTITIONS, 3, request_message(CREATE_PARTITIONS, 3, body)))
        results: list[TopicView | ControllerError] = []
        for (name, _), answer in zip(wanted, response.results, strict=False):
            if answer.error_code:
                results.append(ControllerError(ErrorCode(answer.error_code), answer.error_message))
            else:
                results.append(self.image.topics[name] if name in self.image.topics else TopicView(name, ZERO_UUID, 0))
        return results

    async def delete_topics(self, names: list[str]) -> list[TopicView | ControllerError]:
        before = self.image.topics
        known = {n: before[n] for n in names if n in before}
        body = {"topics": [{"name": n, "topic_id": ZERO_UUID} for n in names], "timeout_ms": DEFAULT_TIMEOUT_MS}
        response = await self._checked(self.forward(DELETE_TOPICS, 6, request_message(DELETE_TOPICS, 6, body)))
        results: list[TopicView | ControllerError] = []
        for name, answer in zip(names, response.responses, strict=False):
            if answer.error_code:
                results.append(ControllerError(ErrorCode(answer.error_code), answer.error_message))
            else:
                results.append(known.get(name) or TopicView(name, answer.topic_id, 0))
        return results

    async def set_configs(self, resource_type: int, resource_name: str, changes: Mapping[str, str | None]) -> None:
        configs = [
            {"name": k, "config_operation": CONFIG_SET if v is not None else CONFIG_DELETE, "value": v}
            for k, v in changes.items()
        ]
        body = {
            "resources": [{"resource_type": resource_type, "resource_name": resource_name, "configs": configs}],
            "validate_only": False,
        }
        response = await self._checked(
            self.forward(INCREMENTAL_ALTER_CONFIGS, 1, request_message(INCREMENTAL_ALTER_CONFIGS, 1, body))
        )
        (answer,) = response.responses
        if answer.error_code:
            raise ControllerError(ErrorCode(answer.error_code), answer.error_message)

    async def create_internal_topic(
        self, name: str, partitions: int, configs: dict[str, str], replication_factor: int = -1
    ) -> bool:
        """True if this call created it; ControllerError when the controller refused it."""
        if name in self.image.topics:
            return False
        from kafkalike.server.broker import NewTopic

        (result,) = await self.create_topics([NewTopic(name, partitions, configs, replication_factor)])
        if isinstance(result, ControllerError):
            if result.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return False
            raise result
        return True

    async def reserve_producer_id(self) -> None:
        """Nothing to wait for: ``allocate_producer_id`` never waits for the controller."""

    def allocate_producer_id(self) -> int:
        """The next producer id (``producer_ids``); NoProducerId (COORDINATOR_LOAD_IN_PROGRESS)
        while no block has an id left, a block being asked for in the background meanwhile."""
        try:
            return self.producer_ids.generate(self._now_ms())
        finally:
            if self.producer_ids.request_wanted:
                self._producer_id_wanted.set()

    def _now_ms(self) -> int:
        return int(self.clock.monotonic_s() * 1000)

    async def run_producer_ids(self) -> None:
        """Sends the AllocateProducerIds requests ``producer_ids`` asks for, one at a time, for
        as long as the broker serves (Kafka's RPCProducerIdManager over its controller channel)."""
        manager = self.producer_ids
        while True:
            await self._producer_id_wanted.wait()
            self._producer_id_wanted = trio.Event()
            if not manager.take_request():
                continue
            body = {"broker_id": self.node_id, "broker_epoch": self.broker_epoch}
            try:
                response = await self._request(ALLOCATE_PRODUCER_IDS, 0, body, None)
            except ControllerUnavailable as exc:
                log.info("node %d: no producer id block: %s", self.node_id, exc)
                manager.on_no_answer()
                continue
            manager.on_response(
                ErrorCode(response.error_code), response.producer_id_start, response.producer_id_len, self._now_ms()
            )

    async def _checked(self, call: Any) -> Any:
        """A request's response, or ControllerError (REQUEST_TIMED_OUT) when no controller answered."""
        try:
            return await call
        except ControllerUnavailable as exc:
            raise ControllerError(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from None


def request_message(api_key: int, version: int, body: dict[str, Any]) -> Message:
    """A request body as the decoder gives one (as a client's request reaches ``forward``)."""
    frame = encode_request(RequestHeader(api_key, version, 0, None), body)
    return decode_request(memoryview(frame)[4:])[1]


def _has_topics(image: MetadataImage, counts: Mapping[str, int]) -> bool:
    for name, count in counts.items():
        topic = image.topic(name)
        if topic is None or len(topic.partitions) < count:
            return False
    return True


def _lacks_topics(image: MetadataImage, gone: list[tuple[str | None, uuid.UUID]]) -> bool:
    for name, topic_id in gone:
        if name is not None and image.topic(name) is not None:
            return False
        if topic_id != ZERO_UUID and topic_id in image.topics_by_id:
            return False
    return True
