"""The docs site in a real browser: the site is built (``mkdocs build --strict``), served by
``python -m http.server``, and Playwright drives Debian's chromium over every page: each
loads, shows its title and logs no error; the search box finds "retry"."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml

from tests.support.paths import ROOT
from tests.support.polling import wait_for

CHROMIUM = os.environ.get("ECHOMQ_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run",
        "--disable-dev-shm-usage"]

from playwright.sync_api import Browser, expect, sync_playwright  # noqa: E402

pytestmark = pytest.mark.slow  # a site build and a real browser


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def base(site_dir: pathlib.Path) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                               "127.0.0.1", "--directory", str(site_dir)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(up, timeout=10)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav names."""
    def walk(items: list[object]) -> Iterator[str]:
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            if isinstance(value, list):
                yield from walk(value)
            else:
                yield str(value)

    return list(walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))


def site_pages(site_dir: pathlib.Path) -> list[str]:
    """Every page of the built site, as a URL path ("/", "/guide/tasks/", ...)."""
    found = []
    for index in sorted(site_dir.rglob("index.html")):
        rel = index.parent.relative_to(site_dir)
        if rel.parts and rel.parts[0] in ("assets", "search"):
            continue
        found.append("/" + "".join(f"{p}/" for p in rel.parts))
    return found


def test_every_page_renders(browser: Browser, base: str, site_dir: pathlib.Path) -> None:
    pages = site_pages(site_dir)
    assert len(pages) == len(nav_pages()), pages  # every page of the nav was built
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{page.url}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"{page.url}: {e}"))
    for path in pages:
        reply = page.goto(base + path)
        assert reply is not None and reply.status == 200, path
        expect(page.locator("article h1").first).to_be_visible()
        assert page.title().endswith("EchoMQ"), (path, page.title())
    assert not problems, problems
    ctx.close()


def test_the_api_page_renders_the_docstrings(browser: Browser, base: str) -> None:
    page = browser.new_page()
    page.goto(base + "/reference/api/")
    # mkdocstrings rendered the App class's docstring, not just the heading
    expect(page.locator("article")).to_contain_text("A registry of tasks bound to one server")
    # and a public module's members, re-exported from its layer (echomq.groups.set_limit)
    expect(page.locator("article")).to_contain_text("of the group's jobs active at once")
    page.close()


def test_search_finds_retry(browser: Browser, base: str) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(base + "/")
    box = page.locator("input.md-search__input")
    box.click()
    box.fill("retry")
    results = page.locator(".md-search-result__item")
    # the list fills in as the index answers: wait for the third item, not a count taken
    # the moment the first one shows
    expect(results.nth(2)).to_be_visible(timeout=15_000)
    expect(page.locator(".md-search-result")).to_contain_text("retr")
    page.close()
