"""The slide decks as a classroom gets them: `python tools/slides.py decks` writes one per notebook, and each
opens in Chromium at the projector's 1280 x 720 with the network off. reveal.js starts (from the copy beside
the decks, not a CDN), nothing is fetched from outside, every image is inside the deck, and every slide either
fits the screen or scrolls inside it (its top and bottom on the screen, overflow scrolling), so no slide is cut
off. A screenshot of one tall slide with code is saved as docs/_build/slide.png for a person to look at.

Set COURSE_DECKS to a folder the command already wrote to check it instead of writing the decks again.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import slides  # noqa: E402  (tools/slides.py)
from test_book import CHROMIUM, chromium_output  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SCREENSHOT_DECK = "01_vector_add"
SCREEN = {"width": slides.SLIDE_WIDTH, "height": slides.SLIDE_HEIGHT}

#: Every slide (sub-slides included), shown in turn: its content's height, its box, whether it scrolls.
MEASURE_JS = """async () => {
  const found = [];
  for (const s of Reveal.getSlides()) {
    const at = Reveal.getIndices(s);
    Reveal.slide(at.h, at.v);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const box = s.getBoundingClientRect(), style = getComputedStyle(s);
    found.push({at: `${at.h}.${at.v || 0}`, content: s.scrollHeight, height: s.clientHeight,
                top: box.top, bottom: box.bottom, overflow: style.overflowY,
                text: (s.innerText || '').trim().slice(0, 50), code: !!s.querySelector('.jp-CodeCell')});
  }
  return found;
}"""


@pytest.fixture(scope="module")
def decks() -> Path:
    return chromium_output("COURSE_DECKS", ROOT / "docs" / "_build" / "slides", slides.write_decks)


def slide_problems(measured: list[dict], screen_height: int = slides.SLIDE_HEIGHT) -> list[str]:
    """A slide cut off: taller than its box without scrolling, or a box reaching past the screen."""
    problems = []
    for s in measured:
        off_screen = s["top"] < -1 or s["bottom"] > screen_height + 1
        cut = s["content"] > s["height"] + 1 and s["overflow"] not in ("auto", "scroll")
        if off_screen or cut:
            problems.append(f"slide {s['at']} ({s['text']!r}): {s['content']} px of content in a box of {s['height']} px "
                            f"from {s['top']:.0f} to {s['bottom']:.0f}, overflow {s['overflow']}")
    return problems


def _offline(route):
    """A deck may read files beside it and nothing else (MathJax's font probe asks for about:blank)."""
    url = route.request.url
    return route.continue_() if url.startswith("file://") or url == "about:blank" else route.abort()


@pytest.fixture(scope="module")
def shown(decks) -> dict[str, dict]:
    """Each deck as Chromium shows it offline at 1280 x 720: did reveal.js start, what failed, every slide."""
    from playwright.sync_api import sync_playwright

    found = {}
    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        browser = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, viewport=SCREEN, offline=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        browser.route("**/*", _offline)
        for nb in NOTEBOOKS:
            page, failed = browser.new_page(), []
            page.on("requestfailed", lambda r, failed=failed: failed.append(r.url[:100])
                    if r.url != "about:blank" else None)
            page.on("pageerror", lambda e, failed=failed: failed.append(f"script error: {e}"))
            page.goto((decks / f"{nb.stem}.slides.html").as_uri(), wait_until="load")
            try:
                page.wait_for_function("() => window.Reveal && Reveal.isReady()", timeout=20_000)
                started = True
            except Exception:
                started = False
            measured = page.evaluate(MEASURE_JS) if started else []
            if nb.stem == SCREENSHOT_DECK and started:
                (ROOT / "docs" / "_build").mkdir(parents=True, exist_ok=True)
                tallest = max(measured, key=lambda s: (s["code"], s["content"]))  # code, and scrolling
                h, v = (int(x) for x in tallest["at"].split("."))
                page.evaluate(f"() => Reveal.slide({h}, {v})")
                page.wait_for_timeout(300)
                # scroll the slide to its first code cell: a slide taller than the screen really scrolls
                scrolled = page.evaluate("""() => { const s = Reveal.getCurrentSlide();
                    const code = s.querySelector('.jp-CodeCell');
                    s.scrollTop = code.getBoundingClientRect().top - s.getBoundingClientRect().top - 60;
                    return s.scrollTop; }""")
                page.wait_for_timeout(200)
                page.screenshot(path=str(ROOT / "docs" / "_build" / "slide.png"))
            found[nb.stem] = {"started": started, "failed": failed, "slides": measured,
                              "scrolled": scrolled if nb.stem == SCREENSHOT_DECK and started else None}
            page.close()
        browser.close()
    return found


def test_every_deck_starts_offline_from_the_files_beside_it(decks, shown):
    assert (decks / slides.REVEAL / "dist" / "reveal.js").exists()
    not_started = [name for name, d in shown.items() if not d["started"]]
    assert not not_started, f"reveal.js did not start offline in {not_started}"
    failed = {name: d["failed"] for name, d in shown.items() if d["failed"]}
    assert not failed, f"requests that failed offline (or script errors): {failed}"
    for nb in NOTEBOOKS:
        html = (decks / f"{nb.stem}.slides.html").read_text(encoding="utf-8")
        outside = re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?:[^"]+)"', html)
        assert not outside, f"{nb.stem}: a deck loads {outside[:3]} from the network"
        assert "../images/" not in html, f"{nb.stem}: an image is linked, not inside the deck"


def test_every_slide_fits_1280_x_720_or_scrolls(shown):
    assert all(len(d["slides"]) >= 3 for d in shown.values()), {k: len(d["slides"]) for k, d in shown.items()}
    problems = {name: slide_problems(d["slides"]) for name, d in shown.items()}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, "\n".join(f"{k}: {len(v)} slides cut off, e.g. {v[:2]}" for k, v in problems.items())
    assert shown[SCREENSHOT_DECK]["scrolled"] > 100, "the tallest slide with code did not scroll"
    assert (ROOT / "docs" / "_build" / "slide.png").stat().st_size > 10_000


def test_the_slide_check_catches_a_slide_cut_off():
    fits = {"at": "1.0", "content": 600, "height": 700, "top": 10, "bottom": 710, "overflow": "visible", "text": ""}
    scrolls = dict(fits, at="2.0", content=1500, overflow="auto")
    cut = dict(scrolls, at="3.0", overflow="visible")  # taller than the screen and not scrolling
    below = dict(fits, at="4.0", top=0, bottom=1400, height=1400)  # a box that runs off the screen
    found = slide_problems([fits, scrolls, cut, below])
    assert [p.split(" ")[1] for p in found] == ["3.0", "4.0"]
