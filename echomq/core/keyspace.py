"""Key names: every key of a queue lives under one hash tag, ``emq:{<queue>}:``.

One tag per queue puts every key a transition touches in one cluster slot, so each
script or native command runs on a single node with all its keys declared or derived
from the queue base (the base itself rides in ARGV where a script derives row and lane
keys, as ``promote`` does).

| key                         | type | content                                            |
|-----------------------------|------|----------------------------------------------------|
| ``emq:{q}:job:<id>``        | hash | state, attempts, payload and the row fields below  |
| ``emq:{q}:pending``         | zset | ids at score 0; byte order = mint order = claim order |
| ``emq:{q}:active``          | zset | ids scored by lease expiry (server ms)             |
| ``emq:{q}:schedule``        | zset | ids scored by run-at ms                            |
| ``emq:{q}:dead``            | zset | dead-lettered ids scored by the server ms they died|
| ``emq:{q}:completed``       | zset | kept completed ids scored by server ms (retention) |
| ``emq:{q}:claim:<cid>``     | hash | a claim's leased ids -> tokens, PX the lease (retry) |
| ``emq:{q}:wake``            | list | at most one wake token for blocked consumers       |
| ``emq:{q}:due``             | list | at most one token: a run-at now leads the schedule |
| ``emq:{q}:metronome``       | str  | the metronome lease: its holder, expiring in 2 beats |
| ``emq:{q}:repeat``          | zset | registration names scored by next-run ms (host)    |
| ``emq:{q}:repeat:<name>``   | hash | every_ms, template, ...                            |
| ``emq:{q}:g:<group>:pending``| zset| a group's lane, ids at score 0                     |
| ``emq:{q}:tasks``           | hash | task name -> its declared options (JSON), by the workers |
| ``emq:queues``              | set  | the registry of queue names (no hash tag: see ``registry``) |
| ``emq:{workers}:index``     | zset | live worker ids scored by their last heartbeat (server ms) |
| ``emq:{workers}:w:<id>``    | hash | its registration, expiring 2 heartbeats after the last  |
| ``emq:{workers}:w:<id>:busy``| str | the jobs it runs now (JSON), same expiry                |
| ``emq:{workers}:w:<id>:control``| list | quiet/stop requests for it, popped by the worker   |
| ``emq:{q}:waiting``         | zset | jobs parked on a signal, scored by when they parked |
| ``emq:{q}:signal:<key>``    | set  | the ids of ``{q}`` waiting for signal ``<key>``     |
| ``emq:{q}:signalled:<key>`` | str  | the queue's copy of a delivered signal (same TTL)   |
| ``emq:{sig:<key>}:value``   | str  | a sent signal's payload, kept ttl ms (late waiters) |
| ``emq:{sig:<key>}:queues``  | zset | queues with waiters on ``<key>`` (server ms scores) |

Row fields: ``state``, ``attempts`` (the fencing token), ``payload``, and as they arise
``group``, ``failures``, ``stalled``, ``delays``, ``error``, ``completed_at``, ``died_at``;
a durable job's step journal (``steps``, ``step:<name>``, ``out:<name>``, ``sleeping``,
``wait_key``, ``wait_step``, ``wait_until``: ``verbs.durable``).

Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

PREFIX = "emq"
MAX_QUEUE_BYTES = 200
# names already checked: a producer names the same few queues on every call, and a verb
# builds two or three keys per call (bounded, so a stream of one-off names cannot grow it)
_VALID: set[str] = set()
_VALID_MAX = 4096


def validate_queue(queue: str) -> str:
    """Return ``queue`` if it can carry a hash tag, else raise before any I/O.

    Refused: a non-``str``, the empty name, a name over 200 UTF-8 bytes, and a name
    containing ``{`` or ``}`` (it would break the hash tag and split the queue's keys
    across cluster slots).
    """
    if type(queue) is str and queue in _VALID:
        return queue
    _check_name("queue", queue)
    if len(_VALID) >= _VALID_MAX:
        _VALID.clear()
    _VALID.add(queue)
    return queue


def validate_group(group: str) -> str:
    """Return ``group`` if it can name a lane (the rules of a queue name), else raise
    before any I/O: a non-``str``, the empty name, over 200 UTF-8 bytes, ``{`` or ``}``."""
    return _check_name("group", group)


def _check_name(kind: str, name: object) -> str:
    """A queue or group name's rules (``kind`` words the refusal)."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError(f"{kind} name must not be empty")
    if len(name.encode()) > MAX_QUEUE_BYTES:
        raise ValueError(f"{kind} name is longer than {MAX_QUEUE_BYTES} bytes")
    if "{" in name or "}" in name:
        raise ValueError(f"{kind} name {name!r} must not contain '{{' or '}}' (hash tag)")
    return name


