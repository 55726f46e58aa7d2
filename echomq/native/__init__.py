"""The EMQ Valkey module (C): native twins of enqueue, schedule, promote and delay, plus
reschedule.

The module is built by the package's own build (``setup.py``: a setuptools extension named
``echomq.native._emq``, plain C with no Python API in it) and is loaded by a server with
``--loadmodule``; Python never imports it. ``module_path()`` returns the built shared
object, or raises ``NativeUnavailable`` saying why there is none; ``available()`` says
whether it exists. ``ECHOMQ_NATIVE_MODULE`` names another build to use instead (an ASan
build, a development build outside the package).
"""

from __future__ import annotations

import os
import pathlib

from echomq.core.errors import NativeUnavailable

MODULE_NAME = "emq"
COMMANDS = ("EMQ.SCHEDULE", "EMQ.PROMOTE", "EMQ.DELAY", "EMQ.RESCHEDULE", "EMQ.ENQUEUE")
ENV_OVERRIDE = "ECHOMQ_NATIVE_MODULE"
# Written by setup.py beside the sources when the C build failed, with the reason.
BUILD_FAILURE_NOTE = "_emq_build_failed.txt"

_HERE = pathlib.Path(__file__).parent


def _why_missing() -> str:
    note = _HERE / BUILD_FAILURE_NOTE
    if note.is_file():
        reason = note.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        detail = reason[0] if reason else "no detail recorded"
        return f"the C build of the EMQ module failed at install time ({detail})"
    if (_HERE / "emq.c").is_file():
        return (
            "the EMQ module was not built with this install (the sources are here but no "
            "_emq*.so beside them: reinstall with a C compiler present, e.g. `pip install .`, "
            "or `python setup.py build_ext --inplace` in a checkout)"
        )
    return "this install carries neither the EMQ module nor its sources"


def module_path() -> pathlib.Path:
    """The built module's path (to pass to ``--loadmodule``).

    Raises ``NativeUnavailable`` with the reason when there is none.
    """
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        path = pathlib.Path(override)
        if not path.is_file():
            raise NativeUnavailable(f"{ENV_OVERRIDE}={override} names no file")
        return path
    for candidate in sorted(_HERE.glob("_emq*.so")):
        return candidate
    raise NativeUnavailable(f"{_why_missing()}; wire=4 (scripts) works without it")


def unavailable_reason() -> str | None:
    """Why there is no module here (the text ``module_path()`` would raise), or ``None``."""
    try:
        module_path()
    except NativeUnavailable as exc:
        return str(exc)
    return None


def available() -> bool:
    """True when a built module is present."""
    try:
        module_path()
    except NativeUnavailable:
        return False
    return True
