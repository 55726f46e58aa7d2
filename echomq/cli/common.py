"""What several commands share: argument types, the connection, common flags, the server's
URL as a person reads it, and a failure in words (``explain``, ``plain``)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from echomq.core.times import parse_duration, parse_instant


def port(text: str) -> int:
    """A TCP port argument (0..65535), refused by argparse (exit 2) otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {value}")
    return value


def word_value(word: str) -> Any:
    """A task argument given as a word: the JSON value it parses as, else the string."""
    try:
        return json.loads(word)
    except ValueError:
        return word


def url_flag(p: argparse.ArgumentParser) -> None:
    """``--url``, which every command that talks to a server takes, and
    ``--command-timeout``, the socket timeout of its commands (``App(timeout=)``)."""
    p.add_argument("--url", default=None, help="server URL (default: $ECHOMQ_URL, else embedded)")
    command_timeout_flag(p)


def command_timeout_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--command-timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds one server command may take on the socket (App(timeout=); "
                        "default 5)")


def command_timeout(args: argparse.Namespace) -> float | None:
    """``--command-timeout`` (s), or ``None`` when not given (the app's own applies)."""
    given: float | None = getattr(args, "command_timeout", None)
    if given is not None and not given > 0:
        raise SystemExit("echomq: --command-timeout must be > 0 seconds")
    return given


def connect(args: argparse.Namespace) -> tuple[Any, Any]:
    """``(connector, app)``: the app owns the embedded server when no URL is given."""
    from echomq.connectors.plan import DEFAULT_TIMEOUT_S
    from echomq.tasks.app import App

    app = App(default_url(args.url), timeout=command_timeout(args) or DEFAULT_TIMEOUT_S)
    return app.connector(), app


