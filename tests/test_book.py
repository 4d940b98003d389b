"""The course's site (docs/conf.py) in a real browser at 1280 px, as a student reads it: every page loads with
no console error, every image and internal link resolves, each notebook page links to Colab (or says how) and
to its .ipynb; no code or output block scrolls sideways; every diagram can be enlarged and its text is at least
9 px as shown; no setup cell or test marker is visible; the lessons come first, the maintainers' pages apart.
Screenshots of the front page and of one notebook page are saved for a person to look at.

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

from tools import colab
from test_images import _draw_module

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOT_PAGE = "notebooks/04_matmul_shared_blocking.html"
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


def chromium_output(variable: str, default: Path, build) -> Path:
    """The folder Chromium opens: the one $`variable` names, else `default` once `build(default)`
    has written it. Skipped where Debian's chromium or the playwright client is missing (on CI
    that fails: .ci/run installs both)."""
    if not Path(CHROMIUM).exists():
        message = "Debian's chromium is not installed (apt-get install -y chromium); .ci/run installs it"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    pytest.importorskip("playwright", reason="the playwright client is pinned in requirements.txt")
    given = os.environ.get(variable)
    if given:
        return Path(given)
    build(default)
    return default


@pytest.fixture(scope="module")
def site() -> Path:
    return chromium_output("COURSE_BOOK", ROOT / "docs" / "_build" / "html", build_site)


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
        if img.is_visible():  # an enlarged copy (sphinx-lightbox's overlay) is hidden until clicked
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


#: What a student never reads on a page: the setup cell (left out by its `remove-cell` tag) and the names of
#: the tests' cell tags and markers.
NOT_FOR_STUDENTS = ["Sets this notebook up on Colab", "Not on Colab", "colab-setup", "remove-cell", "nbval",
                    "NBVAL", "recorded-output"]
MIN_TEXT_PX = 9  # the smallest text of a diagram, as shown
SCREENSHOTS = {"index.html": "screenshot-front.png", SCREENSHOT_PAGE: "screenshot-notebook.png"}
#: Where the notebook page's screenshot looks: the end of a diagram, the prose under it, code and its output.
SCREENSHOT_AT = "img[src$='bank_conflicts.png']"
SCREENSHOT_BELOW = 560  # pixels below that diagram's top

#: Every `pre` of the article whose content is wider than its box (it scrolls sideways), and every output.
WIDE_BLOCKS_JS = """() => [...document.querySelectorAll('article pre, article .cell_output > .output')]
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => [e.scrollWidth - e.clientWidth,
               e.textContent.split('\\n').reduce((a, l) => l.length > a.length ? l : a, '').slice(0, 70)])"""
#: Each image of the article as shown: its file, displayed and natural width, and whether a click enlarges it.
IMAGES_JS = """() => [...document.querySelectorAll('article img')].filter(i => !i.closest('.lightbox-overlay'))
    .map(i => ({src: i.getAttribute('src'), shown: i.getBoundingClientRect().width, natural: i.naturalWidth,
                enlarges: i.classList.contains('lightbox-trigger') && !!i.closest('.lightbox-container')
                          && !!i.closest('.lightbox-container').querySelector('.lightbox-overlay img')}))"""
#: The captions of the left sidebar's tables of contents, each with the pages it lists.
PARTS_JS = """() => [...document.querySelectorAll('.bd-sidebar-primary p.caption')].map(c => {
    const list = c.nextElementSibling;
    return [c.textContent.trim(), list ? [...list.querySelectorAll('a')].map(a => a.getAttribute('href')) : []]; })"""


def _open_one_enlarged(page) -> str | None:
    """Click the first diagram the page shows smaller than it is: its overlay must show it larger."""
    index = page.evaluate("""() => [...document.querySelectorAll('article img.lightbox-trigger')]
        .findIndex(i => i.getBoundingClientRect().width < i.naturalWidth - 1)""")
    if index < 0:
        return "no diagram shown reduced, to click"
    img = page.query_selector_all("article img.lightbox-trigger")[index]
    shown = img.bounding_box()["width"]
    img.scroll_into_view_if_needed()
    img.click()
    page.wait_for_timeout(300)
    big = page.evaluate("""() => Math.max(0, ...[...document.querySelectorAll('.lightbox-overlay img')]
        .map(i => i.getBoundingClientRect().width))""")
    page.keyboard.press("Escape")
    return None if big > shown + 1 else f"clicking a diagram shows nothing larger (overlay {big} px, page {shown} px)"


@pytest.fixture(scope="module")
def seen(site, server) -> dict[str, dict]:
    """Every page of the site as Chromium shows it at 1280 x 900, offline: what went wrong loading it, its blocks
    that scroll sideways, its images, its text, the sidebar's parts."""
    from playwright.sync_api import sync_playwright

    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if "_static" not in p.parts)
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert {f"notebooks/{n}.html" for n in notebooks} <= set(pages) and "index.html" in pages
    found = {}
    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        browser = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                                        headless=True, viewport={"width": 1280, "height": 900})
        browser.route("**/*", _only_this_site(server))
        for name in pages:
            page = browser.new_page()
            problems = check_page(page, urljoin(server, name))
            is_notebook = name.startswith("notebooks/") and Path(name).stem in notebooks
            if is_notebook:
                links = page.evaluate("() => [...document.querySelectorAll('.course-links a')]"
                                      ".map(a => a.getAttribute('href') || a.textContent)")
                colab_link = colab.colab_url(colab.repository(), Path(name).stem)  # as the notebook's badge
                if links != [colab_link, f"{Path(name).stem}.ipynb"][0 if colab_link else 1:]:
                    problems.append(f"above the notebook, not its Colab link (when published) and download link: {links}")
            found[name] = {"problems": problems, "notebook": is_notebook, "wide": page.evaluate(WIDE_BLOCKS_JS),
                           "images": page.evaluate(IMAGES_JS), "parts": page.evaluate(PARTS_JS),
                           "text": page.evaluate("() => (document.querySelector('article') || document.body).innerText"),
                           "blocks": page.evaluate("() => document.querySelectorAll('article pre').length")}
            if name in SCREENSHOTS:
                if name == SCREENSHOT_PAGE:
                    page.evaluate(f"document.querySelector(\"{SCREENSHOT_AT}\").scrollIntoView()")
                    page.evaluate(f"window.scrollBy(0, {SCREENSHOT_BELOW})")
                else:
                    page.evaluate("window.scrollTo(0, 0)")
                page.wait_for_timeout(200)
                page.screenshot(path=str(site.parent / SCREENSHOTS[name]))
            if name == SCREENSHOT_PAGE:
                found[name]["enlarge"] = _open_one_enlarged(page)
            page.close()
        browser.close()
    return found


