"""LangGraph's checkpoint serialization, read without LangGraph: msgpack (ormsgpack) with the
extension types of langgraph/checkpoint/serde/jsonplus.py (langgraph-checkpoint 4.3).

Only what the reading commands need is rebuilt: a `_DeltaSnapshot` (ext 7) as `Snapshot`,
a datetime, and every other object (ext 0-5: a pydantic model, a dataclass, a named tuple,
a set...) as `Stored(module, name, fields)`, never imported or constructed. Anything else is
`Unreadable`: the caller falls back to LangGraph's own reading for that command.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import ormsgpack

# jsonplus.py's EXT_* codes.
CONSTRUCTOR_CODES = frozenset({0, 1, 2, 3, 4, 5})  # (module, name, fields, ...)
DELTA_SNAPSHOT = 7


class Unreadable(Exception):
    """A value this reader does not decode; LangGraph's own reading may."""


@dataclass(frozen=True)
class Stored:
    """An object the serializer wrote as its class and fields (a message, an Interrupt)."""

    module: str
    name: str
    fields: Any  # a dict for models, dataclasses and named tuples; else the argument(s)


@dataclass(frozen=True)
class Snapshot:
    """A DeltaChannel's full value, stored every so many updates (`_DeltaSnapshot`)."""

    value: Any


def loads(type_tag: str | None, blob: bytes | None) -> Any:
    """A stored value, as `SerializerProtocol.loads_typed((type_tag, blob))` reads it."""
    if type_tag == "null" or type_tag is None and blob is None:
        return None
    if type_tag == "msgpack" and blob is not None:
        return _unpack(blob)
    raise Unreadable(f"a value stored as {type_tag!r}")


def _unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data, ext_hook=_ext, option=ormsgpack.OPT_NON_STR_KEYS)


def _ext(code: int, data: bytes) -> Any:
    value = _unpack(data)
    if code == DELTA_SNAPSHOT:
        return Snapshot(value)
    if code not in CONSTRUCTOR_CODES or not isinstance(value, list | tuple) or len(value) < 3:
        raise Unreadable(f"msgpack extension type {code}")
    module, name, fields = value[0], value[1], value[2]
    if (module, name) == ("datetime", "datetime") and isinstance(fields, str):
        return datetime.fromisoformat(fields)
    return Stored(str(module), str(name), fields)
