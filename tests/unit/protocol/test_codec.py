"""Our codec against kafka-python's own protocol encoder, byte for byte.

kafka-python 3 builds its request and response classes from Apache Kafka's JSON message
definitions and has its own encoder and decoder, so it is an independent oracle. For every
API and version both sides know, a value derived from our spec is encoded by kafka-python and
decoded by us (every field must come back), encoded by us (the bytes must be identical) and,
the other way round, encoded by us and decoded by kafka-python. Headers too: a whole framed
request or response must equal kafka-python's for the same correlation id and client id.
"""

from __future__ import annotations

import importlib
import random
import struct
import uuid
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kafkalike.protocol.api import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kafkalike.protocol.codec import request_schema, response_schema, schema
from kafkalike.protocol.spec import FieldSpec, MessageSpec, VersionRange, api_specs, default_value, load_specs

KP_PACKAGES = (
    "kafka.protocol.metadata",
    "kafka.protocol.admin",
    "kafka.protocol.consumer",
    "kafka.protocol.producer",
    "kafka.protocol.sasl",
)
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
STRINGS = ("orders", "δοκιμή-τόπος", "日本語のトピック", "emoji-🚀", "x" * 300, "")


@cache
def kp_classes() -> dict[tuple[int, str], type[ApiMessage]]:
    """kafka-python's message classes by (api key, 'request' | 'response')."""
    found: dict[tuple[int, str], type[ApiMessage]] = {}
    for package in KP_PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            cls: Any = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, ApiMessage):
                message: Any = cls
                found[(message.API_KEY, message.type)] = message
    return found


def kp_official_versions(cls: type[ApiMessage] | type[ApiData]) -> range:
    """The versions kafka-python's JSON really describes (it pretends every class starts at 0)."""
    versions = VersionRange.parse(cls.json["validVersions"])
    return range(versions.low, (versions.high if versions.high is not None else versions.low) + 1)


# --- values derived from our spec -------------------------------------------------------------


def children(message: MessageSpec, f: FieldSpec) -> tuple[FieldSpec, ...]:
    return f.fields or message.structs[f.element_type].fields


def default_of(message: MessageSpec, f: FieldSpec) -> Any:
    if f.is_struct and not f.is_array and f.default != "null":
        return {c.name: default_of(message, c) for c in children(message, f)}
    return default_value(f.type, f.default)


class Sampler:
    """Deterministic values for a message version.

    ``full`` fills every field with a non-default, non-null value (so every tagged field is
    written); otherwise nulls, defaults and empty arrays are mixed in at random.
    """

    def __init__(self, seed: int, full: bool) -> None:
        self.rng = random.Random(seed)
        self.full = full

    def message(self, message: MessageSpec, version: int) -> dict[str, Any]:
        return self.struct(message, message.fields, version, version in message.flexible)

    def struct(
        self, message: MessageSpec, fields: tuple[FieldSpec, ...], version: int, flexible: bool
    ) -> dict[str, Any]:
        return {f.name: self.field(message, f, version, flexible) for f in fields}

    def field(self, message: MessageSpec, f: FieldSpec, version: int, flexible: bool) -> Any:
        tagged = f.tag is not None and version in f.tagged
        if version not in f.versions or (tagged and not flexible):
            return default_of(message, f)
        if not self.full:
            if version in f.nullable and self.rng.random() < 0.3:
                return None
            if tagged and self.rng.random() < 0.5:
                return default_of(message, f)
        if f.is_array:
            count = self.rng.randint(1, 2) if self.full else self.rng.randint(0, 2)
            return [self.element(message, f, version, flexible) for _ in range(count)]
        value = self.element(message, f, version, flexible)
        if tagged and value == default_of(message, f):
            value = not value if f.type == "bool" else value + 1
        return value

    def element(self, message: MessageSpec, f: FieldSpec, version: int, flexible: bool) -> Any:
        rng, type_ = self.rng, f.element_type
        if f.is_struct:
            return self.struct(message, children(message, f), version, flexible)
        if type_ in INT_RANGES:
            return rng.randint(*INT_RANGES[type_])
        if type_ == "bool":
            return rng.random() < 0.5
        if type_ == "float64":
            return rng.uniform(-1e9, 1e9)
        if type_ == "uuid":
            return uuid.UUID(int=rng.getrandbits(128))
        if type_ == "string":
            return rng.choice(STRINGS[:-1] if self.full else STRINGS) + str(rng.randint(0, 99))
        return rng.randbytes(rng.randint(1 if self.full else 0, 40))  # bytes, records


