"""The EMQ Valkey module (C): native twins of schedule, promote and delay, plus reschedule.

``module_path()`` returns the built shared object, or raises ``NativeUnavailable`` saying
why there is none.
"""

from __future__ import annotations

import pathlib

from ..errors import NativeUnavailable

MODULE_NAME = "emq"


def module_path() -> pathlib.Path:
    """The built module's path (to pass to ``--loadmodule``)."""
    here = pathlib.Path(__file__).parent
    for candidate in sorted(here.glob("_emq*.so")):
        return candidate
    raise NativeUnavailable(
        "the EMQ native module was not built with this install (no C compiler at "
        "`pip install` time?); wire=4 works without it"
    )


def available() -> bool:
    """True when a built module is present."""
    try:
        module_path()
    except NativeUnavailable:
        return False
    return True
