"""Round trips for every message of every spec file at every version.

Values are drawn from a strategy derived from the spec itself: each field present at the
version gets a value of its type (ints over their whole range, non-ASCII strings, null where
the version allows it, small arrays, nested structs, tagged fields sometimes at their default
and sometimes not); fields the version lacks hold their defaults, which is what decoding fills
in. Then ``decode(encode(x)) == x`` and ``encode(decode(b)) == b``.

``KAFKALIKE_HYPOTHESIS_PROFILE=thorough`` runs many more examples per case.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalike.protocol.codec import schema
from kafkalike.protocol.spec import FieldSpec, MessageSpec, default_value, load_specs

settings.register_profile(
    "protocol-fast",
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("protocol-thorough", settings.get_profile("protocol-fast"), max_examples=300)
PROFILE = settings.get_profile("protocol-" + os.environ.get("KAFKALIKE_HYPOTHESIS_PROFILE", "fast"))

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def children(message: MessageSpec, f: FieldSpec) -> tuple[FieldSpec, ...]:
    return f.fields or message.structs[f.element_type].fields


def default_of(message: MessageSpec, f: FieldSpec) -> Any:
    """The value a field holds after decoding a version that does not carry it."""
    if f.is_struct and not f.is_array and f.default != "null":
        return {c.name: default_of(message, c) for c in children(message, f)}
    return default_value(f.type, f.default)


def primitive(type_: str, nullable: bool) -> st.SearchStrategy[Any]:
    if type_ in INT_RANGES:
        low, high = INT_RANGES[type_]
        base: st.SearchStrategy[Any] = st.integers(low, high)
    elif type_ == "bool":
        base = st.booleans()
    elif type_ == "float64":
        base = st.floats(allow_nan=False)
    elif type_ == "uuid":
        base = st.uuids() | st.just(default_value("uuid", None))
    elif type_ == "string":
        base = st.text(max_size=8)
    else:  # bytes, records
        base = st.binary(max_size=24)
    return st.none() | base if nullable else base


def field_strategy(message: MessageSpec, f: FieldSpec, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    tagged = f.tag is not None and version in f.tagged
    if version not in f.versions or (tagged and not flexible):
        return st.just(default_of(message, f))
    nullable = version in f.nullable
    if f.is_struct:
        element: st.SearchStrategy[Any] = struct_strategy(message, children(message, f), version, flexible)
    else:
        element = primitive(f.element_type, nullable and not f.is_array)
    value: st.SearchStrategy[Any]
    if f.is_array:
        value = st.lists(element, max_size=3)
        value = st.none() | value if nullable else value
    elif f.is_struct and nullable:
        value = st.none() | element
    else:
        value = element
    return st.just(default_of(message, f)) | value if tagged else value


def struct_strategy(
    message: MessageSpec, fields: tuple[FieldSpec, ...], version: int, flexible: bool
) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({f.name: field_strategy(message, f, version, flexible) for f in fields})


@cache
def message_strategy(spec_name: str, section: str, version: int) -> st.SearchStrategy[dict[str, Any]]:
    message = load_specs()[spec_name].messages[section]
    return struct_strategy(message, message.fields, version, version in message.flexible)


CASES = [
    pytest.param(spec.name, section, version, id=f"{spec.name}-{section}-v{version}")
    for spec in load_specs().values()
    for section in spec.messages
    for version in range(spec.versions.low, (spec.versions.high or spec.versions.low) + 1)
]


def test_every_version_of_every_spec_is_covered() -> None:
    assert len(CASES) > 500
    assert {"Produce", "Fetch", "RequestHeader", "ConsumerProtocolAssignment"} <= {c.values[0] for c in CASES}


@pytest.mark.parametrize(("spec_name", "section", "version"), CASES)
@PROFILE
@given(data=st.data())
def test_roundtrip(spec_name: str, section: str, version: int, data: st.DataObject) -> None:
    compiled = schema(spec_name, section, version)
    value = data.draw(message_strategy(spec_name, section, version), label="message")

    encoded = compiled.encode(value)
    decoded = compiled.decode(encoded)

    assert decoded == value
    assert compiled.encode(decoded) == encoded