# --- our values <-> kafka-python objects ------------------------------------------------------


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def pairs(ours: tuple[FieldSpec, ...], theirs: Any, version: int) -> Iterator[tuple[FieldSpec, Any]]:
    """Our fields and kafka-python's, matched by position among those present at ``version``."""
    mine = [f for f in ours if version in f.versions]
    other = [k for k in theirs if k.for_version_q(version)]
    # kafka-python renames a few int32 authorized-operations fields to 'authorized_operations'.
    assert len(mine) == len(other), ([f.name for f in mine], [k.name for k in other])
    for f, k in zip(mine, other, strict=True):
        assert _norm(f.name).endswith(_norm(k.name)), (f.name, k.name)
        yield f, k


def _signed32(n: int) -> int:
    return n - (1 << 32) if n >= 1 << 31 else n


def to_kp(
    message: MessageSpec, fields: tuple[FieldSpec, ...], kp_fields: Any, make: Any, value: Any, at: int, **extra: Any
) -> Any:
    kwargs: dict[str, Any] = {}
    for f, k in pairs(fields, kp_fields, at):
        v = value[f.name]
        if f.tag is not None and at in f.tagged and v == default_of(message, f):
            # Left unset: kafka-python's default for a tagged struct is None, and it writes any
            # struct that is not None, where Kafka (and we) leave out one equal to its default.
            continue
        if v is None:
            kwargs[k.name] = None
        elif f.is_struct and f.is_array:
            inner = k.array_of
            kwargs[k.name] = [to_kp(message, children(message, f), inner._fields, inner.data_class, e, at) for e in v]
        elif f.is_struct:
            kwargs[k.name] = to_kp(message, children(message, f), k._fields, k.data_class, v, at)
        elif k.type_str == "bitfield":
            kwargs[k.name] = {bit for bit in range(32) if v & (1 << bit)}
        else:
            kwargs[k.name] = v
    return make(**kwargs, **extra)


def from_kp(message: MessageSpec, fields: tuple[FieldSpec, ...], kp_fields: Any, obj: Any, version: int) -> Any:
    """kafka-python's decoded object as our field names and values, fields of ``version`` only."""
    out: dict[str, Any] = {}
    for f, k in pairs(fields, kp_fields, version):
        v = getattr(obj, k.name)
        if v is None and f.tag is not None and version in f.tagged:
            out[f.name] = default_of(message, f)
        elif v is None:
            out[f.name] = None if k.type_str != "bitfield" else -(2**31)
        elif f.is_struct and f.is_array:
            out[f.name] = [from_kp(message, children(message, f), k.array_of._fields, e, version) for e in v]
        elif f.is_struct:
            out[f.name] = from_kp(message, children(message, f), k._fields, v, version)
        elif k.type_str == "bitfield":
            out[f.name] = _signed32(sum(1 << bit for bit in v))
        elif isinstance(v, memoryview):
            out[f.name] = v.tobytes()
        elif isinstance(v, list):
            out[f.name] = [e.tobytes() if isinstance(e, memoryview) else e for e in v]
        else:
            out[f.name] = v
    return out


def project(message: MessageSpec, fields: tuple[FieldSpec, ...], value: Any, version: int) -> dict[str, Any]:
    """Our value restricted to the fields ``version`` has (what kafka-python decodes)."""
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        v = value[f.name]
        if v is not None and f.is_struct:
            sub = children(message, f)
            v = [project(message, sub, e, version) for e in v] if f.is_array else project(message, sub, v, version)
        out[f.name] = v
    return out


# --- the cases -------------------------------------------------------------------------------


def _cases() -> list[Any]:
    cases = []
    for (key, section), cls in sorted(kp_classes().items()):
        spec = api_specs().get(key)
        if spec is None:
            continue
        for version in kp_official_versions(cls):
            if version in spec.versions:
                cases.append(pytest.param(key, section, version, id=f"{spec.name}-{section}-v{version}"))
    return cases


