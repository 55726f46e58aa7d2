"""The default serializer: rich arguments and kept results come back as the same types,
through a real worker; plain payloads keep their bytes; bad values fail before any I/O."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from typing import Any

import pydantic
import pytest

from echomq import serializers
from echomq.core.payload import decode, encode, encode_call
from echomq.tasks.app import App
from tests.support.workers import serving


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    at: dt.date


class Order(pydantic.BaseModel):
    id: uuid.UUID
    total: decimal.Decimal
    when: dt.datetime


RICH: list[Any] = [
    dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
    dt.datetime(2026, 1, 2, 3, 4, 5),  # naive stays naive
    dt.date(2026, 1, 2),
    dt.time(12, 30),
    dt.timedelta(days=2, seconds=3, microseconds=4),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    decimal.Decimal("1.10"),
    Color.BLUE,
    Point(3, dt.date(2025, 12, 31)),
    Order(id=uuid.UUID(int=7), total=decimal.Decimal("9.99"),
          when=dt.datetime(2026, 5, 1, tzinfo=dt.UTC)),
    {1, 2, 3},
    frozenset({"a"}),
    b"\x00\xffbytes",
    [dt.date(2020, 2, 29), {"nested": decimal.Decimal("0.000001")}],
]


def test_every_rich_value_round_trips_to_the_same_type() -> None:
    for value in RICH:
        back = serializers.loads(serializers.dumps(value))
        assert back == value and type(back) is type(value), value
        if isinstance(value, dt.datetime):
            assert back.utcoffset() == value.utcoffset()
    _, args, kwargs = decode(encode_call("t", tuple(RICH), {"k": Color.RED}))
    assert args == RICH and kwargs == {"k": Color.RED}


def test_a_plain_payload_is_the_stdlib_json_bytes_as_before() -> None:
    args = (1, "é", 2.5, None, True, [1, {"b": 2, "a": [3]}])
    expected = json.dumps({"task": "t", "args": list(args), "kwargs": {"z": 1}},
                          separators=(",", ":"), sort_keys=True).encode()
    assert encode_call("t", args, {"z": 1}) == expected == encode("t", args, {"z": 1})


def test_what_no_serializer_can_carry_fails_naming_the_argument() -> None:
    with pytest.raises(TypeError, match="argument 1 \\(object\\)"):
        encode("t", [1, object()])
    with pytest.raises(TypeError, match="keyword argument 'n'"):
        encode("t", [], {"n": float("nan")})


def test_an_unknown_tag_or_unregistered_class_is_an_error_naming_it() -> None:
    with pytest.raises(serializers.TagError, match="'martian'"):
        serializers.loads(b'{"__emq__":"martian","v":1}')
    with pytest.raises(serializers.TagError, match="'os:system'"):
        decode(b'{"task":"t","args":[{"__emq__":"enum","cls":"os:system","v":1}],'
               b'"kwargs":{}}')


def test_a_registered_name_reads_old_payloads_after_a_rename() -> None:
    @dataclasses.dataclass
    class Renamed:
        n: int

    serializers.register(Renamed, name="billing.Invoice")
    text = serializers.dumps(Renamed(1))
    assert '"billing.Invoice"' in text and serializers.loads(text) == Renamed(1)


def test_rich_arguments_and_results_through_a_worker(url: str, queue: str) -> None:
    app = App(url)
    seen: list[Any] = []

    @app.task(queue=queue, keep_result=60)
    def price(order: Order, color: Color, at: dt.datetime, p: Point,
              amount: decimal.Decimal) -> dict[str, Any]:
        seen.append((order, color, at, p, amount))
        return {"total": order.total + amount, "id": order.id, "p": p, "c": color}

    order = RICH[9]
    job = price.enqueue(order, Color.RED, RICH[0], RICH[8], decimal.Decimal("0.01"))
    try:
        with serving(app, [queue]):
            got = app.result(job, timeout=20)
    finally:
        app.close()
    assert seen == [(order, Color.RED, RICH[0], RICH[8], decimal.Decimal("0.01"))]
    assert type(seen[0][0]) is Order and type(seen[0][1]) is Color
    assert got == {"total": decimal.Decimal("10.00"), "id": order.id, "p": RICH[8],
                   "c": Color.RED}
    assert type(got["total"]) is decimal.Decimal


class Spaced:
    """Another serializer: plain JSON, written with spaces (its mark on the bytes)."""

    def dumps(self, value: Any) -> str:
        return json.dumps(value, sort_keys=True, separators=(", ", ": "))

    def loads(self, data: bytes | str) -> Any:
        return json.loads(data)


def test_app_serializer_writes_payloads_and_results(url: str, queue: str, raw) -> None:
    app = App(url, serializer=Spaced())
    seen: list[Any] = []

    @app.task(queue=queue, keep_result=60)
    def add(a: int, b: int) -> dict[str, int]:
        seen.append((a, b))
        return {"sum": a + b}

    job = add.enqueue(2, b=3)
    assert b'"args": [2], ' in raw.hget(f"emq:{{{queue}}}:job:{job}", "payload")
    try:
        with serving(app, [queue]):
            assert app.result(job, timeout=20) == {"sum": 5}
    finally:
        app.close()
    assert seen == [(2, 3)]
    assert raw.get(f"emq:{{{queue}}}:result:{job}") == b'{"sum": 5}'
