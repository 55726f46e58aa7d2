"""Durability you choose per write: ``WAIT`` / ``WAITAOF`` riding behind an admission.

A Valkey reply means the write is applied in the primary's memory and, with AOF on, handed
to the kernel (``write(2)``) before the reply is sent: it survives the server process
dying. Whether it survives more depends on the server and on what the caller waits for:

- ``appendfsync always``: fsynced before the reply, so it survives power loss too.
- ``appendfsync everysec`` (the default): fsynced within about a second; power loss or an
  OS crash can take the last second or two.
- ``Wait(local=True)`` sends ``WAITAOF 1 0 timeout``: this enqueue returns only once the
  primary's AOF has fsynced it (``always`` for the writes that ask, on an everysec server).
- ``Wait(replicas=n)`` sends ``WAIT n timeout`` (``WAITAOF 1 n`` with ``local``): the
  enqueue returns once ``n`` replicas have it, so it survives losing the primary to a
  failover that promotes one of them.

The wait is pipelined on the same connection right behind the write (``WAIT`` measures that
connection's own writes), so it costs one round trip plus the replication or fsync delay.
If fewer acknowledge in ``timeout_ms``, ``errors.NotDurable`` is raised: the write IS
applied on the primary (``result`` holds its outcome), it is just not yet as durable as
asked. Re-sending with the same job id is safe (an existing id answers ``"duplicate"``).
On a cluster the wait is routed to the primary owning the written queue's slot (every key
of an admission shares the queue's tag), so it still rides the write's connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from echomq.core import errors
from echomq.core import guards as guard
from echomq.core.steps import Batch, Command, Eval, Native, Verb, verb

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Wait:
    """What an acknowledged write must reach before the call returns.

    ``replicas``: how many replicas must have it (``WAIT``); ``local``: the primary's AOF
    must have fsynced it (``WAITAOF``, needs ``appendonly yes``); ``timeout_ms``: how long
    to wait (HOST-side patience, counted by the server), at least 1 (0 would block forever).
    """

    replicas: int = 0
    local: bool = False
    timeout_ms: int = 1_000

    def __post_init__(self) -> None:
        guard.non_negative("replicas", self.replicas)
        guard.span("timeout_ms", self.timeout_ms, minimum=1)
        if not isinstance(self.local, bool):
            raise TypeError(f"local must be a bool, not {type(self.local).__name__}")
        if not self.replicas and not self.local:
            raise ValueError("a Wait asks for replicas >= 1, local=True, or both")

    def command(self, route: str | None = None) -> Command:
        """The wait; ``route`` (a key the write touched) sends it, on a cluster, to that
        key's primary, where the write's own connection is."""
        if self.local:
            return Command(("WAITAOF", 1, self.replicas, self.timeout_ms), route=route)
        return Command(("WAIT", self.replicas, self.timeout_ms), route=route)

    def check(self, reply: Any, result: Any) -> None:
        """Raise ``NotDurable`` unless ``reply`` (of ``command``) shows enough copies."""
        if isinstance(reply, errors.ServerError):
            raise reply
        if self.local:
            local, replicas = (int(x) for x in reply)
        else:
            local, replicas = -1, int(reply)
        if replicas < self.replicas or (self.local and local < 1):
            got = f"{replicas} of {self.replicas} replicas"
            if self.local:
                got += f", local fsync {'done' if local else 'not done'}"
            raise errors.NotDurable(
                f"applied on the primary, but acknowledged by {got} within "
                f"{self.timeout_ms} ms; it can be lost if the primary fails now "
                f"(re-send with the same job id: a duplicate writes nothing)",
                result, local, replicas)


def _route(steps: tuple[Eval | Command | Native, ...]) -> str | None:
    """A key the write touches (an admission's keys all share its queue's slot)."""
    for s in steps:
        keys = s.keys if isinstance(s, (Eval, Native)) else ()
        if keys:
            return keys[0]
    return None


@verb
def confirmed(inner: Verb[T], wait: Wait) -> Verb[T]:
    """Run the verb ``inner`` (``jobs.enqueue.steps(...)``, any admission) with ``wait``
    pipelined behind each of its writes; its result, or ``NotDurable`` carrying it.

    >>> durability.confirmed(conn, jobs.enqueue.steps("mail", jid, b"..."),
    ...                      Wait(replicas=1))                         # doctest: +SKIP
    """
    if not isinstance(wait, Wait):
        raise TypeError(f"wait must be a durability.Wait, not {type(wait).__name__}")
    return _confirmed(inner, wait)


def _confirmed(inner: Verb[T], wait: Wait) -> Verb[T]:
    acked: Any = None
    try:
        step = next(inner)
        while True:
            if isinstance(step, Batch):
                *body, acked = yield Batch((*step.steps, wait.command(_route(step.steps))))
                step = inner.send(body)
            elif isinstance(step, (Eval, Command, Native)):
                reply, acked = yield Batch((step, wait.command(_route((step,)))))
                # a single step raises its refusal where a batch slot would hold it
                step = inner.throw(reply) if isinstance(reply, errors.ServerError) \
                    else inner.send(reply)
            else:  # a fan-out over nodes has no one connection to wait on
                step = inner.send((yield step))
    except StopIteration as stop:
        result: T = stop.value
    if acked is not None:
        wait.check(acked, result)
    return result
