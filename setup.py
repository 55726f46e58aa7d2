"""Build hook: compiles the EMQ Valkey module (C) with the package's normal build.

The module is a plain C shared object that a Valkey/Redis server loads with
``--loadmodule``; Python never imports it (there is no Python.h in it, so no Python
headers are needed and the server can resolve every symbol). setuptools builds it as the
extension ``echomq.native._emq`` beside its sources; ``echomq.native.module_path()``
finds it there.

Where the build cannot run (no C compiler, a non-POSIX platform) the package still
installs and works at wire 4: the failure is reported as a warning and its reason is
written to ``echomq/native/_emq_build_failed.txt`` so ``module_path()`` can say why.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

FAILURE_NOTE = "_emq_build_failed.txt"

EMQ = Extension(
    "echomq.native._emq",
    sources=["echomq/native/emq.c", "echomq/native/emq_hot.c", "echomq/native/emq_group.c",
             "echomq/native/emq_api.c", "echomq/native/emq_kept.c"],
    depends=["echomq/native/emq_api.h", "echomq/native/emq.h"],
    extra_compile_args=["-std=c99", "-O2", "-Wall", "-fvisibility=hidden"],
)


class OptionalBuildExt(build_ext):
    """``build_ext`` that skips the module with a warning instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all: setup of the compiler itself failed
            for ext in self.extensions:
                self._skip(ext, exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._skip(ext, exc)
        else:
            note = self._note_path(ext)
            if os.path.exists(note):
                os.remove(note)

    def get_export_symbols(self, ext: Extension) -> list[str]:
        # Not a Python extension: the server looks up RedisModule_OnLoad/ValkeyModule_OnLoad,
        # which the C source exports itself; there is no PyInit_ to export.
        return []

    def _note_path(self, ext: Extension) -> str:
        return os.path.join(os.path.dirname(self.get_ext_fullpath(ext.name)), FAILURE_NOTE)

    def _skip(self, ext: Extension, exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        sys.stderr.write(
            f"WARNING: skipping the EMQ native module ({reason}); echomq installs and works "
            "at wire 4, and echomq.native.module_path() will say why there is no module\n"
        )
        try:
            note = self._note_path(ext)
            os.makedirs(os.path.dirname(note), exist_ok=True)
            with open(note, "w", encoding="utf-8") as fh:
                fh.write(reason + "\n")
        except OSError:
            pass


setup(
    ext_modules=[] if os.name != "posix" else [EMQ],
    cmdclass={"build_ext": OptionalBuildExt},
)
