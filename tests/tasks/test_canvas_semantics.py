"""Canvas semantics as a Celery user expects them, through a real worker: a group inside a
chain is a chord (each member gets the previous result, the next step the list of theirs),
``.si`` ignores the previous result, a unique key on a chain answers the owner's root id
and writes nothing, and a flow's arguments are checked at admission (nothing written)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest

from echomq.tasks.app import App
from echomq.tasks.canvas import chain, flow, group
from tests.support.native import snapshot
from tests.support.polling import wait_for
from tests.support.workers import serving


class Calls:
    """What each handler was called with, across the worker's threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, tuple[Any, ...]]] = []

    def add(self, name: str, *args: Any) -> None:
        with self.lock:
            self.seen.append((name, args))

    def of(self, name: str) -> list[tuple[Any, ...]]:
        with self.lock:
            return [a for n, a in self.seen if n == name]


def shop(server: Any) -> tuple[App, str, Calls, dict[str, Any]]:
    q = "cv-" + uuid.uuid4().hex[:8]
    app = App(server.url)
    calls = Calls()

    @app.task(queue=q)
    def fetch(order: int) -> dict[str, int]:
        calls.add("fetch", order)
        return {"order": order, "cents": 1250}

    @app.task(queue=q)
    def tax(order: dict[str, int], rate: float) -> int:
        calls.add("tax", order, rate)
        return round(order["cents"] * rate)

    @app.task(queue=q)
    async def ship(order: dict[str, int]) -> int:
        calls.add("ship", order)
        return 499

    @app.task(queue=q)
    def label(cost: int) -> str:
        calls.add("label", cost)
        return f"label-{cost}"

    @app.task(queue=q, keep_result=60)
    def total(parts: list[Any]) -> list[Any]:
        calls.add("total", parts)
        return parts

    @app.task(queue=q, keep_result=60)
    def notify(who: str) -> str:
        calls.add("notify", who)
        return who

    tasks = {"fetch": fetch, "tax": tax, "ship": ship, "label": label, "total": total,
             "notify": notify}
    return app, q, calls, tasks


def admitted(app: App, canvas: Any, how: str) -> Any:
    """``canvas.enqueue()`` on the sync connector, or awaited on the async one."""
    if how == "sync":
        return canvas.enqueue()

    async def main() -> Any:
        try:
            return await canvas.aenqueue()
        finally:
            await app.aclose()

    return asyncio.run(main())


def test_a_group_in_a_chain_is_a_chord(server):
    app, q, calls, t = shop(server)
    bare = chain(t["fetch"].s(7), group(t["tax"].s(0.2), t["ship"].s()), t["total"].s())
    then = chain(t["fetch"].s(8), group(t["tax"].s(0.1), t["ship"].s()).then(t["total"].s()))
    # a member that is a chain starts with its first step, which gets the value; the
    # other member's link to fetch's job sits a level above fetch's job itself
    deep = chain(t["fetch"].s(9), group(chain(t["ship"].s(), t["label"].s()), t["tax"].s(0.5)),
                 t["total"].s())
    roots = [bare.enqueue(), then.enqueue(), deep.enqueue()]
    with serving(app, [q], concurrency=4):
        got = [app.result(r, timeout=30) for r in roots]
    order = {n: {"order": n, "cents": 1250} for n in (7, 8, 9)}
    assert got == [[250, 499], [125, 499], ["label-499", 625]]
    # each chord's first step ran once, and every member was handed its value
    assert sorted(calls.of("fetch")) == [(7,), (8,), (9,)]
    assert sorted(calls.of("tax"), key=lambda a: a[1]) == [
        (order[8], 0.1), (order[7], 0.2), (order[9], 0.5)]
    assert sorted(calls.of("ship"), key=lambda a: a[0]["order"]) == [
        (order[7],), (order[8],), (order[9],)]
    assert calls.of("label") == [(499,)]
    app.close()


def test_a_chord_in_a_chain_after_a_group(server):
    app, q, calls, t = shop(server)
    # group -> group: each member of the second gets the list of the first's results
    root = chain(group(t["fetch"].s(1), t["fetch"].s(2)),
                 group(t["notify"].si("ops"), t["total"].s()), t["total"].s()).enqueue()
    with serving(app, [q], concurrency=4):
        out = app.result(root, timeout=30)
    pair = [{"order": 1, "cents": 1250}, {"order": 2, "cents": 1250}]
    assert out == ["ops", pair]
    assert sorted(calls.of("fetch")) == [(1,), (2,)]  # the first group ran once
    assert calls.of("notify") == [("ops",)]
    app.close()


