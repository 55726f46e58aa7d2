"""Running ``echomq`` as a user does: the console script installed beside this Python (so
the test needs no PATH set up), with the environment a test chooses."""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
from typing import Any

_SCRIPT = pathlib.Path(sys.executable).with_name("echomq")
ECHOMQ = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "echomq.cli"]


def echomq(*args: str, url: str | None = None, cwd: Any = None, timeout: float = 60,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``echomq *args`` to completion; ``url`` becomes ``ECHOMQ_URL`` (else unset)."""
    full = {k: v for k, v in os.environ.items() if k != "ECHOMQ_URL"}
    if url is not None:
        full["ECHOMQ_URL"] = url
    full.update(env or {})
    return subprocess.run([*ECHOMQ, *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)


def popen(*args: str, url: str, cwd: Any, env: dict[str, str] | None = None
          ) -> subprocess.Popen[bytes]:
    """Start ``echomq *args`` in the background (stdout and stderr piped)."""
    full = {**os.environ, "ECHOMQ_URL": url, **(env or {})}
    return subprocess.Popen([*ECHOMQ, *args], cwd=cwd, env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def kill_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """Kill each process still running and wait for it (a test's leftovers)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        with contextlib.suppress(Exception):
            p.wait(5)


def worker(app: str, *args: str, url: str, cwd: Any, log: Any,
           env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``python -m echomq.cli worker APP *args`` (as a deploy runs it) in ``cwd`` with
    ``ECHOMQ_URL=url``, its output (both streams) appended to the file ``log``."""
    full = {**os.environ, "ECHOMQ_URL": url, **(env or {})}
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "echomq.cli", "worker", app, *args],
                                cwd=cwd, env=full, stdout=out, stderr=subprocess.STDOUT)
