"""Loader for this project's protocol spec files (``protocol_specs/*.kspec``).

The format, one file per API (or embedded message)::

    # comments start with '#'
    api 0 Produce            # or: ``data NAME`` (embedded schema), ``header NAME``
    versions 0-12            # every version this file describes
    flexible 9+              # versions that use compact encodings and tagged fields

    request                  # section: request | response | message
      acks  int16  0+
      topic_data  []TopicProduceData  0+
        name  string  0+  entity=topicName key
    struct Shared  0+        # a named struct for the section above, referenced by type
      a  int32  0+

A field line is ``name type versions [attributes]``. Types: bool int8 int16 int32
int64 uint16 uint32 float64 string bytes records uuid, ``[]T`` for arrays, and a
struct name. A field whose struct is defined inline has its fields indented under it.
Attributes: ``nullable=R`` ``tag=N`` ``tagged=R`` ``default=V`` ``entity=NAME``
``flexible=R`` (field-level override), ``ignorable`` and ``key``. Version ranges are
``N``, ``N+``, ``N-M`` or ``none``.

This module only reads files; it knows nothing about bytes on the wire.
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

PRIMITIVE_TYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "string", "bytes", "records", "uuid"}
)
SECTIONS = ("request", "response", "message")


class SpecError(ValueError):
    """A spec file that does not follow the format."""


@dataclass(frozen=True)
class VersionRange:
    """An inclusive version range; ``high`` None means open-ended, low > high means empty."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            low, high = text.split("-", 1)
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.low <= version and (self.high is None or version <= self.high)

    @property
    def empty(self) -> bool:
        return self.high is not None and self.high < self.low

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high is None:
            return f"{self.low}+"
        if self.high == self.low:
            return str(self.low)
        return f"{self.low}-{self.high}"

    def intersect(self, other: VersionRange) -> VersionRange:
        low = max(self.low, other.low)
        highs = [h for h in (self.high, other.high) if h is not None]
        high = min(highs) if highs else None
        if high is not None and high < low:
            return NO_VERSIONS
        return VersionRange(low, high)


