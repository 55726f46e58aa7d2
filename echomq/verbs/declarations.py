"""Registered task declarations: which tasks an app declares on a queue, and their options.

A worker writes them when it starts (``declare``: one ``HSET`` on ``emq:{q}:tasks`` per
queue it serves, task name -> its options as JSON), so a tool can tell a task name some
app serves from a typo even while no worker runs (``echomq enqueue`` checks it), and a
dashboard can show each task's options. A declaration stays after its worker exits (it
says "an app declared this here"); the live worker registry (``verbs.workers``) says who
serves it now. No clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from echomq.core import keyspace
from echomq.core.steps import Batch, Command, Verb, single, text, verb


def key(queue: str) -> str:
    """``emq:{q}:tasks``: the declarations of ``queue``."""
    return keyspace.queue_key(queue, "tasks")


@verb
def declare(queue: str, tasks: Mapping[str, Mapping[str, Any]]) -> Verb[int]:
    """Record ``tasks`` (name -> options, JSON-able) as declared on ``queue``, replacing
    earlier declarations of the same names; how many names were new."""
    return single(_hset(queue, tasks), int)


@verb
def declare_many(by_queue: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> Verb[int]:
    """``declare`` for several queues in one pipelined round trip (a worker's start, on
    however many queues); how many names were new in all."""
    if not by_queue:
        return 0
    replies = yield Batch(tuple(_hset(q, tasks) for q, tasks in by_queue.items()))
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return sum(int(r) for r in replies)


def _hset(queue: str, tasks: Mapping[str, Mapping[str, Any]]) -> Command:
    if not tasks:
        raise ValueError("declare needs at least one task")
    flat: list[str] = []
    for name, options in tasks.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"a task name must be a non-empty str, not {name!r}")
        flat += [name, json.dumps(dict(options), sort_keys=True, default=str)]
    return Command(("HSET", key(queue), *flat))


@verb
def declared(queue: str) -> Verb[dict[str, dict[str, Any]]]:
    """The tasks declared on ``queue``: name -> options (``{}`` for an unreadable entry)."""

    def decode(reply: Any) -> dict[str, dict[str, Any]]:
        items = reply.items() if isinstance(reply, dict) else zip(
            (reply or [])[::2], (reply or [])[1::2], strict=True)
        out: dict[str, dict[str, Any]] = {}
        for name, raw in items:
            try:
                value = json.loads(text(raw))
            except ValueError:
                value = {}
            out[text(name)] = value if isinstance(value, dict) else {}
        return dict(sorted(out.items()))

    return single(Command(("HGETALL", key(queue))), decode)
