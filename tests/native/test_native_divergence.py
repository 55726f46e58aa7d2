"""Where the native twins differ from the scripts on purpose (the documented list in DESIGN §3b).

Each case runs the same input through the script (wire 4, EVALSHA) on one queue and the
module command on another, and asserts the difference itself: what the script writes
and what the module refuses or leaves alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import valkey

from echomq import Connector
from echomq.core import errors
from echomq.embedded.server import EmbeddedServer
from tests.support.native import base, fresh_queue, send, snapshot

J1, J2 = "JOB01AAAAAAAAAAAAAAAAAAAAAAA", "JOB01BBBBBBBBBBBBBBBBBBBBBBB"
FAR = 40_000_000_000_000


@pytest.fixture
def c4(srv: EmbeddedServer) -> Iterator[Connector]:
    c = Connector.connect(srv.url, wire=4)
    yield c
    c.close()


KEYS = {
    "schedule": ("job:{id}", "schedule"),
    "promote": ("schedule", "pending"),
    "delay": ("job:{id}", "active", "schedule"),
    "enqueue": ("job:{id}", "pending"),
}
NATIVE = {"schedule": "EMQ.SCHEDULE", "promote": "EMQ.PROMOTE", "delay": "EMQ.DELAY",
          "enqueue": "EMQ.ENQUEUE"}


def twins(c4: Connector, r: valkey.Valkey, verb: str, args: list[Any],
          setup: Any, job: str = J1) -> tuple[Any, dict, Any, dict, dict]:
    """Run ``verb`` as script on one queue and natively on another, after the same setup.

    Returns (script reply, script queue after, native reply, native queue after, before).
    ``args`` may hold ``"{base}"``, filled with each queue's base.
    """
    out: list[Any] = []
    before: dict = {}
    for native in (False, True):
        q = fresh_queue()
        setup(r, q)
        before = snapshot(r, q)
        keys = [base(q) + k.format(id=job) for k in KEYS[verb]]
        argv = [base(q) if a == "{base}" else a for a in args]
        if native:
            reply = send(r, NATIVE[verb], len(keys), *keys, *argv)
        else:
            try:
                reply = c4.eval(verb, keys, argv)
            except errors.ServerError as exc:
                reply = exc
        out += [reply, snapshot(r, q)]
    return out[0], out[1], out[2], out[3], before


def scheduled(*jobs_: tuple[str, float], group: str | None = None) -> Any:
    def setup(r: valkey.Valkey, q: str) -> None:
        for job, score in jobs_:
            fields = {"state": "scheduled", "attempts": "0", "payload": "p"}
            if group:
                fields["group"] = group
            r.hset(base(q) + "job:" + job, mapping=fields)
            r.zadd(base(q) + "schedule", {job: score})
    return setup


def held(group: str | None = None, in_active: bool = True) -> Any:
    def setup(r: valkey.Valkey, q: str) -> None:
        fields = {"state": "active", "attempts": "1", "payload": "p"}
        if group:
            fields["group"] = group
        r.hset(base(q) + "job:" + J1, mapping=fields)
        r.zadd(base(q) + "active", {J1 if in_active else J2: FAR})
    return setup


def test_ghost_script_makes_a_skeleton_row_native_only_unschedules(
    c4: Connector, r: valkey.Valkey
) -> None:
    def ghost(r: valkey.Valkey, q: str) -> None:
        r.zadd(base(q) + "schedule", {J1: 1})

    s_reply, s_after, n_reply, n_after, _ = twins(c4, r, "promote", ["{base}", "10"], ghost)
    assert s_reply == n_reply == 1  # both count the selected member
    assert s_after["job:" + J1] == ("hash", {"state": b"pending"})  # the skeleton row
    assert s_after["pending"] == ("zset", {J1: 0.0})
    assert n_after == {}  # only removed from the schedule set


def test_grouped_due_row_script_routes_to_lane_native_refuses(
    c4: Connector, r: valkey.Valkey
) -> None:
    setup = scheduled((J1, 1), group="g7")
    s_reply, s_after, n_reply, n_after, before = twins(c4, r, "promote", ["{base}", "10"], setup)
    assert s_reply == 1
    assert s_after["g:g7:pending"] == ("zset", {J1: 0.0})
    assert s_after["job:" + J1][1]["state"] == b"pending"
    assert isinstance(n_reply, errors.StateError)
    assert n_reply.text == "EMQSTATE promote lane not native"
    assert n_after == before


@pytest.mark.parametrize(("batch", "script_released"), [("0", 0), ("-1", 2)])
def test_batch_script_runs_tonumber_native_validates(
    c4: Connector, r: valkey.Valkey, batch: str, script_released: int
) -> None:
    setup = scheduled((J1, 1), (J2, 2))
    s_reply, _, n_reply, n_after, before = twins(c4, r, "promote", ["{base}", batch], setup)
    assert s_reply == script_released  # LIMIT 0 -1 is "no limit" to ZRANGEBYSCORE
    assert isinstance(n_reply, errors.CommandError)
    assert n_reply.text == "ERR EMQ.PROMOTE batch must be a positive integer"
    assert n_after == before


def nothing(r: valkey.Valkey, q: str) -> None:
    pass


@pytest.mark.parametrize("mode", ["later", "AT", ""])
def test_schedule_other_mode_script_prices_absolute_native_refuses(
    c4: Connector, r: valkey.Valkey, mode: str
) -> None:
    s_reply, s_after, n_reply, n_after, _ = twins(
        c4, r, "schedule", [J1, "p", mode, "1234"], nothing)
    assert s_reply == 1
    assert s_after["schedule"] == ("zset", {J1: 1234.0})
    assert isinstance(n_reply, errors.CommandError)
    assert n_reply.text == "ERR EMQ.SCHEDULE mode must be in or at"
    assert n_after == {}


def test_schedule_negative_run_at_script_admits_native_refuses(
    c4: Connector, r: valkey.Valkey
) -> None:
    s_reply, s_after, n_reply, n_after, _ = twins(c4, r, "schedule", [J1, "p", "at", "-5"], nothing)
    assert s_reply == 1
    assert s_after["schedule"] == ("zset", {J1: -5.0})
    assert n_reply.text == "ERR EMQ.SCHEDULE due must be a non-negative integer"
    assert n_after == {}


def test_delay_not_in_active_script_schedules_anyway_native_refuses(
    c4: Connector, r: valkey.Valkey
) -> None:
    setup = held(in_active=False)
    s_reply, s_after, n_reply, n_after, before = twins(
        c4, r, "delay", [J1, "1", "at", "99"], setup)
    assert s_reply == 1
    assert s_after["schedule"] == ("zset", {J1: 99.0})
    assert s_after["active"] == ("zset", {J2: float(FAR)})
    assert isinstance(n_reply, errors.StateError)
    assert n_reply.text == "EMQSTATE delay not active"
    assert n_after == before


def test_delay_grouped_row_script_delays_native_refuses(c4: Connector, r: valkey.Valkey) -> None:
    s_reply, s_after, n_reply, n_after, before = twins(
        c4, r, "delay", [J1, "1", "at", "99"], held(group="g1"))
    assert s_reply == 1
    assert s_after["job:" + J1][1]["state"] == b"scheduled"
    assert n_reply.text == "EMQSTATE delay lane not native"
    assert n_after == before


def test_delay_negative_due_script_admits_native_refuses(c4: Connector, r: valkey.Valkey) -> None:
    s_reply, s_after, n_reply, n_after, before = twins(
        c4, r, "delay", [J1, "1", "in", "-60000"], held())
    assert s_reply == 1
    assert "schedule" in s_after
    assert n_reply.text == "ERR EMQ.DELAY due must be a non-negative integer"
    assert n_after == before


@pytest.mark.parametrize(("verb", "args", "setup", "job"), [
    ("delay", [J1, "1", "in", "5"], nothing, J1),
    ("delay", [J1, "7", "in", "5"], held(), J1),
    ("delay", ["X1", "1", "in", "5"], held(), "X1"),
    ("schedule", ["X1", "p", "in", "5"], nothing, "X1"),
    ("enqueue", ["X1", "p"], nothing, "X1"),
], ids=["delay-gone", "delay-stale", "delay-kind", "schedule-kind", "enqueue-kind"])
def test_agreeing_refusals_have_the_same_text(
    c4: Connector, r: valkey.Valkey, verb: str, args: list[Any], setup: Any, job: str
) -> None:
    """Not a divergence: gone, stale and kind answer the script's texts exactly, and both
    wires write nothing."""
    s_reply, s_after, n_reply, n_after, before = twins(c4, r, verb, args, setup, job)
    assert isinstance(s_reply, errors.ServerError)
    assert type(n_reply) is type(s_reply)
    assert n_reply.text == s_reply.text
    assert n_after == s_after == before
