"""Bounds of a Kafka request body, checked before kio's native reader sees it.

kio's reader (Rust) sizes an array by the count the bytes claim before reading a single
element: a count in the billions in a 34-byte frame makes it ask for hundreds of GB, and
the process aborts (SIGABRT, which no ``except`` catches). ``check_body`` walks the body
by the same schema, without building anything: every array count, string and bytes
length must fit in the bytes that remain (an element takes at least one byte), every
tagged field in its declared size, and no array null where the schema has none (Kafka
refuses that; kio would read None into a field its handler takes for a list). A body
that passes cannot make the reader allocate more than a few times the frame; one that
fails raises ``BodyOutOfBounds``.

One walker per entity class, built once from kio's field metadata (``kafka_type``,
``tag``, the tuple and entity types), so the schemas stay kio's and a new API version
needs nothing here.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

Walker = Callable[[bytes, int, int], int]  # (frame, position, end) -> position after

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "uuid": 16,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "error_code": 2,
}
_VARIABLE = {"string", "bytes", "records"}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class BodyOutOfBounds(ValueError):
    """The body claims more than its bytes hold (or ends early)."""


def check_body(cls: type, frame: bytes, pos: int) -> None:
    """Raise ``BodyOutOfBounds`` unless the body of kio request class ``cls`` at
    ``frame[pos:]`` keeps every count and length within the frame."""
    body_walker(cls)(frame, pos, len(frame))


def skip_tagged_fields(frame: bytes, pos: int) -> int:
    """The position after a tagged-field section (of a flexible request header)."""
    return _NO_KNOWN_TAGS(frame, pos, len(frame))


def body_walker(cls: type) -> Walker:
    """``check_body`` for one class, as a function (frame, position, end) -> position
    after the body; for callers that keep it."""
    return _walker(cls)


def _uvarint(frame: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end:
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise BodyOutOfBounds("varint longer than 5 bytes")
    raise BodyOutOfBounds("body ends inside a varint")


def _length(frame: bytes, pos: int, end: int, compact: bool, wide: bool) -> tuple[int, int]:
    """A string, bytes or array length (-1: null) and the position after it."""
    if compact:
        if pos < end and frame[pos] < 0x80:  # one byte: nearly every length
            return frame[pos] - 1, pos + 1
        value, pos = _uvarint(frame, pos, end)
        return value - 1, pos
    size = 4 if wide else 2
    if pos + size > end:
        raise BodyOutOfBounds("body ends inside a length")
    value = (_I32 if wide else _I16).unpack_from(frame, pos)[0]
    if value < -1:
        raise BodyOutOfBounds(f"negative length {value}")
    return value, pos + size


def _fixed(size: int) -> Walker:
    def walk(frame: bytes, pos: int, end: int) -> int:
        pos += size
        if pos > end:
            raise BodyOutOfBounds("body ends inside a field")
        return pos

    return walk


def _sized(compact: bool, wide: bool) -> Walker:
    """A string (int16 length when not compact) or bytes (int32)."""

    def walk(frame: bytes, pos: int, end: int) -> int:
        length, pos = _length(frame, pos, end, compact, wide)
        if length > 0:
            pos += length
            if pos > end:
                raise BodyOutOfBounds(f"a length of {length} runs past the body")
        return pos

    return walk


def _array(element: Walker, compact: bool, nullable: bool) -> Walker:
    def walk(frame: bytes, pos: int, end: int) -> int:
        count, pos = _length(frame, pos, end, compact, wide=True)
        if count < 0 and not nullable:  # Kafka refuses it; kio would read None
            raise BodyOutOfBounds("a null array where the schema has none")
        if count > end - pos:  # every element takes at least one byte
            raise BodyOutOfBounds(f"an array of {count} in {end - pos} bytes")
        for _ in range(count):
            pos = element(frame, pos, end)
        return pos

    return walk


def _nullable(entity: Walker) -> Walker:
    """A nullable struct: an int8 marker (-1: null) before it."""

    def walk(frame: bytes, pos: int, end: int) -> int:
        if pos >= end:
            raise BodyOutOfBounds("body ends before a struct")
        marker = frame[pos]
        return pos + 1 if marker == 0xFF else entity(frame, pos + 1, end)

    return walk


def _tagged(known: dict[int, Walker]) -> Walker:
    """The tagged fields of a flexible entity: each within its declared size."""

    def walk(frame: bytes, pos: int, end: int) -> int:
        if pos < end and frame[pos] == 0:  # none: nearly always
            return pos + 1
        count, pos = _uvarint(frame, pos, end)
        if count > end - pos:
            raise BodyOutOfBounds(f"{count} tagged fields in {end - pos} bytes")
        for _ in range(count):
            tag, pos = _uvarint(frame, pos, end)
            size, pos = _uvarint(frame, pos, end)
            field_end = pos + size
            if field_end > end:
                raise BodyOutOfBounds(f"tagged field {tag} runs past the body")
            walker = known.get(tag)
            if walker is not None:
                walker(frame, pos, field_end)
            pos = field_end
        return pos

    return walk


def _field_walker(field: dataclasses.Field[object], flexible: bool) -> Walker:
    kind = classify_field(field)
    if isinstance(kind, (EntityField, EntityTupleField)):
        element = _walker(kind.type_)
        if isinstance(kind, EntityTupleField):
            return _array(element, flexible, is_optional(field))
        return _nullable(element) if is_optional(field) else element
    kafka_type = field.metadata["kafka_type"]
    if kafka_type in _FIXED:
        element = _fixed(_FIXED[kafka_type])
    elif kafka_type in _VARIABLE:
        element = _sized(flexible, wide=kafka_type != "string")
    else:  # pragma: no cover - a kio type this module does not know yet
        raise TypeError(f"no bound for kafka_type {kafka_type!r} ({field.name})")
    if isinstance(kind, PrimitiveTupleField):
        return _array(element, flexible, is_optional(field))
    return element


@functools.cache
def _walker(cls: type) -> Walker:
    flexible = bool(getattr(cls, "__flexible__", False))
    steps: list[Walker] = []
    fixed = 0  # consecutive fixed-size fields are skipped in one step
    known: dict[int, Walker] = {}
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is not None:
            known[tag] = _field_walker(field, flexible)
            continue
        kafka_type = field.metadata.get("kafka_type")
        if kafka_type in _FIXED and not isinstance(classify_field(field), PrimitiveTupleField):
            fixed += _FIXED[kafka_type]
            continue
        if fixed:
            steps.append(_fixed(fixed))
            fixed = 0
        steps.append(_field_walker(field, flexible))
    if fixed:
        steps.append(_fixed(fixed))
    if flexible:
        steps.append(_tagged(known))
    sequence = tuple(steps)

    def walk(frame: bytes, pos: int, end: int) -> int:
        for step in sequence:
            pos = step(frame, pos, end)
        return pos

    return walk


_NO_KNOWN_TAGS = _tagged({})