NO_VERSIONS = VersionRange(0, -1)


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    versions: VersionRange
    nullable: VersionRange = NO_VERSIONS
    tag: int | None = None
    tagged: VersionRange = NO_VERSIONS
    default: str | None = None
    entity: str | None = None
    ignorable: bool = False
    map_key: bool = False
    flexible: VersionRange | None = None
    fields: tuple[FieldSpec, ...] = ()

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """The type of one element for arrays, the type itself otherwise."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """True when the (element) type is a struct rather than a primitive."""
        return self.element_type not in PRIMITIVE_TYPES


@dataclass(frozen=True)
class StructSpec:
    name: str
    versions: VersionRange
    fields: tuple[FieldSpec, ...]


@dataclass(frozen=True)
class MessageSpec:
    """One section of a spec file: a request, a response or an embedded message."""

    kind: str
    name: str
    versions: VersionRange
    flexible: VersionRange
    fields: tuple[FieldSpec, ...]
    structs: dict[str, StructSpec]


@dataclass
class ApiSpec:
    """One spec file: an API (request and response), an embedded schema or a header."""

    kind: str  # "api", "data" or "header"
    name: str
    key: int | None
    versions: VersionRange
    flexible: VersionRange
    messages: dict[str, MessageSpec] = field(default_factory=dict)

    @property
    def request(self) -> MessageSpec:
        return self.messages["request"]

    @property
    def response(self) -> MessageSpec:
        return self.messages["response"]


@dataclass
class _Line:
    number: int
    indent: int
    words: list[str]


def _tokenize(text: str, source: str) -> list[_Line]:
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if "\t" in raw[: indent + 1]:
            raise SpecError(f"{source}:{number}: tabs are not allowed for indentation")
        if _PLAIN_LINE.fullmatch(raw):  # no quotes or escapes: what shlex would do, much faster
            words = raw.split("#", 1)[0].split()
        else:
            lexer = shlex.shlex(raw, posix=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            words = list(lexer)
        lines.append(_Line(number, indent, words))
    return lines


_PLAIN_LINE = re.compile(r"[ !#-&(-\[\]-~]*")  # printable ASCII and spaces, without quotes or backslashes


def _parse_field(lines: list[_Line], pos: int, source: str) -> tuple[FieldSpec, int]:
    line = lines[pos]
    if len(line.words) < 3:
        raise SpecError(f"{source}:{line.number}: expected 'name type versions [attributes]'")
    name, type_, versions, *attrs = line.words
    kwargs: dict[str, object] = {}
    for attr in attrs:
        key, sep, value = attr.partition("=")
        if key in ("nullable", "tagged", "flexible") and sep:
            kwargs[key] = VersionRange.parse(value)
        elif key == "tag" and sep:
            kwargs["tag"] = int(value)
        elif key == "default" and sep:
            kwargs["default"] = value
        elif key == "entity" and sep:
            kwargs["entity"] = value
        elif key == "ignorable" and not sep:
            kwargs["ignorable"] = True
        elif key == "key" and not sep:
            kwargs["map_key"] = True
        else:
            raise SpecError(f"{source}:{line.number}: unknown attribute {attr!r}")
    children, pos = _parse_fields(lines, pos + 1, line.indent, source)
    spec = FieldSpec(name=name, type=type_, versions=VersionRange.parse(versions), fields=tuple(children), **kwargs)  # type: ignore[arg-type]
    if children and not spec.is_struct:
        raise SpecError(f"{source}:{line.number}: a {type_} field cannot have fields")
    return spec, pos


def _parse_fields(lines: list[_Line], pos: int, parent_indent: int, source: str) -> tuple[list[FieldSpec], int]:
    fields: list[FieldSpec] = []
    child_indent: int | None = None
    while pos < len(lines) and lines[pos].indent > parent_indent:
        if child_indent is None:
            child_indent = lines[pos].indent
        elif lines[pos].indent != child_indent:
            raise SpecError(f"{source}:{lines[pos].number}: inconsistent indentation")
        spec, pos = _parse_field(lines, pos, source)
        fields.append(spec)
    return fields, pos


def parse_spec(text: str, source: str = "<spec>") -> ApiSpec:
    """Parse the text of one spec file."""
    lines = _tokenize(text, source)
    kind = name = None
    key: int | None = None
    versions = flexible = None
    sections: dict[str, tuple[list[FieldSpec], dict[str, StructSpec]]] = {}
    current: str | None = None
    pos = 0
    while pos < len(lines):
        line = lines[pos]
        word, *rest = line.words
        if line.indent != 0:
            raise SpecError(f"{source}:{line.number}: field outside a section")
        if word in ("api", "data", "header"):
            kind = word
            if word == "api":
                key, name = int(rest[0]), rest[1]
            else:
                name = rest[0]
        elif word == "versions":
            versions = VersionRange.parse(rest[0])
        elif word == "flexible":
            flexible = VersionRange.parse(rest[0])
        elif word in SECTIONS:
            current = word
            fields, pos = _parse_fields(lines, pos + 1, 0, source)
            sections[word] = (fields, {})
            continue
        elif word == "struct":
            if current is None:
                raise SpecError(f"{source}:{line.number}: struct before any section")
            struct_name, struct_versions = rest[0], VersionRange.parse(rest[1])
            fields, pos = _parse_fields(lines, pos + 1, 0, source)
            sections[current][1][struct_name] = StructSpec(struct_name, struct_versions, tuple(fields))
            continue
        else:
            raise SpecError(f"{source}:{line.number}: unknown directive {word!r}")
        pos += 1
    if kind is None or name is None or versions is None or flexible is None:
        raise SpecError(f"{source}: needs a kind line, 'versions' and 'flexible'")
    api = ApiSpec(kind=kind, name=name, key=key, versions=versions, flexible=flexible)
    for section, (fields, structs) in sections.items():
        message_name = name + section.capitalize() if kind == "api" else name
        api.messages[section] = MessageSpec(section, message_name, versions, flexible, tuple(fields), structs)
    return api


def specs_dir() -> Path:
    """Where the spec files are: inside the installed package, or beside it in a checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "protocol_specs", here.parent / "protocol_specs"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("protocol_specs directory not found")


@cache
def load_specs() -> dict[str, ApiSpec]:
    """Every spec file, by name (``Produce``, ``RequestHeader``, ``ConsumerProtocolSubscription``...)."""
    specs = {}
    for path in sorted(specs_dir().glob("*.kspec")):
        spec = parse_spec(path.read_text(encoding="utf-8"), str(path))
        specs[spec.name] = spec
    return specs


@cache
def api_specs() -> dict[int, ApiSpec]:
    """The API spec files by API key."""
    return {s.key: s for s in load_specs().values() if s.key is not None}


_INT_TYPES = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32"})


def default_value(type_: str, raw: str | None) -> object:
    """The Python value a field takes when it is absent, following Kafka's rules."""
    if type_.startswith("[]"):
        return None if raw == "null" else []
    if raw == "null":
        return None
    if type_ in _INT_TYPES:
        return int(raw, 0) if raw not in (None, "") else 0
    if type_ == "bool":
        return raw == "true"
    if type_ == "float64":
        return float(raw) if raw else 0.0
    if type_ == "string":
        return raw or ""
    if type_ == "bytes":
        return b""
    if type_ == "uuid":
        return ZERO_UUID
    if type_ == "records":
        return None
    return None  # a struct: built from its own fields' defaults by the codec


ZERO_UUID = uuid.UUID(int=0)