CASES = _cases()

# What must always be compared, whatever else kafka-python happens to know.
REPRESENTATIVE = {
    "Produce": [3, 8, 9, 12],
    "Fetch": [4, 11, 12, 17],
    "Metadata": [0, 1, 9, 12, 13],
    "ListOffsets": [1, 6],
    "ApiVersions": [0, 3, 4],
    "FindCoordinator": [0, 4],
    "JoinGroup": [0, 5, 6, 9],
    "SyncGroup": [0, 4],
    "Heartbeat": [0, 4],
    "OffsetCommit": [2, 8],
    "OffsetFetch": [1, 8],
    "CreateTopics": [2, 5],
    "DeleteTopics": [1, 6],
    "InitProducerId": [0, 4],
    "DescribeConfigs": [1, 4],
    "DescribeCluster": [0],
    "LeaveGroup": [0, 4],
    "DescribeGroups": [0, 5],
    "ListGroups": [0, 4],
    "SaslHandshake": [0, 1],
    "SaslAuthenticate": [0, 2],
    "AddPartitionsToTxn": [0, 4],
    "EndTxn": [0, 3],
    "TxnOffsetCommit": [0, 3],
    "OffsetForLeaderEpoch": [2, 4],
    "DescribeTopicPartitions": [0],
    "CreatePartitions": [0, 2],
}


def test_representative_versions_are_all_compared() -> None:
    compared = {(c.values[0], c.values[1], c.values[2]) for c in CASES}
    by_name = {s.name: s.key for s in api_specs().values()}
    missing = [
        (name, section, v)
        for name, versions in REPRESENTATIVE.items()
        for v in versions
        for section in ("request", "response")
        if (by_name[name], section, v) not in compared
    ]
    assert missing == []


def _value(key: int, section: str, version: int, seed: int) -> dict[str, Any]:
    spec = api_specs()[key]
    value = Sampler(seed * 1000 + key * 20 + version, full=seed == 0).message(spec.messages[section], version)
    if key == 18 and section == "response":
        # kafka-python decodes any ApiVersions response with an error as v0 (what brokers send).
        value["error_code"] = 0
    return value


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("key", "section", "version"), CASES)
def test_same_bytes_as_kafka_python(key: int, section: str, version: int, seed: int) -> None:
    spec = api_specs()[key]
    message = spec.messages[section]
    ours = schema(spec.name, section, version)
    cls = kp_classes()[(key, section)]
    value = _value(key, section, version, seed)

    theirs = to_kp(message, message.fields, cls._struct._fields, cls, value, version, version=version)
    kp_bytes = bytes(theirs.encode(version=version))

    assert ours.decode(kp_bytes) == value
    assert ours.encode(value) == kp_bytes
    decoded_by_kp = cls.decode(ours.encode(value), version=version)
    assert from_kp(message, message.fields, cls._struct._fields, decoded_by_kp, version) == project(
        message, message.fields, value, version
    )


@pytest.mark.parametrize(("key", "section", "version"), CASES)
def test_framed_with_header_like_kafka_python(key: int, section: str, version: int) -> None:
    spec = api_specs()[key]
    message = spec.messages[section]
    cls = kp_classes()[(key, section)]
    value = _value(key, section, version, seed=0)
    theirs = to_kp(message, message.fields, cls._struct._fields, cls, value, version, version=version)
    correlation_id = 0x7F00_0000 + key * 100 + version

    if section == "request":
        client_id = "client-ñ-" + spec.name
        theirs.with_header(correlation_id=correlation_id, client_id=client_id)
        kp_frame = bytes(theirs.encode(header=True, framed=True))
        frame = encode_request(RequestHeader(key, version, correlation_id, client_id), value)
        assert frame == kp_frame
        header, body = decode_request(kp_frame[4:])
        assert header == RequestHeader(key, version, correlation_id, client_id)
        assert body == value
    else:
        theirs.with_header(correlation_id=correlation_id)
        kp_frame = bytes(theirs.encode(header=True, framed=True))
        frame = encode_response(key, version, correlation_id, value)
        assert frame == kp_frame
        assert decode_response(key, version, kp_frame[4:]) == (correlation_id, value)
        decoded = cls.decode(frame, version=version, header=True, framed=True)
        assert decoded.header.correlation_id == correlation_id


