"""Importing the user's code named by a ``module:attribute`` spec (``echomq worker
mod:app``, ``--events mod:observer``), with the current directory importable as
``python -m`` makes it."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType


def import_from_cwd(module_name: str) -> ModuleType:
    """Import ``module_name`` with the current directory on ``sys.path`` (first, once);
    its ``ImportError`` propagates for the caller to word."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(module_name)
