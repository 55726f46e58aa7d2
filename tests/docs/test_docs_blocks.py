"""Every ```python block of the README and the docs site runs, as a script of its own,
against a real Valkey: an ephemeral embedded server of this module's, flushed before each
block so no block sees another's jobs (``needs: cluster`` blocks run on the session's
cluster). A block marked ``<!-- no-run: reason -->`` is reported as skipped, with its reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import valkey

from echomq.embedded.server import EmbeddedServer
from tests.support import blocks

pytestmark = pytest.mark.slow  # a subprocess per block: seconds in all

ALL = blocks.collect()


@pytest.fixture(scope="module")
def docs_server() -> Iterator[EmbeddedServer]:
    srv = EmbeddedServer(ephemeral=True)
    srv.start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_block_runs(block: blocks.Block, docs_server, tmp_path, request) -> None:
    if block.skip:
        pytest.skip(f"no-run: {block.skip}")
    if block.needs == "cluster":
        url = request.getfixturevalue("cluster").url
    else:
        url = docs_server.url
        client = valkey.Valkey.from_url(url)
        client.flushall()
        client.close()
    done = blocks.run(block, url, tmp_path)
    assert done.returncode == 0, (
        f"{block.id} failed (exit {done.returncode}):\n{done.stderr[-3000:]}\n--- the block:\n"
        f"{block.code}")


def test_the_pages_have_blocks_and_most_run() -> None:
    """The collector finds the blocks (a broken fence pattern would find none and pass)."""
    assert len(ALL) >= 20
    assert sum(1 for b in ALL if not b.skip) >= len(ALL) // 2


def test_a_broken_block_fails(docs_server, tmp_path) -> None:
    page = "Intro.\n\n```python\nfrom echomq import App\n\nApp().nope()\n```\n"
    (block,) = blocks.blocks_of(page, "broken.md")
    done = blocks.run(block, docs_server.url, tmp_path)
    assert done.returncode != 0 and "AttributeError" in done.stderr


def test_markers_skip_or_route_a_block() -> None:
    page = ("<!-- no-run: needs a long-running worker -->\n```python\nwhile True: pass\n```\n\n"
            "<!-- needs: cluster -->\n```python\nprint(1)\n```\n\n```python\nprint(2)\n```\n")
    skipped, clustered, plain = blocks.blocks_of(page, "m.md")
    assert skipped.skip == "needs a long-running worker" and skipped.line == 2
    assert clustered.needs == "cluster" and clustered.skip is None
    assert plain.skip is None and plain.needs is None and plain.code == "print(2)\n"
    with pytest.raises(ValueError, match="needs a reason"):
        blocks.blocks_of("<!-- no-run: -->\n```python\nx\n```\n")
    with pytest.raises(ValueError, match="unknown need"):
        blocks.blocks_of("<!-- needs: gpu -->\n```python\nx\n```\n")
    with pytest.raises(ValueError, match="never closed"):
        blocks.blocks_of("```python\nx\n")