@pytest.mark.parametrize("client_id", [None, "", "kafka-python-3.0.12"])
@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_request_header_client_id(client_id: str | None, version: int) -> None:
    body = {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}
    request = ApiVersionsRequest(version=version, **(body if version >= 3 else {}))
    request.with_header(correlation_id=7, client_id=client_id)
    expected = bytes(request.encode(header=True, framed=True))
    assert encode_request(RequestHeader(18, version, 7, client_id), body) == expected
    header, decoded = decode_request(expected[4:])
    assert header.client_id == client_id
    if version >= 3:
        assert (decoded.client_software_name, decoded.client_software_version) == ("kafka-python", "3.0.12")
    else:
        assert (decoded.client_software_name, decoded.client_software_version) == ("", "")


# --- explicit messages, readable values ------------------------------------------------------

TOPIC_ID = uuid.UUID("8f14e45f-ceea-467f-a8d9-5f6b2f5c6a1e")


def test_metadata_v12_request_fields_and_bytes() -> None:
    request = MetadataRequest(
        version=12,
        topics=[MetadataRequest.MetadataRequestTopic(topic_id=TOPIC_ID, name="orders")],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )
    kp_bytes = bytes(request.encode(version=12))
    decoded = request_schema(3, 12).decode(kp_bytes)
    assert decoded.topics[0].topic_id == TOPIC_ID
    assert decoded.topics[0].name == "orders"
    assert decoded.allow_auto_topic_creation is False
    assert decoded.include_topic_authorized_operations is True
    assert decoded.include_cluster_authorized_operations is False  # v8-v10 only: default
    # compact array of 1 (0x02), uuid, compact string "orders", element tags, two bools, tags
    assert kp_bytes == b"\x02" + TOPIC_ID.bytes + b"\x07orders" + b"\x00" + b"\x00\x01" + b"\x00"
    assert request_schema(3, 12).encode(decoded) == kp_bytes


def test_metadata_v0_and_v1_null_topics() -> None:
    # v0 cannot say "all topics" with null; v1+ can, as an int32 -1 count.
    assert request_schema(3, 0).encode({"topics": []}) == b"\x00\x00\x00\x00"
    assert request_schema(3, 1).encode({"topics": None}) == b"\xff\xff\xff\xff"
    assert bytes(MetadataRequest(version=1, topics=None).encode(version=1)) == b"\xff\xff\xff\xff"
    assert request_schema(3, 1).decode(b"\xff\xff\xff\xff").topics is None


def _api_versions_response(version: int, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "error_code": 0,
        "api_keys": [
            {"api_key": 0, "min_version": 3, "max_version": 12},
            {"api_key": 18, "min_version": 0, "max_version": 4},
        ],
        "throttle_time_ms": 0,
    }
    return body | fields


def test_api_versions_v3_response_default_tagged_fields_are_omitted() -> None:
    body = _api_versions_response(3, finalized_features_epoch=-1)
    encoded = response_schema(18, 3).encode(body)
    # error, compact array (2+1) of 3 x int16 + empty tags each, throttle, empty tagged section
    assert encoded == (
        b"\x00\x00"
        + b"\x03"
        + b"\x00\x00\x00\x03\x00\x0c\x00"
        + b"\x00\x12\x00\x00\x00\x04\x00"
        + b"\x00\x00\x00\x00"
        + b"\x00"
    )
    kp = ApiVersionsResponse(
        version=3,
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=12),
            ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4),
        ],
        throttle_time_ms=0,
        finalized_features_epoch=-1,
    )
    assert bytes(kp.encode(version=3)) == encoded
    decoded = response_schema(18, 3).decode(encoded)
    assert decoded.finalized_features_epoch == -1
    assert decoded.supported_features == []
    assert decoded.zk_migration_ready is False


