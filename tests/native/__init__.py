"""The native module's tests (a package, so its conftest is ``native.conftest`` beside
the suite's own ``conftest``)."""
