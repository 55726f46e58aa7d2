"""Errors. Server refusals keep the server's text exactly (``str(exc)``).

The seed's transitions answer with error replies whose first word is a code:
``EMQKIND`` (a foreign id), ``EMQSTALE`` (a fenced-out holder; ``EMQSTALE job gone`` when
the row is missing), ``EMQSTATE`` (the job is not in the state the verb needs) and, for the
native commands' own argument checks, ``ERR EMQ.<VERB> ...``. ``from_server`` maps a text
to its class; the most specific text is matched first, as the seed's handles do.
"""

from __future__ import annotations


class EchoMQError(Exception):
    """Base of every EchoMQ error."""


class ServerError(EchoMQError):
    """A refusal answered by the server; ``text`` is the reply verbatim."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


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


class WireError(EchoMQError):
    """The server could not be reached or the connection broke; nothing is known to be written."""


class ConfigError(EchoMQError):
    """A connector or server cannot be set up as asked (e.g. wire 6 without the module)."""


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
    return CommandError(text)


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


class JobNotFound(EchoMQError, LookupError):
    """No row, kept result or end token for the job id on the queues looked at."""