def test_api_versions_v3_response_non_default_tagged_fields_are_written() -> None:
    body = _api_versions_response(
        3,
        finalized_features_epoch=42,
        finalized_features=[{"name": "metadata.version", "max_version_level": 20, "min_version_level": 1}],
    )
    encoded = response_schema(18, 3).encode(body)
    tags = encoded[len(response_schema(18, 3).encode(_api_versions_response(3))) - 1 :]
    feature = b"\x02" + b"\x11metadata.version" + b"\x00\x14\x00\x01\x00"
    assert tags == b"\x02" + b"\x01\x08" + struct.pack(">q", 42) + b"\x02" + bytes([len(feature)]) + feature
    kp = ApiVersionsResponse.decode(encoded, version=3)
    assert kp.finalized_features_epoch == 42
    assert [(f.name, f.max_version_level, f.min_version_level) for f in kp.finalized_features] == [
        ("metadata.version", 20, 1)
    ]
    decoded = response_schema(18, 3).decode(encoded)
    assert decoded.finalized_features_epoch == 42
    assert decoded.finalized_features[0].name == "metadata.version"
    assert response_schema(18, 3).encode(decoded) == encoded


def test_api_versions_v3_response_unknown_tag_is_skipped() -> None:
    base = response_schema(18, 3).encode(_api_versions_response(3))
    with_unknown = base[:-1] + b"\x01" + b"\x63\x03abc"  # tag 99, 3 bytes
    assert response_schema(18, 3).decode(with_unknown) == response_schema(18, 3).decode(base)


def test_api_versions_v0_response_drops_v1_and_tagged_fields() -> None:
    body = _api_versions_response(0, throttle_time_ms=100, finalized_features_epoch=42)
    encoded = response_schema(18, 0).encode(body)
    assert encoded == b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x03\x00\x0c" + b"\x00\x12\x00\x00\x00\x04"
    decoded = response_schema(18, 0).decode(encoded)
    assert (decoded.throttle_time_ms, decoded.finalized_features_epoch) == (0, -1)


def test_produce_v9_request_records_are_opaque_bytes() -> None:
    records = bytes(range(256)) * 4
    kp = ProduceRequest(
        version=9,
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="orders",
                partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=3, records=records)],
            )
        ],
    )
    kp_bytes = bytes(kp.encode(version=9))
    decoded = request_schema(0, 9).decode(kp_bytes)
    assert decoded.transactional_id is None
    assert (decoded.acks, decoded.timeout_ms) == (-1, 30000)
    partition = decoded.topic_data[0].partition_data[0]
    assert (decoded.topic_data[0].name, partition.index, partition.records) == ("orders", 3, records)
    assert request_schema(0, 9).encode(decoded) == kp_bytes


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("ConsumerProtocolSubscription", ConsumerProtocolSubscription),
        ("ConsumerProtocolAssignment", ConsumerProtocolAssignment),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_consumer_protocol_embedded_messages(ours: str, theirs: type[ApiData], seed: int) -> None:
    spec = load_specs()[ours]
    message = spec.messages["message"]
    for version in kp_official_versions(theirs):
        value = Sampler(seed * 100 + version, full=seed == 0).message(message, version)
        kp = to_kp(message, message.fields, theirs._struct._fields, theirs, value, version, version=version)
        body = schema(ours, "message", version).encode(value)
        # kafka-python prefixes the int16 version, as the consumer protocol does on the wire.
        assert bytes(kp.encode(version=version, header=True)) == struct.pack(">h", version) + body
        assert bytes(kp.encode(version=version, header=False)) == body
        assert schema(ours, "message", version).decode(body) == value
        decoded = theirs.decode(struct.pack(">h", version) + body)
        assert from_kp(message, message.fields, theirs._struct._fields, decoded, version) == project(
            message, message.fields, value, version
        )


def test_consumer_protocol_subscription_v0_known_bytes() -> None:
    body = schema("ConsumerProtocolSubscription", "message", 0).encode({"topics": ["a", "bc"], "user_data": b"\x01"})
    assert body == b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc" + b"\x00\x00\x00\x01\x01"
    kp = ConsumerProtocolSubscription(version=0, topics=["a", "bc"], user_data=b"\x01")
    assert bytes(kp.encode(version=0, header=False)) == body
