"""Dynamic configs as records: IncrementalAlterConfigs and AlterConfigs for topics and brokers
(Kafka's ConfigurationControlManager), and the topic-config checks CreateTopics shares.

A resource is a topic (type 2; it must exist) or a broker (type 4: ``""`` is the cluster-wide
default, else a registered broker's id, or this controller's own node). Each resource of a
request is checked and answered on its own; the records of every accepted one form the
operation. Checks, in order, with the codes and words clients see today:

- the resource: unknown topic UNKNOWN_TOPIC_OR_PARTITION, unknown broker or resource type
  INVALID_REQUEST; the same resource twice in a request INVALID_REQUEST ("Duplicate resource.");
- IncrementalAlterConfigs: a config named twice, a SET of null, an unknown operation
  INVALID_REQUEST; APPEND / SUBTRACT on a config that is not a list INVALID_CONFIG (an unset
  list starts from its default); AlterConfigs: a null value INVALID_REQUEST;
- the resulting set of the resource's dynamic configs: names a topic (or a broker) takes,
  broker configs dynamic ones, each value as its declaration (``kafkalike.configs``) accepts,
  and the set as a whole one a log can run with (``LogConfig``) and, for brokers, what the
  broker's ``broker_problem`` hook accepts. A bad topic value is INVALID_CONFIG, a bad broker
  value INVALID_REQUEST, as Kafka answers them.

Records are ConfigRecords (a null value removes a config). As Kafka (KAFKA-14136), a broker
resource gets a record for every config the request names even when its value is unchanged,
so that brokers reload it; a topic only for changed values. A resource's records follow the
order of Kafka's HashMap of its config names (``limits.java_hash_set_order``), so that the
same change is the same batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kafkalike.configs import (
    BROKER_CONFIGS,
    INTERNAL_TOPIC_CONFIGS,
    TOPIC_CONFIGS,
    ConfigType,
    is_topic_config,
    validate_value,
)
from kafkalike.configs import config_type as declared_type
from kafkalike.controller.api_error import ApiError, ControllerApiError
from kafkalike.controller.broker_partition_changes import elr_enabled
from kafkalike.controller.delta import ControllerResult
from kafkalike.controller.image import BROKER_RESOURCE, EMPTY, TOPIC_RESOURCE, ConfigResource, MetadataImage
from kafkalike.controller.limits import java_hash_set_order
from kafkalike.log.config import LogConfig
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.metadata_records import ApiMessageAndVersion, MetadataRecordType, metadata_record

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
MIN_INSYNC_REPLICAS = "min.insync.replicas"


def _no_value(name: str) -> str | None:
    return None


def _no_problem(resource_name: str, configs: Mapping[str, str]) -> str | None:
    return None


def _declared_topic_default(name: str) -> str | None:
    key = TOPIC_CONFIGS.get(name)
    return None if key is None else key.default


@dataclass(frozen=True)
class ConfigDefaults:
    """What the controller needs to know of the brokers' static configs (pure functions).

    ``topic_default(name)``: a topic's value of ``name`` when it sets none (the broker config it
    follows). ``broker_value(name)``: a broker config's current value, where an APPEND to an
    unset list starts. ``broker_problem(resource_name, dynamic)``: why a broker resource could
    not run with ``dynamic`` as its dynamic configs (listeners, socket server, every topic's log
    over the new defaults), or None; the broker's own checks, injected.
    """

    topic_default: Callable[[str], str | None] = _declared_topic_default
    broker_value: Callable[[str], str | None] = _no_value
    broker_problem: Callable[[str, Mapping[str, str]], str | None] = _no_problem


def log_config_problem(overrides: Mapping[str, str], topic_default: Callable[[str], str | None]) -> str | None:
    """Why a log with these topic configs over the defaults could not run, or None: every value
    passing its own check is not enough, the settings must stand together."""
    props: dict[str, str | None] = {name: overrides.get(name, topic_default(name)) for name in TOPIC_CONFIGS}
    props.update((name, overrides[name]) for name in INTERNAL_TOPIC_CONFIGS if name in overrides)
    try:
        LogConfig.from_properties(props)
    except ValueError as exc:
        return str(exc)
    return None


def topic_configs_problem(configs: Mapping[str, str], defaults: ConfigDefaults) -> str | None:
    """Why a new or changed topic could not have these configs (INVALID_CONFIG), or None."""
    for name, value in configs.items():
        if not is_topic_config(name):
            return f"Unknown topic config name: {name}"
        problem = validate_value(name, value)
        if problem is not None:
            return problem
    return log_config_problem(configs, defaults.topic_default)


@dataclass(frozen=True, slots=True)
class AlterConfigsResourceResult:
    resource_type: int
    resource_name: str
    error: ApiError


def _config_record(resource: ConfigResource, name: str, value: str | None) -> ApiMessageAndVersion:
    return metadata_record(
        MetadataRecordType.CONFIG_RECORD,
        resource_type=resource.type,
        resource_name=resource.name,
        name=name,
        value=value,
    )


def _check_min_isr_under_elr(records: Iterable[ApiMessageAndVersion]) -> None:
    """Under eligible leader replicas (KIP-966) min.insync.replicas lives at the cluster level
    (and per topic): a broker's own value may not be set or deleted, the cluster's not removed
    (Kafka's isDisallowedBrokerMinIsrTransition / isDisallowedClusterMinIsrTransition)."""
    for r in records:
        if r.name != MIN_INSYNC_REPLICAS or r.resource_type != BROKER_RESOURCE:
            continue
        if r.resource_name != "":
            raise ControllerApiError(
                ErrorCode.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
            )
        if r.value is None:
            raise ControllerApiError(
                ErrorCode.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
            )


class ConfigurationControl:
    """Turns config changes into ConfigRecords against an image (see the module doc)."""

    def __init__(self, defaults: ConfigDefaults, node_id: int | None = None) -> None:
        self.defaults = defaults
        self.node_id = node_id  # this controller's own node: its broker resource is always known

    def current(self, image: MetadataImage, resource: ConfigResource) -> dict[str, str]:
        """The resource's dynamic configs; ControllerApiError for an unknown resource."""
        if resource.type == TOPIC_RESOURCE:
            if image.topic(resource.name) is None:
                raise ControllerApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.name} does not exist")
        elif resource.type == BROKER_RESOURCE:
            if resource.name != "" and not self._known_broker(image, resource.name):
                raise ControllerApiError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {resource.name}")
        else:
            raise ControllerApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.type}")
        return dict(image.configs.get(resource, EMPTY))

    def _known_broker(self, image: MetadataImage, name: str) -> bool:
        if not name.isascii() or not name.isdigit():
            return False
        broker_id = int(name)
        return broker_id in image.brokers or broker_id == self.node_id

    def incremental_alter_configs(
        self, image: MetadataImage, request: Message
    ) -> ControllerResult[list[AlterConfigsResourceResult]]:
        """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on single configs."""

        def changed(resource: ConfigResource, entry: Message) -> tuple[dict[str, str], list[str]]:
            configs = self.current(image, resource)
            names = [c.name for c in entry.configs]
            if len(names) != len(set(names)):
                raise ControllerApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            for op in entry.configs:
                self._apply_op(resource, configs, op)
            return configs, names

        return self._alter(image, request, changed)

    def alter_configs(
        self, image: MetadataImage, request: Message
    ) -> ControllerResult[list[AlterConfigsResourceResult]]:
        """AlterConfigs: the resource's whole set of dynamic configs replaced by the request's."""

        def replaced(resource: ConfigResource, entry: Message) -> tuple[dict[str, str], list[str]]:
            self.current(image, resource)
            new = {c.name: c.value for c in entry.configs}
            if any(v is None for v in new.values()):
                raise ControllerApiError(ErrorCode.INVALID_REQUEST, "Null value not supported for AlterConfigs")
            return new, list(new)

        return self._alter(image, request, replaced)

    def _alter(
        self,
        image: MetadataImage,
        request: Message,
        new_configs: Callable[[ConfigResource, Message], tuple[dict[str, str], list[str]]],
    ) -> ControllerResult[list[AlterConfigsResourceResult]]:
        seen = [ConfigResource(r.resource_type, r.resource_name) for r in request.resources]
        duplicated = {r for r in seen if seen.count(r) > 1}
        results: list[AlterConfigsResourceResult] = []
        records: list[ApiMessageAndVersion] = []
        for resource, entry in zip(seen, request.resources, strict=True):
            try:
                if resource in duplicated:
                    raise ControllerApiError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
                new, named = new_configs(resource, entry)
                self.check(resource, new)
                changes = self._records(image, resource, new, named)
                if elr_enabled(image):
                    _check_min_isr_under_elr(changes)
                records += changes
                error = ApiError.NONE
            except ControllerApiError as exc:
                error = exc.error
            results.append(AlterConfigsResourceResult(resource.type, resource.name, error))
        return ControllerResult.of([] if request.validate_only else records, results)

    def _records(
        self, image: MetadataImage, resource: ConfigResource, new: Mapping[str, str], named: Iterable[str]
    ) -> list[ApiMessageAndVersion]:
        old = image.configs.get(resource, EMPTY)
        on_broker = resource.type == BROKER_RESOURCE
        out = [
            _config_record(resource, name, new.get(name))
            for name in java_hash_set_order(named)
            if on_broker or old.get(name) != new.get(name)
        ]
        done = set(named)
        gone = [name for name in old if name not in new and name not in done]
        out += [_config_record(resource, name, None) for name in java_hash_set_order(gone)]
        return out

    def _apply_op(self, resource: ConfigResource, configs: dict[str, str], op: Message) -> None:
        name, value, kind = op.name, op.value, op.config_operation
        if kind == SET:
            if value is None:
                raise ControllerApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
            configs[name] = value
        elif kind == DELETE:
            configs.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            declared = BROKER_CONFIGS.get(name) if resource.type == BROKER_RESOURCE else None
            if declared is not None and declared.listed_when_set:
                # Kafka looks these dynamic-only configs up in the static config definitions.
                raise ControllerApiError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {name}")
            if declared_type(name) != ConfigType.LIST:
                verb = "append" if kind == APPEND else "subtract"
                raise ControllerApiError(
                    ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}"
                )
            base = configs.get(name)
            if base is None:
                on_topic = resource.type == TOPIC_RESOURCE and name in TOPIC_CONFIGS
                base = self.defaults.topic_default(name) if on_topic else self.defaults.broker_value(name)
            items = [v for v in (base or "").split(",") if v]
            given = [v for v in (value or "").split(",") if v]
            if kind == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            configs[name] = ",".join(items)
        else:
            raise ControllerApiError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {kind}")

    def check(self, resource: ConfigResource, new: Mapping[str, str]) -> None:
        """Refuse ``new`` as the resource's dynamic configs unless every value and the whole stand."""
        on_topic = resource.type == TOPIC_RESOURCE
        invalid = ErrorCode.INVALID_CONFIG if on_topic else ErrorCode.INVALID_REQUEST
        for name, value in new.items():
            if not (is_topic_config(name) if on_topic else name in BROKER_CONFIGS):
                raise ControllerApiError(
                    ErrorCode.INVALID_CONFIG, f"Unknown {'topic' if on_topic else 'broker'} config name: {name}"
                )
            if not on_topic and not BROKER_CONFIGS[name].dynamic:
                raise ControllerApiError(
                    ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({name})"
                )
            problem = validate_value(name, value)
            if problem is not None:
                raise ControllerApiError(invalid, problem)
        if on_topic:
            problem = log_config_problem(new, self.defaults.topic_default)
        else:
            problem = self.defaults.broker_problem(resource.name, new)
        if problem is not None:
            raise ControllerApiError(invalid, problem)
