"""The live worker registry: which worker processes are alive, what each serves and runs.

Theory of operation. A worker process registers once at start (``register``: its id,
host, pid, app, queues, concurrency, wire, version, the tasks its app declares per queue),
then renews its registration every heartbeat period (``heartbeat``), carrying a snapshot
of the jobs it runs now whenever that changed, and removes it on a clean exit
(``unregister``). The registration expires two heartbeat periods after the last renewal,
on the SERVER clock, so a worker that dies (SIGKILL, a frozen host, a cut network) drops
out of every view within two periods without anyone cleaning up; ``live`` reads the
registry and sweeps the index of the expired. An operator asks a worker to quiet (stop
claiming, finish what runs) or stop (drain and exit, as SIGTERM) with ``request``: the
request waits on the worker's control list, which the worker blocks on between its
heartbeats (``control_key``), so it acts at once.

Keys (one hash tag, ``{workers}``, so on a cluster every script touches one slot):
``emq:{workers}:index`` (zset: id -> last heartbeat, SERVER ms), ``emq:{workers}:w:<id>``
(hash: the registration), ``...:w:<id>:busy`` (JSON: the running jobs),
``...:w:<id>:control`` (list: quiet/stop requests).

Clocks: every stamp (``started``, ``seen``, the expiry) is SERVER ms; a running job's
``started`` is the worker's estimate of SERVER ms (its HOST clock corrected by the offset
its last heartbeat measured).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from echomq.core import guards as guard
from echomq.core import keyspace, partitions
from echomq.core.steps import Batch, Command, Eval, Verb, pairs, single, text, verb

INDEX = keyspace.workers_key("index")
PREFIX = keyspace.workers_key("w:")
#: the heartbeat period a Worker renews its registration on, by default (ms)
DEFAULT_HEARTBEAT_MS = 5_000
#: a registration lives this many heartbeat periods past its last renewal
TTL_PERIODS = 2
ACTIONS = ("quiet", "stop")
#: the states a worker reports: serving, quiet (claims nothing, finishes what runs),
#: stopping (draining before its exit)
STATES = ("running", "quiet", "stopping")


def ttl_ms(heartbeat_ms: int) -> int:
    """How long a registration lives after its last renewal (SERVER ms)."""
    return TTL_PERIODS * heartbeat_ms


def control_key(worker_id: str) -> str:
    """The list a worker blocks on for quiet/stop requests (``BLPOP``)."""
    return keyspace.worker_key(_check_id(worker_id), "control")


def _check_id(worker_id: object) -> str:
    wid = guard.string("worker_id", worker_id)
    if not wid or "{" in wid or "}" in wid or len(wid) > 200:
        raise ValueError(f"bad worker id {wid!r}: 1..200 characters, no '{{' or '}}'")
    return wid


@dataclass(frozen=True, slots=True)
class Running:
    """A job a worker runs now: its id, queue, task, when it started (SERVER ms, the
    worker's estimate) and its attempt (the claim's token)."""

    id: str
    queue: str
    task: str | None
    started_ms: int
    attempt: int

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "queue": self.queue, "task": self.task,
                "started_ms": self.started_ms, "attempt": self.attempt}


def busy_text(running: Sequence[Running]) -> str:
    """The busy snapshot as the heartbeat stores it: compact JSON rows."""
    return json.dumps([[r.id, r.queue, r.task, r.started_ms, r.attempt] for r in running],
                      separators=(",", ":"))


def busy_of(raw: Any) -> list[Running]:
    """A stored busy snapshot as ``Running`` items (``[]`` for none or an unreadable one)."""
    if not raw:
        return []
    try:
        rows = json.loads(text(raw))
        return [Running(str(r[0]), str(r[1]), None if r[2] is None else str(r[2]),
                        int(r[3]), int(r[4])) for r in rows]
    except (ValueError, TypeError, IndexError):
        return []


@dataclass(frozen=True, slots=True)
class Registration:
    """What a worker says about itself when it registers (``tasks``: per queue, the task
    names its app declares there)."""

    id: str
    host: str
    pid: int
    app: str
    queues: tuple[str, ...]
    concurrency: int
    wire: int
    version: str
    heartbeat_ms: int
    tasks: Mapping[str, Sequence[str]] = field(default_factory=dict)
    started_ms: int | None = None  # kept across a re-registration
    #: its slots in all: ``concurrency`` per pool, one pool per queue it was given (a
    #: partitioned queue named by its logical name is one pool); None: one per queue
    slots: int | None = None

    def fields(self) -> list[str]:
        out = ["id", self.id, "host", self.host, "pid", str(self.pid), "app", self.app,
               "queues", json.dumps(list(self.queues)), "concurrency", str(self.concurrency),
               "wire", str(self.wire), "version", self.version,
               "heartbeat_ms", str(self.heartbeat_ms), "state", "running",
               "tasks", json.dumps({q: list(ts) for q, ts in self.tasks.items()})]
        if self.started_ms is not None:
            out += ["started", str(self.started_ms)]
        if self.slots is not None:
            out += ["slots", str(self.slots)]
        return out


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A live worker as ``live`` reads it: its registration, its state, when it started
    and was last seen (SERVER ms), the server's now at the read, and what it runs."""

    id: str
    host: str
    pid: int
    app: str
    queues: list[str]
    concurrency: int
    wire: int
    version: str
    heartbeat_ms: int
    state: str
    started_ms: int
    seen_ms: int
    now_ms: int
    tasks: dict[str, list[str]]
    busy: list[Running]
    requested: str | None = None
    #: its slots in all (``Registration.slots``; a worker that did not say: one pool of
    #: ``concurrency`` per queue)
    slots: int = 0

    @property
    def uptime_ms(self) -> int:
        return max(0, self.now_ms - self.started_ms)

    @property
    def seen_ago_ms(self) -> int:
        return max(0, self.now_ms - self.seen_ms)

    def serves(self, queue: str) -> bool:
        """Whether this worker claims from ``queue`` now (it is not quiet nor stopping); a
        partitioned queue's logical name (``mail``) counts any of its partitions."""
        return self.state == "running" and self.listens(queue)

    def listens(self, queue: str) -> bool:
        """Whether ``queue`` (or, for a logical name, one of its partitions) is among this
        worker's queues, whatever its state."""
        return queue in self.queues or any(partitions.split(q)[0] == queue
                                           for q in self.queues)

    def declares(self, queue: str, task: str) -> bool:
        """Whether this worker's app declares ``task`` on ``queue``."""
        return task in self.tasks.get(queue, ())

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``echomq workers --json``)."""
        return {
            "id": self.id, "host": self.host, "pid": self.pid, "app": self.app,
            "queues": self.queues, "concurrency": self.concurrency, "slots": self.slots,
            "wire": self.wire,
            "version": self.version, "state": self.state, "requested": self.requested,
            "heartbeat_ms": self.heartbeat_ms, "started_ms": self.started_ms,
            "seen_ms": self.seen_ms, "uptime_s": round(self.uptime_ms / 1000, 3),
            "seen_ago_s": round(self.seen_ago_ms / 1000, 3), "tasks": self.tasks,
            "busy": [{**r.as_dict(),
                      "runtime_s": round(max(0, self.now_ms - r.started_ms) / 1000, 3)}
                     for r in self.busy],
        }


def _record(worker_id: str, raw: dict[str, Any], busy: Any, now: int) -> WorkerRecord:
    def get(name: str, default: str = "") -> str:
        value = raw.get(name)
        return default if value is None else text(value)

    def num(name: str) -> int:
        try:
            return int(get(name, "0"))
        except ValueError:
            return 0

    def loaded(name: str, default: Any) -> Any:
        try:
            return json.loads(get(name)) if get(name) else default
        except ValueError:
            return default

    tasks = loaded("tasks", {})
    queues = [str(q) for q in loaded("queues", [])]
    return WorkerRecord(
        id=worker_id, host=get("host"), pid=num("pid"), app=get("app"),
        queues=queues, concurrency=num("concurrency"),
        slots=num("slots") or num("concurrency") * max(1, len(queues)),
        wire=num("wire"), version=get("version"), heartbeat_ms=num("heartbeat_ms"),
        state=get("state", "running"), started_ms=num("started"), seen_ms=num("seen"),
        now_ms=now,
        tasks={str(q): [str(t) for t in ts] for q, ts in tasks.items()}
        if isinstance(tasks, dict) else {},
        busy=busy_of(busy), requested=get("requested") or None,
    )


def _keys(worker_id: str) -> tuple[str, str, str]:
    return INDEX, keyspace.worker_key(worker_id), keyspace.worker_key(worker_id, "busy")


@verb
def register(reg: Registration) -> Verb[int]:
    """Write ``reg`` as a live worker's registration (replacing one of the same id),
    expiring ``TTL_PERIODS`` heartbeats from now unless renewed; the SERVER ms it
    registered at (its ``started`` unless ``reg.started_ms`` carries an earlier one)."""
    _check_id(reg.id)
    guard.positive("heartbeat_ms", reg.heartbeat_ms)
    step = Eval("worker_register", _keys(reg.id),
                (reg.id, str(ttl_ms(reg.heartbeat_ms)), *reg.fields()))
    return single(step, int)


@verb
def heartbeat(worker_id: str, heartbeat_ms: int, busy: Sequence[Running] | None = None,
              state: str | None = None) -> Verb[tuple[bool, int]]:
    """Renew a registration for another ``TTL_PERIODS`` heartbeats; with ``busy`` also
    store the jobs the worker runs now, with ``state`` its state. ``(renewed, SERVER
    now ms)``; ``renewed`` is False when the registration had expired (nothing written:
    the worker registers again)."""
    _check_id(worker_id)
    guard.positive("heartbeat_ms", heartbeat_ms)
    if state is not None and state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    step = Eval("worker_beat", _keys(worker_id),
                (worker_id, str(ttl_ms(heartbeat_ms)),
                 "" if busy is None else busy_text(busy), state or ""))
    return single(step, lambda r: (int(r[0]) == 1, int(r[1])))


@verb
def unregister(worker_id: str) -> Verb[bool]:
    """Remove a worker's registration and its keys (a clean exit); False when it had
    none left."""
    _check_id(worker_id)
    step = Eval("worker_unregister", (*_keys(worker_id), control_key(worker_id)),
                (worker_id,))
    return single(step, lambda r: bool(int(r)))


@verb
def live(*, queue: str | None = None, sweep: bool = True) -> Verb[list[WorkerRecord]]:
    """Every live worker (registered and renewed within ``TTL_PERIODS`` heartbeats), with
    the jobs each runs now; with ``queue``, only those whose queues include it. Sweeps
    expired entries from the index: one script call; the order is the heartbeat order.
    ``sweep=False`` reads the same with plain read commands and writes nothing (``TIME``,
    the index, then one pipelined batch of the registrations: what a read-only dashboard
    user may run)."""
    if queue is not None:
        keyspace.validate_queue(queue)

    def decode(reply: Any) -> list[WorkerRecord]:
        now = int(reply[0])
        out = []
        for i in range(1, len(reply), 3):
            raw = reply[i + 1]
            fields = ({text(k): v for k, v in raw.items()} if isinstance(raw, dict)
                      else pairs(raw))
            rec = _record(text(reply[i]), fields, reply[i + 2], now)
            if queue is None or queue in rec.queues:
                out.append(rec)
        return out

    if sweep:
        return single(Eval("workers", (INDEX,), (PREFIX,)), decode)

    def calls() -> Verb[list[WorkerRecord]]:
        now = yield Command(("TIME",))
        ids = [text(i) for i in (yield Command(("ZRANGE", INDEX, 0, -1)))]
        replies = [] if not ids else (yield Batch(tuple(
            c for i in ids for c in (Command(("HGETALL", PREFIX + i)),
                                     Command(("GET", PREFIX + i + ":busy"))))))
        reply: list[Any] = [int(now[0]) * 1000 + int(now[1]) // 1000]
        for i, raw, busy in zip(ids, replies[::2], replies[1::2], strict=True):
            if raw:  # an expired registration: left in the index for the next sweep
                reply += [i, raw, busy or ""]
        return decode(reply)

    return calls()


@verb
def request(worker_id: str, action: str) -> Verb[list[str]]:
    """Ask a live worker (``worker_id``, or ``"*"`` for every live worker) to ``"quiet"``
    (stop claiming; running jobs finish) or ``"stop"`` (drain and exit, as SIGTERM). The
    ids asked: empty when no live worker has that id (nothing written)."""
    if action not in ACTIONS:
        raise ValueError(f"action must be 'quiet' or 'stop', not {action!r}")
    target = worker_id if worker_id == "*" else _check_id(worker_id)
    step = Eval("worker_control", (INDEX,), (PREFIX, action, target))
    return single(step, lambda r: [text(x) for x in r or ()])


def owners(records: Sequence[WorkerRecord], queue: str, task: str,
           exclude: str | None = None) -> list[WorkerRecord]:
    """The live workers among ``records`` whose app declares ``task`` on ``queue``
    (``exclude``: a worker id left out, the asker's own). Pure."""
    return [r for r in records if r.id != exclude and r.declares(queue, task)]


@verb
def next_request(worker_id: str, timeout_s: float) -> Verb[str | None]:
    """Block up to ``timeout_s`` seconds (HOST clock, BLPOP's timeout) for the next
    quiet/stop request on the worker's control list; the action, or None."""
    key = control_key(worker_id)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a number > 0, not {timeout_s!r}")

    def decode(reply: Any) -> str | None:
        return text(reply[1]) if reply else None

    return single(Command(("BLPOP", key, f"{timeout_s:.3f}")), decode)
