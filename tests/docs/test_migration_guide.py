"""The migration guide says what differs (issue 32): `expires` works (it said "not yet"),
retries default to 25, results are JSON, handlers run in threads, and where a chord in a
chain, soft time limits, per-call timeouts, signals and startup hooks go."""

from __future__ import annotations

from echomq.runtime.route import DEFAULT_MAX_ATTEMPTS
from tests.support.paths import ROOT


def test_the_migration_guide_is_corrected_and_extended() -> None:
    page = (ROOT / "docs" / "migrating.md").read_text()
    assert "not yet" not in page
    assert f"`max_attempts={DEFAULT_MAX_ATTEMPTS}`" in page
    for said in ("Arguments and results are JSON", "Handlers run in threads",
                 "chain(a.s(), group(b.s(), c.s()), d.s())", "soft limit",
                 "task.options(timeout=10)", "| signals |", "App(on_startup=f, on_shutdown=g)",
                 "(guide/flows.md"):
        assert said in page, said