def test_every_page_loads_cleanly_in_chromium(seen, site):
    failures = {name: p["problems"] for name, p in seen.items() if p["problems"]}
    assert not failures, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in failures.items())
    for shot in SCREENSHOTS.values():
        assert (site.parent / shot).stat().st_size > 10_000


def test_no_code_or_output_block_scrolls_sideways_at_1280_px(seen):
    """The notebooks print lines of up to 120 characters; the column holds them (docs/_static/course.css)."""
    assert sum(p["blocks"] for p in seen.values() if p["notebook"]) > 100  # the measure saw the code
    wide = {name: p["wide"] for name, p in seen.items() if p["wide"]}
    assert not wide, "blocks wider than the column (overflow in px, the longest line):\n" + "\n".join(
        f"{name}: {len(blocks)}, e.g. {blocks[:3]}" for name, blocks in wide.items())


@pytest.fixture(scope="module")
def text_sizes() -> dict[str, float]:
    return _draw_module().text_sizes()


def diagram_problems(seen: dict, text_sizes: dict[str, float]) -> list[str]:
    """Each diagram of images/ as shown: its smallest text under MIN_TEXT_PX, or no click to enlarge it."""
    problems = []
    for name, p in seen.items():
        for img in p["images"]:
            file = img["src"].rsplit("/", 1)[-1]
            if file not in text_sizes:
                continue  # a chart a notebook plotted, not a diagram of images/
            scale = min(1.0, img["shown"] / img["natural"]) if img["natural"] else 0.0
            if text_sizes[file] * scale < MIN_TEXT_PX:
                problems.append(f"{name}: {file} shown at {scale:.0%}: its smallest text is "
                                f"{text_sizes[file] * scale:.1f} px (at least {MIN_TEXT_PX})")
            if not img["enlarges"]:
                problems.append(f"{name}: {file} cannot be enlarged")
    return problems


def test_every_diagram_reads_at_the_size_shown_and_enlarges(seen, text_sizes):
    shown = {img["src"].rsplit("/", 1)[-1] for p in seen.values() for img in p["images"]}
    assert len(shown & set(text_sizes)) >= 20, "the book shows the diagrams of images/"
    problems = diagram_problems(seen, text_sizes)
    assert not problems, "\n".join(problems)
    assert seen[SCREENSHOT_PAGE]["enlarge"] is None, seen[SCREENSHOT_PAGE]["enlarge"]


def test_the_diagram_check_catches_small_text_and_an_image_that_does_not_enlarge():
    page = {"images": [{"src": "../_images/a.png", "shown": 500, "natural": 1000, "enlarges": True},
                       {"src": "../_images/b.png", "shown": 800, "natural": 800, "enlarges": False},
                       {"src": "../_images/chart.png", "shown": 10, "natural": 1000, "enlarges": False}]}
    found = diagram_problems({"p.html": page}, {"a.png": 12.0, "b.png": 10.0})
    assert len(found) == 2 and "a.png shown at 50%" in found[0] and "b.png cannot be enlarged" in found[1]


def test_a_student_sees_no_setup_cell_and_no_test_marker(seen):
    """The setup cell is left out by its `remove-cell` tag (`python -m tools.colab` writes it)."""
    found = [f"{name}: {word!r}" for name, p in seen.items() if p["notebook"] for word in NOT_FOR_STUDENTS
             if word in p["text"]]
    assert not found, "a notebook page shows what a student does not need:\n" + "\n".join(found)


def test_the_lessons_come_first_and_the_maintainers_pages_apart(seen):
    parts = dict(seen["index.html"]["parts"])
    lessons = [href.split("#")[0] for href in parts.get("Lessons", [])]
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert lessons == [f"notebooks/{n}.html" for n in notebooks], parts
    assert list(parts)[0] == "Lessons" and len(parts.get("For maintainers", [])) == 2, parts
    front = seen["index.html"]["text"]
    assert front.index("What you will learn") < front.index("The lessons, in order") < front.index("Run it")
