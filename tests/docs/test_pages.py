"""The README is a front page (short, the Quickstart near the top) and the site's pages that
include parts of it (``--8<-- "README.md:name"``) name sections it has."""

from __future__ import annotations

import re

from tests.support.paths import ROOT


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    assert lines.index("## Quickstart") < 40
    for page in ("docs/getting-started.md", "docs/guide/tasks.md", "docs/reference/api.md"):
        assert f"]({page})" in "\n".join(lines), page  # it links into the site


def test_included_sections_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    included = set()
    for page in (ROOT / "docs").rglob("*.md"):
        for path, name in re.findall(r'^--8<-- "([^":]+)(?::([\w-]+))?"$', page.read_text(), re.M):
            assert (ROOT / path).exists(), (page, path)
            if name:
                included.add(name)
                text = (ROOT / path).read_text()
                start, end = f"--8<-- [start:{name}]", f"--8<-- [end:{name}]"
                assert text.count(start) == 1 and text.count(end) == 1, (path, name)
                assert text.index(start) < text.index(end)
    assert {"quickstart", "two-commands"} <= included
    assert "## Quickstart" in readme
