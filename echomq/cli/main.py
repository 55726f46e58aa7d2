"""The ``echomq`` command line. Each command word lives in its own module,
``echomq.cli.<word>``, which exposes ``register(subparsers)``; ``COMMANDS`` lists them in
the order ``echomq --help`` shows them. Helpers several share are in ``cli.common``.

Every command (and sub-command) takes ``-v/--verbose``, ``--log-level`` and
``--log-format text|json`` after its own name as well as before it. A failure is one or two
lines on stderr naming the problem and the fix, with a non-zero exit (2 for bad arguments,
1 otherwise); ``--verbose`` adds the traceback and the server's raw error text.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from echomq.cli import (
    acl,
    batch,
    cancel,
    cluster,
    dashboard,
    dead,
    demo,
    doctor,
    enqueue,
    group,
    health,
    inspect,
    job,
    jobs,
    limit,
    outbox,
    pause,
    purge,
    rate,
    repeat,
    resume,
    schedule,
    server,
    signal,
    stats,
    why,
    worker,
    workers,
)
from echomq.cli.common import default_url, explain

# one module per command word, each with register(subparsers), in the help's order
COMMANDS = (server, demo, worker, enqueue, schedule, job, jobs, stats, dead, why, cancel,
            pause, resume, group, rate, limit, batch, repeat, dashboard, cluster, doctor, acl,
            workers, inspect, health, purge, signal, outbox)
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
    for command in COMMANDS:
        command.register(sub)
    for child in _subparsers(parser):
        _logging_flags(child, top=False)
    return parser


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