def test_si_ignores_the_previous_result(server):
    app, q, calls, t = shop(server)
    last = chain(t["fetch"].s(3), t["notify"].si("warehouse")).enqueue()
    cb = group(t["fetch"].s(4), t["fetch"].s(5)).then(t["notify"].s("x").si("done")).enqueue()
    with serving(app, [q], concurrency=2):
        assert app.result(last, timeout=30) == "warehouse"
        assert app.result(cb, timeout=30) == "done"
    assert sorted(calls.of("notify")) == [("done",), ("warehouse",)]
    assert sorted(calls.of("fetch")) == [(3,), (4,), (5,)]  # si still runs after them
    assert repr(t["notify"].si("a")) == f"{t['notify'].name}.si('a')"
    app.close()


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_unique_key_on_a_chain_answers_the_owner(server, raw, how):
    app, q, calls, t = shop(server)

    def enqueue(canvas: Any) -> str:
        return str(admitted(app, canvas, how))

    keyed = chain(t["fetch"].s(1), t["total"].s()).options(unique="order-1")
    first = enqueue(keyed)
    before = snapshot(raw, q)
    second = enqueue(chain(t["fetch"].s(2), t["total"].s()).options(unique="order-1"))
    assert second == first
    assert snapshot(raw, q) == before  # nothing written the second time
    info = app.job(second)
    assert info is not None and info.state == "waiting-children"
    # a group's callback and a flow's root hold their keys the same way
    fan = group(t["fetch"].s(3)).then(t["total"].s()).options(unique="fan")
    tree = flow(t["notify"].s("x"), [t["fetch"].s(4)]).options(unique="tree")
    owners = [enqueue(fan), enqueue(tree)]
    before = snapshot(raw, q)
    assert [enqueue(fan), enqueue(tree)] == owners
    assert snapshot(raw, q) == before
    with serving(app, [q], concurrency=2):
        assert app.result(first, timeout=30) == {"order": 1, "cents": 1250}
    assert calls.of("fetch").count((2,)) == 0
    app.close()


@pytest.mark.parametrize("how", ["sync", "async"])
def test_flow_arguments_are_checked_at_admission(server, raw, how):
    app, q, _, t = shop(server)

    def enqueue(canvas: Any) -> Any:
        return admitted(app, canvas, how)

    tax = t["tax"]
    wrong = [
        chain(t["fetch"].s(1), tax.s()),               # fed: order given, rate missing
        chain(t["fetch"].s(1), tax.s({"cents": 1}, 0.2)),  # fed: one argument too many
        chain(t["fetch"].s(1), tax.si(0.2)),           # si is not fed: order missing
        chain(t["fetch"].s(), tax.s(0.2)),              # the first step: order missing
        group(t["fetch"].s(1), t["fetch"].s(1, 2)).then(t["total"].s()),
        flow(t["notify"].s(), [t["fetch"].s(1)]),      # a flow's parent is not fed
        chain(t["fetch"].s(1), group(tax.s(0.2), tax.s()), t["total"].s()),
    ]
    for canvas in wrong:
        with pytest.raises(TypeError, match=r"test_canvas_semantics\..*(tax|fetch|notify)"
                                            r".*nothing was queued"):
            enqueue(canvas)
    assert snapshot(raw, q) == {}
    # the right calls of the same tasks are admitted
    enqueue(chain(t["fetch"].s(1), tax.s(0.2)))
    enqueue(chain(t["fetch"].s(1), tax.si({"cents": 1}, 0.2)))
    assert snapshot(raw, q) != {}
    app.close()


def test_a_chain_ending_in_a_bare_group_is_refused(server):
    app, _, _, t = shop(server)
    with pytest.raises(ValueError, match="bare group"):
        chain(t["fetch"].s(1), group(t["tax"].s(0.1), t["ship"].s()))
    app.close()


def test_a_chord_in_the_middle_and_a_canvas_used_twice(server):
    app, q, calls, t = shop(server)
    # .then in the middle of a chain, then one more step fed its callback's result
    mid = chain(t["fetch"].s(5), group(t["tax"].s(0.2), t["ship"].s()).then(t["total"].s()),
                t["label"].s())
    # the same chord value twice in one tree: two runs of everything, fetch included
    chord = chain(t["fetch"].s(6), group(t["tax"].s(0.1), t["ship"].s()), t["total"].s())
    twice = group(chord, chord).then(t["total"].s())
    roots = [mid.enqueue(), twice.enqueue()]
    with serving(app, [q], concurrency=4):
        assert app.result(roots[1], timeout=30) == [[125, 499], [125, 499]]
        wait_for(lambda: calls.of("label"), 30, "the step after the chord")
    assert calls.of("label") == [([250, 499],)]
    assert sorted(calls.of("fetch")) == [(5,), (6,), (6,)]
    app.close()
