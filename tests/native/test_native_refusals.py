"""The refusals every EMQ command shares, one test per refusal across the commands.

Each case sends the raw command to a module-loaded server after the setup that would let
it write (a held job for EMQ.DELAY, a scheduled one for EMQ.RESCHEDULE and EMQ.PROMOTE),
and checks the server's exact text and that nothing was written (``refused``: a snapshot of
every key of the queue before and after). What one command alone refuses is in
test_native_module.py / test_native_enqueue.py; where the scripts agree with the module
(gone, stale, kind) is checked on both wires in test_native_divergence.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import pytest
import valkey

from tests.support.native import (
    J1,
    KIND,
    WRONGTYPE,
    delay,
    enqueue,
    held,
    k,
    promote,
    refused,
    reschedule,
    schedule,
    send,
)


@dataclass(frozen=True)
class Command:
    """One EMQ command: how to build it for a job id, what to write first, its key count."""

    name: str
    build: Callable[..., tuple]  # (q, job, **mode/due) -> the full argument tuple
    setup: Callable[[valkey.Valkey, str], None]
    nkeys: int


def _nothing(r: valkey.Valkey, q: str) -> None:
    pass


def _held(r: valkey.Valkey, q: str) -> None:
    held(r, q, J1)


def _scheduled(r: valkey.Valkey, q: str) -> None:
    assert send(r, *schedule(q, J1, due=1)) == 1


COMMANDS = {
    "SCHEDULE": Command("SCHEDULE", lambda q, job, **kw: schedule(q, job, **kw), _nothing, 2),
    "DELAY": Command("DELAY", lambda q, job, **kw: delay(q, job, **kw), _held, 3),
    "RESCHEDULE": Command("RESCHEDULE", lambda q, job, **kw: reschedule(q, job, **kw),
                          _scheduled, 2),
    "ENQUEUE": Command("ENQUEUE", lambda q, job, **kw: enqueue(q, job, **kw), _nothing, 2),
    "PROMOTE": Command("PROMOTE", lambda q, job, **kw: promote(q, **kw), _scheduled, 2),
}
WITH_ID = ["SCHEDULE", "DELAY", "RESCHEDULE", "ENQUEUE"]
WITH_DUE = ["SCHEDULE", "DELAY", "RESCHEDULE"]


def _ready(r: valkey.Valkey, q: str, verb: str) -> Command:
    cmd = COMMANDS[verb]
    cmd.setup(r, q)
    return cmd


@pytest.mark.parametrize("job", ["X1", "job1", "JO", ""])
@pytest.mark.parametrize("verb", WITH_ID)
def test_foreign_id_is_kind(r: valkey.Valkey, q: str, verb: str, job: str) -> None:
    """EMQKIND before anything else: even with a row under that id (which a duplicate check
    or the token fence would otherwise read)."""
    cmd = _ready(r, q, verb)
    held(r, q, job)
    refused(r, q, cmd.build(q, job), KIND)


@pytest.mark.parametrize("mode", ["", "IN", "At", "later", "in ", "soon", "zz"])
@pytest.mark.parametrize("verb", WITH_DUE)
def test_mode_must_be_in_or_at(r: valkey.Valkey, q: str, verb: str, mode: str) -> None:
    cmd = _ready(r, q, verb)
    refused(r, q, cmd.build(q, J1, mode=mode), f"ERR EMQ.{verb} mode must be in or at")


@pytest.mark.parametrize("due", ["-1", "-5000", "1.5", "2.5", "abc", "x", "", "1e3", " 5",
                                 "99999999999999999999"])
@pytest.mark.parametrize("mode", ["in", "at"])
@pytest.mark.parametrize("verb", WITH_DUE)
def test_due_must_be_a_non_negative_integer(
    r: valkey.Valkey, q: str, verb: str, mode: str, due: str
) -> None:
    cmd = _ready(r, q, verb)
    refused(r, q, cmd.build(q, J1, mode=mode, due=due),
            f"ERR EMQ.{verb} due must be a non-negative integer")


@pytest.mark.parametrize("verb", WITH_DUE)
def test_mode_and_due_are_checked_before_the_id(r: valkey.Valkey, q: str, verb: str) -> None:
    cmd = _ready(r, q, verb)
    refused(r, q, cmd.build(q, "X", mode="zz"), f"ERR EMQ.{verb} mode must be in or at")
    refused(r, q, cmd.build(q, "X", due=-1), f"ERR EMQ.{verb} due must be a non-negative integer")


@pytest.mark.parametrize("case", ["short", "long"])
@pytest.mark.parametrize("verb", list(COMMANDS))
def test_arity(r: valkey.Valkey, q: str, verb: str, case: str) -> None:
    cmd = _ready(r, q, verb)
    args = cmd.build(q, J1)
    bad = args[:-1] if case == "short" else (*args, "extra")
    refused(r, q, bad, f"ERR wrong number of arguments for 'emq.{verb.lower()}' command")


@pytest.mark.parametrize("off", [-1, 1])
@pytest.mark.parametrize("verb", list(COMMANDS))
def test_numkeys_is_the_declared_count(r: valkey.Valkey, q: str, verb: str, off: int) -> None:
    cmd = _ready(r, q, verb)
    args = cmd.build(q, J1)
    refused(r, q, (args[0], cmd.nkeys + off, *args[2:]),
            f"ERR EMQ.{verb} numkeys must be {cmd.nkeys}")


def _pairs() -> list[tuple[str, int, int]]:
    return [(verb, i, j) for verb, cmd in COMMANDS.items()
            for i, j in combinations(range(cmd.nkeys), 2)]


@pytest.mark.parametrize(("verb", "i", "j"), _pairs())
def test_keys_must_be_distinct(r: valkey.Valkey, q: str, verb: str, i: int, j: int) -> None:
    """Any key named twice (two handles on one key could see each other's writes)."""
    cmd = _ready(r, q, verb)
    args = list(cmd.build(q, J1))
    args[2 + j] = args[2 + i]
    refused(r, q, tuple(args), f"ERR EMQ.{verb} keys must be distinct")


@pytest.mark.parametrize(("verb", "key"), [
    ("SCHEDULE", "schedule"), ("DELAY", "schedule"), ("RESCHEDULE", "schedule"),
    ("ENQUEUE", "pending"), ("PROMOTE", "pending"),
])
def test_a_set_of_the_wrong_type_writes_nothing(
    r: valkey.Valkey, q: str, verb: str, key: str
) -> None:
    """WRONGTYPE before the first write (a script would fail midway)."""
    cmd = _ready(r, q, verb)
    if verb == "RESCHEDULE":  # its row stays scheduled, its set is replaced
        r.delete(k(q, key))
    r.set(k(q, key), "x")
    refused(r, q, cmd.build(q, J1), WRONGTYPE)


@pytest.mark.parametrize("verb", list(COMMANDS))
def test_key_positions_and_flags(r: valkey.Valkey, verb: str) -> None:
    """numkeys is argv[1] and the keys follow it, so a cluster routes on them; write +
    deny-oom, so replicas see the effects and a full server refuses new writes."""
    name = f"emq.{verb.lower()}"
    info: Any = r.execute_command("COMMAND", "INFO", name)[name]
    last = 1 + COMMANDS[verb].nkeys
    assert (info["first_key_pos"], info["last_key_pos"], info["step_count"]) == (2, last, 1)
    assert {"write", "denyoom"} <= set(info["flags"])
