"""The child process of ``isolation="process"`` (``python -m echomq.runtime.child``): read one call
as JSON from stdin, run it, write one JSON reply line to stdout. See ``echomq.runtime.isolation``.

A module of its own so that ``-m`` does not re-run a module the package already imported.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

from echomq.runtime import handler
from echomq.runtime.handler import Delay, Fail, Job, RateLimited, Retry
from echomq.runtime.isolation import resolve
from echomq.runtime.verdict import formatted


def lineage(cls: type) -> list[str]:
    """``module.qualname`` of ``cls`` and of every class it derives from."""
    return [f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__]


def _main() -> None:
    """The child: read the call from stdin, run it, write one JSON reply line to stdout."""
    reply_to = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the function's prints go to the worker's stderr, not into the reply
    call = json.loads(sys.stdin.read())
    sys.path[:] = call["path"]
    queue, job_id, token, payload = call["job"]
    handler.enter(Job(queue, job_id, token, base64.b64decode(payload)))
    try:
        value = resolve(*call["ref"])(*call["args"], **call["kwargs"])
    except Delay as d:
        reply: list[Any] = ["delay", d.mode, d.value]
    except RateLimited as limited:
        reply = ["rate_limited", limited.ms]
    except Fail as final:
        reply = ["final", final.reason]
    except Retry as again:
        reply = ["retry", again.delay_ms, again.error_text()]
    except BaseException as exc:  # everything crosses back as a failure
        # with its classes' names, so retry_on / dont_retry_on match subclasses here too
        # and its formatted traceback, which the job's failure history keeps
        reply = ["fail", type(exc).__name__, str(exc), lineage(type(exc)),
                 formatted(exc)]
    else:
        reply = ["ok", value]
    try:
        text = json.dumps(reply, allow_nan=False)
    except (TypeError, ValueError) as exc:
        text = json.dumps(["unencodable", str(exc)])
    reply_to.write(text + "\n")
    reply_to.close()


if __name__ == "__main__":
    _main()
