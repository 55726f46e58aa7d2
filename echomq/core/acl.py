"""Least privilege: the Valkey ACL rules each EchoMQ role needs (``echomq acl``).

Three roles, each limited to the queues it names:

- ``producer``: admits jobs and reads their status and results. Read and write on its
  queues' keys (``emq:{q}:*``, and ``emq:{q#*}:*`` for a partitioned queue's partitions),
  add to the queue registry (``emq:queues``), run the scripts (``EVALSHA``, and ``EVAL`` /
  ``SCRIPT LOAD`` on a server that lost its script cache), the native admission commands
  at wire 6 (``wire=6``), ``WAIT``/``WAITAOF`` for durable enqueues, and ``BLMOVE`` to wait for a
  result. No other blocking command. Every durable signal's rendezvous
  (``emq:{sig:*}:*``): a producer sends signals (``app.signal``).
- ``worker``: claims, runs and settles jobs, promotes, reaps, carries flows, fires
  recurrences. What a producer may, plus the blocking pop its claim loop sleeps in
  (``BLPOP`` on the wake and due lists) and every native command; ``emq:{workers}:*``, the
  live-worker registry, and the signals' rendezvous (a durable wait registers there). A
  worker whose queues hold flow children needs their parents'
  queues too (the carry writes the parent).
- ``dashboard``: reads only. Read on its queues' keys and the registries, the plain read
  commands (``+@read``), ``TIME``; no script, no write: a dashboard user cannot change a
  queue even if its ``--read-only`` flag is left off (its actions are refused ``NOPERM``).

Every role: no other key, no channel (EchoMQ publishes none), none of the ``@dangerous``
commands (``FLUSHALL``, ``KEYS``, ``CONFIG``, ``DEBUG``, ``ACL``, ``MODULE LOAD`` ...), and
the connection's own commands (``PING``, ``HELLO``, ``CLIENT SETINFO``, ``SELECT``; on a
cluster ``CLUSTER SLOTS``/``SHARDS``/``NODES`` and ``COMMAND``, which the cluster client
reads to route).

What an ACL cannot tell apart: every transition is a script sent by ``EVALSHA``, and an
ACL rule names commands and keys, not scripts, so a producer that may run the enqueue
script may run the claim script too, on its own queues. The lines that hold are which
queues a user reaches, read against write, blocking, and admin commands.

Pure: text only, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from echomq.core import keyspace

ROLES = ("producer", "worker", "dashboard")
_GLOB = re.compile(r"([*?\[\]\\])")

#: what every role's connection sends before its first command (valkey-py and its
#: cluster client), and TIME (the scripts read the server clock; so does the dashboard)
CONNECTION = ("+ping", "+hello", "+select", "+client|setinfo", "+client|setname",
              "+client|id", "+time", "+command", "+cluster|slots", "+cluster|shards",
              "+cluster|nodes", "+cluster|info", "+readonly", "+readwrite", "+asking")
#: the scripts: EVALSHA first, EVAL and SCRIPT LOAD when the server lost its cache
SCRIPTS = ("+evalsha", "+eval", "+script|load", "+script|exists")
#: every batch's keys (``emq:{b:<id>}:*``, one slot per batch apart from its members'
#: queues): a producer opens and fills batches, a worker counts their members' ends, a
#: dashboard reads their progress (batch ids are minted, not guessed)
BATCHES = "emq:{b:*}:*"
#: the native module's commands (wire 6)
NATIVE_ADMIT = ("+module|list", "+emq.enqueue", "+emq.schedule")
NATIVE_ALL = (*NATIVE_ADMIT, "+emq.promote", "+emq.delay", "+emq.reschedule", "+emq.claim",
              "+emq.ack", "+emq.ackmany")


#: every durable signal's rendezvous (``keyspace.signal_key``): a signal key spans queues,
#: so a producer or worker reaches every signal, whatever queues it names
SIGNALS = f"{keyspace.PREFIX}:{{sig:*}}:*"


def _glob(literal: str) -> str:
    return _GLOB.sub(r"\\\1", literal)


def key_patterns(queues: Sequence[str]) -> list[str]:
    """The key patterns of ``queues``: each queue's tag and its partitions' (``q#*``)."""
    out: list[str] = []
    for q in queues:
        keyspace.validate_queue(q)
        out += [f"emq:{{{_glob(q)}}}:*", f"emq:{{{_glob(q)}#*}}:*"]
    return out


def rules(role: str, queues: Sequence[str], wire: int = 4) -> list[str]:
    """The ``ACL SETUSER`` rules (after the user name and its password) ``role`` needs on
    ``queues``: keys, channels, commands, in the order the server applies them. ``wire=6``
    adds the native module's commands (a server without the module refuses a rule naming
    them, so wire 4 names none)."""
    if wire not in (4, 6):
        raise ValueError(f"wire must be 4 or 6, not {wire!r}")
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    queues = list(dict.fromkeys(queues))
    if not queues:
        raise ValueError("name at least one queue (--queues a,b)")
    patterns = key_patterns(queues)
    registry = keyspace.registry_key()
    head = ["resetkeys", "resetchannels", "-@all"]
    if role == "dashboard":
        keys = [f"%R~{p}" for p in (*patterns, registry, "emq:{workers}:*", BATCHES)]
        return [*head, *keys, "+@read", "-@dangerous", "-@blocking", *CONNECTION, "+scan"]
    keys = [f"~{p}" for p in (*patterns, registry, SIGNALS, BATCHES)]
    # FUNCTION FLUSH / LOAD are @write and not @dangerous: EchoMQ runs scripts, no function
    writes = ["+@read", "+@write", "-@dangerous", "-@blocking", "-function", *SCRIPTS, "+wait",
              "+waitaof", "+blmove"]
    if role == "producer":
        return [*head, *keys, *writes, *(NATIVE_ADMIT if wire == 6 else ()), *CONNECTION]
    return [*head, *keys, "~emq:{workers}:*", *writes, "+blpop",
            *(NATIVE_ALL if wire == 6 else ()), *CONNECTION]


def setuser(user: str, password: str, role: str, queues: Sequence[str],
            wire: int = 4) -> list[str]:
    """The whole command as arguments: ``ACL SETUSER <user> reset on ><password> ...``."""
    if not user or any(c.isspace() for c in user):
        raise ValueError(f"not a user name: {user!r}")
    if not password:
        raise ValueError("the password must not be empty")
    return ["ACL", "SETUSER", user, "reset", "on", f">{password}", *rules(role, queues, wire)]


def quoted(args: Sequence[str]) -> str:
    """``args`` as one line ``valkey-cli`` reads (each argument double-quoted when it holds
    a space, a quote or a backslash)."""
    out = []
    for a in args:
        if re.search(r'[\s"\\\']', a):
            a = '"' + a.replace("\\", "\\\\").replace('"', '\\"') + '"'
        out.append(a)
    return " ".join(out)