def queue_key(queue: str, suffix: str) -> str:
    """``emq:{queue}:<suffix>``; ``queue_key(q, "")`` is the queue base ``emq:{q}:``."""
    validate_queue(queue)
    return f"{PREFIX}:{{{queue}}}:{suffix}"


def base(queue: str) -> str:
    """The queue base, ``emq:{queue}:``: the prefix scripts derive row and lane keys from."""
    return queue_key(queue, "")


def job_key(queue: str, job_id: str) -> str:
    """The job row, ``emq:{queue}:job:<id>``."""
    return queue_key(queue, f"job:{job_id}")


def repeat_key(queue: str, name: str) -> str:
    """A registration record, ``emq:{queue}:repeat:<name>``."""
    return queue_key(queue, f"repeat:{name}")


def group_key(queue: str, group: str) -> str:
    """A group's meta, ``emq:{queue}:g:<group>`` (active, limit, paused, rate_max, rate_ms)."""
    return queue_key(queue, f"g:{group}")


def lane_key(queue: str, group: str) -> str:
    """A group's lane, ``emq:{queue}:g:<group>:pending``."""
    return queue_key(queue, f"g:{group}:pending")


#: the hash tag every key of the live worker registry shares (one slot on a cluster, so one
#: script updates a worker's keys and the index together)
WORKERS_TAG = "workers"


def workers_key(suffix: str) -> str:
    """``emq:{workers}:<suffix>``: a key of the live worker registry (``verbs.workers``)."""
    return f"{PREFIX}:{{{WORKERS_TAG}}}:{suffix}"


def worker_key(worker_id: str, part: str = "") -> str:
    """A worker's registration ``emq:{workers}:w:<id>``, or its ``busy`` / ``control`` key."""
    return workers_key(f"w:{worker_id}" + (f":{part}" if part else ""))


def registry_key() -> str:
    """``emq:queues``: the set of queue names (outside every queue's tag; ``registry``)."""
    return f"{PREFIX}:queues"


def signal_key(key: str, suffix: str) -> str:
    """A signal's rendezvous, ``emq:{sig:<key>}:<suffix>`` (``value``: the stored payload;
    ``queues``: the queues with waiters on it): one slot per signal key, apart from every
    queue's (``verbs.durable``). The key follows a queue name's rules (checked here, before
    any I/O: a ``str``, not empty, at most 200 bytes, no ``{`` or ``}``)."""
    _check_name("signal key", key)
    return f"{PREFIX}:{{sig:{key}}}:{suffix}"


def batch_key(batch_id: str, suffix: str) -> str:
    """A batch's key, ``emq:{b:<id>}:<suffix>`` (``meta``: its counts, flags and
    callbacks; ``pending``: its members not yet ended): one slot per batch, apart from its
    members' queues (``verbs.batches``)."""
    _check_name("batch id", batch_id)
    return f"{PREFIX}:{{b:{batch_id}}}:{suffix}"


def waiters_key(queue: str, key: str) -> str:
    """``emq:{queue}:signal:<key>``: the ids on ``queue`` waiting for signal ``key``."""
    _check_name("signal key", key)
    return queue_key(queue, f"signal:{key}")
