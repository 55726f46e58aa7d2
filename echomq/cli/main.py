"""The ``echomq`` command line. Each command group lives in ``echomq.cli.<name>`` and
exposes ``register(subparsers)``; a group that fails to import is reported, not fatal.

Every command (and sub-command) takes ``-v/--verbose``, ``--log-level`` and
``--log-format text|json`` after its own name as well as before it. A failure is one or two
lines on stderr naming the problem and the fix, with a non-zero exit (2 for bad arguments,
1 otherwise); ``--verbose`` adds the traceback and the server's raw error text.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn
from urllib.parse import urlsplit

# one module per command group, each with register(subparsers)
GROUPS = ("servercmds", "democmd", "workercmds", "jobcmds", "whycmd", "controlcmds",
          "groupcmds", "repeatcmds", "dashboardcmd", "clustercmds", "doctorcmd", "aclcmd",
          "opscmds")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# options whose value is a duration: "--in -5s" must reach the parser as a value (to be
# refused in words), not as an unknown option
DURATION_FLAGS = ("--in", "--every", "--first-in", "--window")


def version() -> str:
    """The package's version: ``echomq.__version__``, the one place it is written (the
    build reads it from there too, so an installed wheel's metadata says the same)."""
    from echomq import __version__

    return __version__


def _logging_flags(p: argparse.ArgumentParser, top: bool) -> None:
    # below the top level the defaults are SUPPRESS, so a sub-command's parser does not
    # overwrite what was given before the command name
    hide: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("-v", "--verbose", action="count", **({"default": 0} if top else hide),
                   help="more logging; on an error, the traceback")
    p.add_argument("--log-level", type=str.upper, choices=LEVELS, metavar="LEVEL",
                   **({"default": None} if top else hide),
                   help="log level for echomq's loggers: " + ", ".join(LEVELS))
    p.add_argument("--log-format", choices=("text", "json"),
                   **({"default": "text"} if top else hide),
                   help="text lines (default) or one JSON object per line")


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += [child, *_subparsers(child)]
    return found


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, unless the help already says it or there is
    none worth saying (``None``, ``False``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if ("default" in text or action.default in (None, False, argparse.SUPPRESS)
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with a two-line refusal (the problem, then where the help is) instead of
    the whole usage block; sub-command parsers inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n(see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="echomq", description="EchoMQ: a job queue on Valkey in which time is a control."
    )
    parser.add_argument("--version", action="version", version=f"echomq {version()}")
    _logging_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        try:
            module = importlib.import_module(f"echomq.cli.{group}")
        except ModuleNotFoundError as exc:
            if exc.name == f"echomq.cli.{group}":
                continue
            raise
        module.register(sub)
    for child in _subparsers(parser):
        _logging_flags(child, top=False)
    return parser


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


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (HOST epoch seconds), ``level``, ``logger``,
    ``message`` (and ``exc`` with the traceback when there is one)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname,
                               "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


def configure_logging(args: argparse.Namespace) -> None:
    handler = logging.StreamHandler()
    if args.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2), handlers=[handler],
                        force=True)
    if args.log_level:
        logging.getLogger("echomq").setLevel(args.log_level)


def _attach_durations(argv: list[str]) -> list[str]:
    out: list[str] = []
    it = iter(argv)
    for word in it:
        if word in DURATION_FLAGS:
            value = next(it, None)
            if value is not None and value.startswith("-") and value[1:2].isdigit():
                out.append(f"{word}={value}")
                continue
            out.append(word)
            if value is not None:
                out.append(value)
            continue
        out.append(word)
    return out


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_attach_durations(list(sys.argv[1:] if argv is None else argv)))
    configure_logging(args)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # inside the try: a reader that left (| head) ends it here
        return code
    except BrokenPipeError:
        return _reader_left()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if args.verbose:
            traceback.print_exc()
            if hasattr(exc, "text"):
                print(f"server said: {exc.text}", file=sys.stderr)
        message, code = explain(exc, default_url(getattr(args, "url", None)))
        print(f"echomq: {message}", file=sys.stderr, flush=True)
        return code


def _reader_left() -> int:
    """Output piped into a reader that stopped reading (``| head``): end quietly, as other
    command-line tools do. Later writes (the interpreter's flush at exit) go nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no file (a test's capture)
        pass
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
