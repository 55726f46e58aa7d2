"""Rich JSON: the default serializer of arguments and kept results.

Plain JSON values (str, int, float, bool, None, list, tuple, dict with str keys) travel
as plain JSON, byte for byte what stdlib ``json`` writes: the encoder's ``default`` hook
is called only for what JSON cannot say, so a plain payload pays nothing for this. The
rest travels TAGGED, ``{"__emq__": <tag>, "v": <value>}`` (a class-bound tag adds
``"cls"``), and comes back as the same type:

- ``datetime`` (an aware one keeps its offset; a naive one stays naive), ``date``,
  ``time``, ``timedelta``, ``UUID``, ``Decimal`` (as its string: exact), ``bytes``,
  ``set`` / ``frozenset``;
- ``Enum`` members, dataclass instances and pydantic models, by their class's REGISTERED
  name (module and qualname unless ``register(cls, name=...)`` chose one). Decoding looks
  the name up in the registry only, never imports what a payload names (jsonpickle's CVE):
  a class is registered when this process encodes one, when a task's annotations name it
  (``tasks.declare``) or by ``register``.

An ``IntEnum``/``StrEnum`` member IS an int/str to JSON: it travels as its value. An
unknown tag or an unregistered class is a ``ValueError`` naming it, never a silent dict.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from collections.abc import Callable
from typing import Any

TAG = "__emq__"
_MARK = b'"__emq__"'

#: registered classes by name, and their names by class
_CLASSES: dict[str, type] = {}
_NAMES: dict[type, str] = {}


class TagError(ValueError):
    """A tagged value this process cannot read: an unknown tag or unregistered class."""


def register(cls: type, name: str | None = None) -> type:
    """Make ``cls`` (an Enum, a dataclass or a pydantic model) decodable under ``name``
    (default ``module:qualname``); usable as a decorator. Re-registering a class under a
    new name keeps the old one as an alias (a renamed class still reads old payloads)."""
    key = name or f"{cls.__module__}:{cls.__qualname__}"
    _CLASSES[key] = cls
    _NAMES.setdefault(cls, key)
    if name is not None:
        _NAMES[cls] = key
    return cls


def _named(cls: type) -> str:
    if cls not in _NAMES:
        register(cls)
    return _NAMES[cls]


def _pydantic(value: Any) -> bool:
    return hasattr(type(value), "model_validate") and hasattr(value, "model_dump")


def tag(value: Any) -> Any:
    """The JSON stand-in of a value JSON cannot carry (the encoder's ``default`` hook);
    ``TypeError`` for a type this serializer does not know."""
    if isinstance(value, dt.datetime):
        return {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {TAG: "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {TAG: "time", "v": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, uuid.UUID):
        return {TAG: "uuid", "v": str(value)}
    if isinstance(value, decimal.Decimal):
        return {TAG: "decimal", "v": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {TAG: "bytes", "v": base64.b64encode(value).decode()}
    if isinstance(value, (set, frozenset)):
        return {TAG: "frozenset" if isinstance(value, frozenset) else "set",
                "v": sorted(value, key=repr)}
    cls = type(value)
    if isinstance(value, enum.Enum):
        return {TAG: "enum", "cls": _named(cls), "v": value.value}
    if dataclasses.is_dataclass(value):
        return {TAG: "dataclass", "cls": _named(cls),
                "v": {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}}
    if _pydantic(value):
        return {TAG: "pydantic", "cls": _named(cls), "v": value.model_dump(mode="json")}
    raise TypeError(f"Object of type {cls.__name__} is not JSON serializable")


def _class(body: dict[str, Any]) -> type:
    name = body.get("cls")
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise TagError(f"payload names class {name!r}, which this process has not "
                         f"registered (echomq.serializers.register)")
    return cls


def _dataclass(body: dict[str, Any]) -> Any:
    cls = _class(body)
    fields = body["v"]
    init = {f.name for f in dataclasses.fields(cls) if f.init}
    obj = cls(**{k: v for k, v in fields.items() if k in init})
    for k, v in fields.items():  # a field with init=False is set as it was
        if k not in init:
            object.__setattr__(obj, k, v)
    return obj


_UNTAG: dict[str, Callable[[dict[str, Any]], Any]] = {
    "datetime": lambda b: dt.datetime.fromisoformat(b["v"]),
    "date": lambda b: dt.date.fromisoformat(b["v"]),
    "time": lambda b: dt.time.fromisoformat(b["v"]),
    "timedelta": lambda b: dt.timedelta(*b["v"]),
    "uuid": lambda b: uuid.UUID(b["v"]),
    "decimal": lambda b: decimal.Decimal(b["v"]),
    "bytes": lambda b: base64.b64decode(b["v"]),
    "set": lambda b: set(b["v"]),
    "frozenset": lambda b: frozenset(b["v"]),
    "enum": lambda b: _class(b)(b["v"]),
    "dataclass": _dataclass,
    "pydantic": lambda b: _class(b).model_validate(b["v"]),  # type: ignore[attr-defined]
}


def untag(body: dict[str, Any]) -> Any:
    """The value a tagged object stands for (``json.loads``' ``object_hook``)."""
    name = body.get(TAG)
    if name is None:
        return body
    untagger = _UNTAG.get(name) if isinstance(name, str) else None
    if untagger is None:
        raise TagError(f"unknown serializer tag {name!r} (written by a newer EchoMQ?)")
    return untagger(body)


def dumps(value: Any) -> str:
    """``value`` as compact rich JSON (``TypeError``/``ValueError`` for what it cannot
    carry: NaN, a non-str dict key, an unknown type)."""
    return _ENCODER.encode(value)


def loads(data: bytes | str) -> Any:
    """The value ``dumps`` wrote (plain JSON included): tagged objects become their types."""
    mark = _MARK if isinstance(data, (bytes, bytearray)) else _MARK.decode()
    if mark not in data:  # type: ignore[operator]
        if type(data) is bytes and data[:2] == b'{"':
            # a payload's shape: UTF-8 as json.loads would detect it (no BOM, no NUL in
            # the first two bytes), scanned without its encoding sniff and trailing-space
            # match (a third of a worker's decode); anything else, or an error, goes the
            # whole way for json.loads' own answer
            try:
                text = data.decode("utf-8", "surrogatepass")
                value, end = _SCAN(text, 0)
                if end == len(text):
                    return value
            except (StopIteration, ValueError):
                pass
        return json.loads(data)
    return json.loads(data, object_hook=untag)


_SCAN: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads, unwrapped


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False,
                            default=tag)


def annotated(hints: dict[str, Any]) -> None:
    """Register the Enum, dataclass and pydantic classes named by these type hints (a
    task's annotations: its worker decodes them though it never encoded one)."""
    seen: set[int] = set()

    def walk(hint: Any) -> None:
        if id(hint) in seen:
            return
        seen.add(id(hint))
        if isinstance(hint, type) and (issubclass(hint, enum.Enum)
                                       or dataclasses.is_dataclass(hint)
                                       or hasattr(hint, "model_validate")):
            if hint not in _NAMES:
                register(hint)
            if dataclasses.is_dataclass(hint):
                for f in dataclasses.fields(hint):
                    if not isinstance(f.type, str):
                        walk(f.type)
        for arg in getattr(hint, "__args__", ()) or ():
            walk(arg)

    for hint in hints.values():
        walk(hint)
