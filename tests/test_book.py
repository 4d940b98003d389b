"""The course's site (docs/conf.py) in a real browser: every page loads with no console error,
every image and internal link resolves, each notebook page links to Colab (or says how) and to
its .ipynb, and a screenshot of one notebook page is saved for a person to look at.

The site is built here into docs/_build/html, unless COURSE_BOOK names a site already built
(`.ci/run` builds it once with the documented command). Chromium is Debian's package, driven by
Playwright's client (no browser download); without /usr/bin/chromium the test is skipped.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from helpers import colab

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOT_PAGE = "notebooks/07_hopper_wgmma_tma.html"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def build_site(out: Path) -> None:
    """The documented build command; a warning about a broken image or link fails it."""
    cmd = [sys.executable, "-m", "sphinx", "-q", "-b", "html", "-c", "docs", ".", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = [line for line in done.stderr.splitlines() if "image file not readable" in line
              or "xref_missing" in line or "reference target not found" in line]
    assert not broken, "\n".join(broken)


@pytest.fixture(scope="module")
def site() -> Path:
    if not Path(CHROMIUM).exists():
        message = "Debian's chromium is not installed (apt-get install -y chromium); .ci/run installs it"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    pytest.importorskip("playwright", reason="the playwright client is pinned in requirements.txt")
    given = os.environ.get("COURSE_BOOK")
    out = Path(given) if given else ROOT / "docs" / "_build" / "html"
    if not given:
        build_site(out)
    return out


class _Refs(html.parser.HTMLParser):
    """The ids a page defines and the links it holds."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


def _refs(page: Path) -> _Refs:
    parser = _Refs()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def broken_links(site: Path) -> list[str]:
    """Every link inside the site that names a missing file, or a missing anchor in a page."""
    refs = {p: _refs(p) for p in site.rglob("*.html")}
    broken = []
    for page, r in refs.items():
        for href in r.links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("mailto:"):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {href} (no such file)")
            elif parts.fragment and target in refs and unquote(parts.fragment) not in refs[target].ids:
                broken.append(f"{page.relative_to(site)}: {href} (no such anchor)")
    return broken


def test_every_internal_link_resolves(site):
    assert not broken_links(site)


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _font_probe(text: str) -> bool:
    """MathJax 2 tells whether its web fonts have loaded by also loading a font at about:blank,
    which Chromium reports as an error; it is MathJax's own probe, not a missing file."""
    return "about:blank" in text


def check_page(page, url: str) -> list[str]:
    """Load one page; return what went wrong: console errors, failed requests, broken images."""
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text} ({m.location.get('url')})")
            if m.type == "error" and not _font_probe(f"{m.text} {m.location.get('url')}") else None)
    page.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})")
            if not _font_probe(r.url) else None)
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(url, wait_until="networkidle")
    for img in page.query_selector_all("img"):
        img.scroll_into_view_if_needed()
    page.wait_for_function("() => [...document.images].every(i => i.complete)", timeout=15_000)
    broken = page.evaluate("""() => [...document.images]
        .filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src'))""")
    problems += [f"image does not load: {src}" for src in broken]
    if page.query_selector(".math"):  # MathJax (served by the site) typesets the formulas
        try:
            page.wait_for_selector(".MathJax, .MathJax_Display", state="attached", timeout=20_000)
        except Exception:
            problems.append("MathJax typeset no formula")
    return problems


def _only_this_site(origin: str):
    """Requests outside the site are refused: the site must work offline, as it was built."""
    def route(r):
        return r.continue_() if r.request.url.startswith(origin) else r.abort()
    return route


def test_every_page_loads_cleanly_in_chromium(site, server):
    from playwright.sync_api import sync_playwright

    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if "_static" not in p.parts)
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert {f"notebooks/{n}.html" for n in notebooks} <= set(pages) and "index.html" in pages
    failures = {}
    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        browser = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                                        headless=True, viewport={"width": 1280, "height": 900})
        browser.route("**/*", _only_this_site(server))
        for name in pages:
            page = browser.new_page()
            problems = check_page(page, urljoin(server, name))
            if name.startswith("notebooks/") and Path(name).stem in notebooks:
                links = page.evaluate("() => [...document.querySelectorAll('.course-links a')]"
                                      ".map(a => a.getAttribute('href') || a.textContent)")
                colab_link = colab.colab_url(colab.repository(), Path(name).stem)  # as the notebook's badge
                if links != [colab_link, f"{Path(name).stem}.ipynb"][0 if colab_link else 1:]:
                    problems.append(f"above the notebook, not its Colab link (when published) and download link: {links}")
            if name == SCREENSHOT_PAGE:
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=str(site.parent / "screenshot.png"))
            if problems:
                failures[name] = problems
            page.close()
        browser.close()
    assert not failures, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in failures.items())
    assert (site.parent / "screenshot.png").stat().st_size > 10_000
