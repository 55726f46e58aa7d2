"""Errors. Server refusals keep the server's text exactly (``str(exc)``).

The transitions (scripts and native commands) answer with error replies whose first word
is a code:
``EMQKIND`` (a foreign id), ``EMQSTALE`` (a fenced-out holder; ``EMQSTALE job gone`` when
the row is missing), ``EMQSTATE`` (the job is not in the state the verb needs) and, for the
native commands' own argument checks, ``ERR EMQ.<VERB> ...``. ``from_server`` maps a text
to its class; the most specific text is matched first.

The server's own codes are kept too (``str(exc)`` starts with the code the server sent:
``OOM``, ``READONLY``, ``LOADING``, ``BUSY``, ``MISCONF``, ``NOPERM``, ``NOSCRIPT``, ...),
and the ones a producer acts on have a class: ``Unavailable`` (the server refused for now
and wrote nothing: back off and retry) with ``OutOfMemory``, ``ReadOnly``, ``Loading``,
``Busy``, ``Misconf`` and ``TryAgain`` under it, and ``NoPermission``, ``NoScript``. All are
``CommandError``s, so code that caught ``CommandError`` before still does; ``code`` holds
the first word.
"""

from __future__ import annotations


class EchoMQError(Exception):
    """Base of every EchoMQ error."""


class ServerError(EchoMQError):
    """A refusal answered by the server; ``text`` is the reply verbatim."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    @property
    def code(self) -> str:
        """The reply's first word: ``EMQSTALE``, ``OOM``, ``ERR``, ..."""
        return self.text.split(" ", 1)[0]


class KindError(ServerError):
    """``EMQKIND``: the id is not JOB-namespaced."""


class StaleError(ServerError):
    """``EMQSTALE``: the caller's token no longer holds the job."""


class GoneError(StaleError):
    """``EMQSTALE job gone``: the job's row does not exist."""


class StateError(ServerError):
    """``EMQSTATE``: the job is not in a state this verb moves from."""


class CommandError(ServerError):
    """``ERR ...``: a command refused its arguments (e.g. a native command's own checks)."""


class PayloadTooLarge(EchoMQError, ValueError):
    """A command argument (a payload, a template) is over the connector's
    ``max_payload_bytes``, or a whole command over ``MAX_COMMAND_BYTES``: refused before
    anything is sent, so nothing is written. ``size`` and ``limit`` are in bytes."""

    def __init__(self, message: str, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class Unavailable(CommandError):
    """The server refused the command for now and wrote nothing (a script refused at its
    first write writes nothing either): full, read-only, loading, busy or unable to
    persist. Back off and retry; the same call can succeed later."""


class OutOfMemory(Unavailable):
    """``OOM``: used memory is over ``maxmemory`` and the policy evicts nothing."""


class ReadOnly(Unavailable):
    """``READONLY``: a replica (for instance a primary demoted by a failover)."""


class Loading(Unavailable):
    """``LOADING``: the server is loading its dataset after a start."""


class Busy(Unavailable):
    """``BUSY``: a script or module command is running past ``busy-reply-threshold``."""


class Misconf(Unavailable):
    """``MISCONF``: the server cannot persist (a failed RDB save stops writes)."""


class TryAgain(Unavailable):
    """``TRYAGAIN`` / ``MASTERDOWN`` / ``CLUSTERDOWN``: the topology is moving."""


class NoPermission(CommandError):
    """``NOPERM``: the ACL user may not run this command or touch these keys."""


class NoScript(CommandError):
    """``NOSCRIPT``: no script with that SHA (the connectors reload and retry it)."""


_CODES: dict[str, type[CommandError]] = {
    "OOM": OutOfMemory, "READONLY": ReadOnly, "LOADING": Loading, "BUSY": Busy,
    "MISCONF": Misconf, "TRYAGAIN": TryAgain, "MASTERDOWN": TryAgain,
    "CLUSTERDOWN": TryAgain, "NOPERM": NoPermission, "NOSCRIPT": NoScript,
}


class NotDurable(EchoMQError):
    """A write asked to wait (``durability.Wait``) was applied on the primary, but fewer
    replicas (or no local fsync) acknowledged it in time. ``result`` is the write's own
    outcome; ``local`` (1/0, -1 when not asked) and ``replicas`` what was acknowledged."""

    def __init__(self, message: str, result: object, local: int, replicas: int) -> None:
        super().__init__(message)
        self.result = result
        self.local = local
        self.replicas = replicas


class WireError(EchoMQError):
    """The server could not be reached or the connection broke; nothing is known to be written."""


class ConfigError(EchoMQError):
    """A connector or server cannot be set up as asked (e.g. wire 6 without the module)."""


class CrossSlotError(ServerError, ConfigError):
    """The keys of one call span several Valkey Cluster slots: a key was built outside its
    queue's hash tag ``{q}``. A programming error, never weather: it is not retried."""


class NativeUnavailable(ConfigError):
    """The native module is not built or not loaded, with the reason."""


def from_server(text: str) -> ServerError:
    """The exception for a server error reply ``text`` (kept verbatim)."""
    if text.startswith("EMQSTALE job gone"):
        return GoneError(text)
    if text.startswith("EMQSTALE"):
        return StaleError(text)
    if text.startswith("EMQKIND"):
        return KindError(text)
    if text.startswith("EMQSTATE"):
        return StateError(text)
    return _CODES.get(text.split(" ", 1)[0], CommandError)(text)


# -- waiting for a job's end (``App.result``) ----------------------------------------------


class JobFailed(EchoMQError):
    """The job died (dead-lettered) instead of completing; ``error`` is its last error text."""

    def __init__(self, job_id: str, error: str | None) -> None:
        super().__init__(f"job {job_id} died: {error or 'no error recorded'}")
        self.job_id = job_id
        self.error = error


class JobCancelled(EchoMQError):
    """The job was cancelled (``jobs.cancel`` / ``App.cancel``) before it completed."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} was cancelled")
        self.job_id = job_id


class JobExpired(EchoMQError):
    """The job was not started by its deadline (``expires``) and ended ``expired``: it
    never ran."""

    def __init__(self, job_id: str, deadline_ms: int | None = None) -> None:
        at = "" if deadline_ms is None else f" (deadline {deadline_ms} ms, SERVER clock)"
        super().__init__(f"job {job_id} expired before it started{at}")
        self.job_id = job_id
        self.deadline_ms = deadline_ms


class JobNotFound(EchoMQError, LookupError):
    """No row, kept result or end token for the job id on the queues looked at."""


class SignalTimeout(EchoMQError):
    """A durable wait (``current_job().wait_for``) reached its timeout, on the SERVER
    clock, before a signal for its key resumed it. ``key`` is the signal key, ``step`` the
    wait's step name, ``at_ms`` the SERVER ms the wait timed out. Raised in the handler on
    the run after the timeout, and on every later run of the job (the step is recorded
    timed out)."""

    def __init__(self, key: str, step: str, at_ms: int | None = None) -> None:
        at = "" if at_ms is None else f" at {at_ms} ms (SERVER clock)"
        super().__init__(f"wait {step!r} for signal {key!r} timed out{at}")
        self.key = key
        self.step = step
        self.at_ms = at_ms