def parse_kwargs(text: str | None) -> dict[str, Any]:
    """``--kwargs`` as a dict: a JSON object, refused in words otherwise."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--kwargs is not JSON ({exc.msg} at character {exc.pos}): "
                         f"write an object with double-quoted keys, e.g. "
                         "'{\"y\": 2}'") from None
    if not isinstance(value, dict):
        raise ValueError("--kwargs must be a JSON object, e.g. '{\"y\": 2}'")
    return value


def find_queue(conn: Any, job_id: str, declared: list[str] | None = None) -> str | None:
    """The queue holding ``job_id``'s row: the registered (and ``declared``) queues first,
    in one round trip; a scan for the others only when they miss."""
    from echomq.verbs import registry
    known: list[str] = registry.queues(conn, scan=False, declared=declared or [])
    found: str | None = registry.locate(conn, job_id, known)
    if found is None:
        rest = [q for q in scan_queues(conn) if q not in known]
        found = registry.locate(conn, job_id, rest)
    return found


def scan_queues(conn: Any, progress: bool = True, declared: list[str] | None = None
                ) -> list[str]:
    """Every queue: registered (``registry``) and found by scanning for EchoMQ sorted sets
    on every primary (a progress line on stderr when the scan runs longer than a second)."""
    from echomq.verbs import registry
    started, shown = time.monotonic(), False

    def report(scanned: int, found: int) -> None:
        nonlocal shown
        if progress and time.monotonic() - started > 1.0:
            print(f"\rscanning... {scanned} sets, {found} queues", end="",
                  file=sys.stderr, flush=True)
            shown = True

    names: list[str] = registry.queues(conn, scan=True, declared=declared or [],
                                       budget=10**12, progress=report)
    if shown:
        print(file=sys.stderr)
    return names


def until_type(text: str) -> tuple[str, int]:
    """``--until``'s value: ``("in", ms)`` for a duration (priced on the SERVER clock once
    connected), ``("at", epoch ms)`` for an instant."""
    if re.fullmatch(r"\s*\d+(\.\d+)?\s*(ms|s|m|h|d)\s*", text):
        return ("in", parse_duration(text))
    return ("at", parse_instant(text))


def until_ms(conn: Any, until: tuple[str, int]) -> int:
    """An ``--until`` value as SERVER epoch ms (a duration counts from the server's now)."""
    from echomq.verbs import jobs

    mode, value = until
    return jobs.server_now_ms(conn) + value if mode == "in" else value



def fail(message: str) -> int:
    """Say ``message`` on stderr as ``echomq: ...`` and give exit status 2 (bad input)."""
    print(f"echomq: {message}", file=sys.stderr)
    return 2


def job_id_arg(text: str) -> str:
    """A job id given on the command line, refused before any I/O unless JOB-namespaced."""
    if not text.startswith("JOB"):
        raise ValueError(f"{text!r} is not a job id (ids look like JOB01H...)")
    return text


def default_url(explicit: str | None) -> str | None:
    """``--url``, else ``$ECHOMQ_URL``, else ``None`` (the embedded server); an empty or
    blank value counts as unset (``urls.given``), as ``App("")`` does."""
    from echomq.connectors.urls import given
    return given(explicit) or given(os.environ.get("ECHOMQ_URL"))


def where(url: str | None) -> str:
    """A server URL as a person reads it in an error: host:port (every startup node of a cluster
    URL, the path of a socket) and the db when not 0; never the password."""
    if not url:
        return "the embedded server"
    parts = urlsplit(url)
    if parts.scheme.startswith("unix"):
        return parts.path
    host = parts.netloc.rsplit("@", 1)[-1]
    db = parts.path.strip("/")
    return f"{host}/{db}" if db and db != "0" else host


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, unless the help already says it or there is
    none worth saying (``None``, ``False``)."""


    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if ("default" in text or action.default in (None, False, argparse.SUPPRESS)
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def explain(exc: BaseException, url: str | None) -> tuple[str, int]:
    """One or two lines naming the problem and the fix, and the exit code."""
    from echomq.core import errors
    if isinstance(exc, errors.WireError):
        tls_line = tls_reason(str(exc), where(url))
        if tls_line:
            return tls_line, 1
        reason = _reason(str(exc))
        if reason in ("wrong password", "a password is required"):
            said = ("refused the password in the URL" if reason == "wrong password"
                    else "needs a password and the URL gives none")
            return (f"Valkey at {where(url)} {said} ({reason}).\n"
                    "Put the server's password in the URL (valkey://:PASSWORD@host:port/0, "
                    "or valkey://USER:PASSWORD@... for an ACL user) in --url or ECHOMQ_URL; "
                    "`echomq server status` prints the embedded server's URL.", 1)
        return (f"cannot reach Valkey at {where(url)} ({reason}).\n"
                "Start one with `echomq server` and set ECHOMQ_URL to the URL it prints, "
                "or pass --url.", 1)
    if isinstance(exc, errors.ServerError):
        return plain(exc), 1
    if isinstance(exc, errors.EchoMQError):
        return str(exc), 1
    if isinstance(exc, (ValueError, TypeError, LookupError, argparse.ArgumentTypeError)):
        return str(exc), 2
    return (f"unexpected {type(exc).__name__}: {exc}\n"
            "(run again with --verbose for the traceback)", 1)


def tls_reason(text: str, at: str) -> str | None:
    """One line for a TLS handshake that failed (``None`` when ``text`` is not one): what
    went wrong and the setting that fixes it (``echomq.connectors.tls``)."""
    low = text.lower()
    detail = text.rsplit("] ", 1)[-1].split(" (_ssl.c")[0].strip(" .)")
    if "certificate verify failed" in low and ("mismatch" in low or "hostname" in low):
        return (f"TLS: the certificate of the server at {at} is not for that name "
                f"({detail}); connect by a name it lists, or set tls_verify=ca (a URL query "
                "parameter, App(tls_verify=...), or ECHOMQ_TLS_VERIFY) to check the chain "
                "only")
    if "certificate verify failed" in low:
        return (f"TLS: the server at {at} sent a certificate no CA you trust signed "
                f"({detail}); name the CA that signed it with tls_ca (a URL query parameter, "
                "App(tls_ca=...), or ECHOMQ_TLS_CA)")
    if "certificate required" in low or "alert handshake failure" in low:
        return (f"TLS: the server at {at} asks for a client certificate (mutual TLS); give "
                "tls_cert and tls_key (URL query parameters, App(...) keyword arguments, or "
                "ECHOMQ_TLS_CERT and ECHOMQ_TLS_KEY)")
    if "eof occurred in violation of protocol" in low:
        return (f"TLS: the server at {at} closed the connection during the handshake: it "
                "may ask for a client certificate (mutual TLS); give "
                "tls_cert and tls_key (URL query parameters, App(...) keyword arguments, or "
                "ECHOMQ_TLS_CERT and ECHOMQ_TLS_KEY)")
    if "wrong version number" in low or "record layer failure" in low:
        return (f"TLS: the server at {at} does not speak TLS on that port; use a valkey:// "
                "URL for a plain port")
    return None


def _reason(text: str) -> str:
    low = text.lower()
    for needle, words in (("refused", "connection refused"), ("error 111", "connection refused"),
                          ("timed out", "timed out"),
                          ("timeout", "timed out"), ("name or service", "unknown host"),
                          ("nodename", "unknown host"), ("wrongpass", "wrong password"),
                          ("noauth", "a password is required"),
                          ("authentication required", "a password is required"),
                          ("invalid username-password", "wrong password")):
        if needle in low:
            return words
    return text.split(": ", 1)[-1].rstrip(".")


def plain(exc: BaseException, job_id: str | None = None) -> str:
    """A server refusal in words (the raw code stays for ``--verbose``)."""
    from echomq.core import errors
    who = f"job {job_id}" if job_id else "the job"
    if isinstance(exc, errors.KindError):
        return f"{job_id or 'that'} is not a job id (ids look like JOB01H...)"
    if isinstance(exc, errors.GoneError):
        return f"{who} does not exist (never queued, or finished and deleted)"
    if isinstance(exc, errors.StaleError):
        return f"{who} is held by another worker now"
    if isinstance(exc, errors.StateError):
        text = str(exc)
        if "not dead" in text:
            return f"{who} is not dead, so there is nothing to retry"
        return f"{who} is not in a state that allows this ({text.split(' ', 1)[-1]})"
    return str(exc)
