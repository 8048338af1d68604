"""The built site in headless Chromium: what a reader sees, clicks and searches; nothing leaves the machine.

Uses Debian's `chromium` (driven by Playwright for Python through `executable_path`); skipped
when it is absent. Screenshots go to test-output/site/ (git-ignored). The payload pages of
tests/fixtures/sanitize/ each fired in Chromium before the sanitiser: here they are loaded,
hovered and clicked, and no script of theirs may run and no request may leave for another host.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)",
                allow_module_level=True)
from playwright import sync_api as playwright  # noqa: E402  (after the skip: CI without chromium needs no driver)

from kwiki.site.stage import build_site  # noqa: E402
from kwiki.site.weight import FIRST_VIEW_BYTES, first_view, over_budget  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "site"
PAYLOADS = Path(__file__).resolve().parent / "fixtures" / "sanitize"
SHOTS = REPO / "test-output" / "site"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]



@pytest.fixture(scope="module")
def site(tmp_path_factory, served):
    root = tmp_path_factory.mktemp("project")
    for name in ("wiki", "artifacts", "results"):
        shutil.copytree(FIXTURE / name, root / name)
    # tags holding HTML fail `kwiki check`, so a strict build refuses them; shown anyway, they are text
    (root / "wiki" / "patterns" / "hostile-tags.md").write_text(
        '---\nid: hostile-tags\ntitle: Hostile tags\ntype: pattern\n'
        'tags: ["<img src=x onerror=window.__pwned=8>", "<script>window.__pwned=9</script>"]\n---\nBody.\n')
    build_site(root, root / "site", strict=False)
    with served(root / "site") as url:
        yield url




@pytest.fixture(scope="module")
def browser():
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, site):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.requests, pg.dialogs, pg.errors = [], [], []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    offsite = [u for u in pg.requests if not u.startswith(site) and not u.startswith(("data:", "blob:"))]
    context.close()
    assert offsite == [], "requests left the machine"
    assert pg.dialogs == [] and pg.errors == []


def test_home_page_shows_the_state_at_a_glance(page, site):
    page.goto(site)
    stats = page.locator(".kw-stat")
    assert stats.count() == 5 and stats.first.is_visible()
    assert page.get_by_text("Last verify run:").is_visible()
    # issue 40: the fixture's blocks were written before run ids, so its best page is measured, never verified
    assert page.locator(".kw-home table").get_by_text("measured", exact=True).first.is_visible()
    page.screenshot(path=str(SHOTS / "home.png"))


def test_technique_page_shows_badges_claims_chart_and_source(page, site):
    page.goto(site + "techniques/vector-copy/")
    assert page.locator(".kw-header .kw-state-measured").is_visible()  # issue 40: written before run ids
    assert page.locator(".kw-header").get_by_text("measured on NVIDIA H200, 2025-06-08", exact=False).is_visible()
    table = page.locator(".kw-claims table")
    assert table.is_visible() and table.get_by_text("4410 GB/s ±0.4%").is_visible()
    chart = page.locator("img.kw-chart[src*=history]")
    chart.scroll_into_view_if_needed()
    assert chart.is_visible() and chart.evaluate("img => img.complete && img.naturalWidth > 0")
    page.screenshot(path=str(SHOTS / "technique.png"), full_page=True)
    page.locator(".kw-artifacts a", has_text="The artifact's sources").click()  # sources: a page of their own
    page.wait_for_url("**/indexes/artifacts/copy_sm90a/")
    marker = page.locator(".kw-artifacts").get_by_text("KWIKI_FIXTURE_MARKER")
    assert not marker.is_visible()  # collapsed until opened
    page.locator(".kw-artifacts summary", has_text="copy_sm90a/copy.cu").click()
    assert marker.is_visible()


def test_tag_index_and_clicking_a_tag(page, site):
    page.goto(site + "indexes/tags/")
    assert page.locator('[id="tag:memory-bound"]').is_visible()
    page.screenshot(path=str(SHOTS / "tags.png"))
    page.goto(site + "techniques/vector-copy/")
    page.locator(".md-tag", has_text="vectorized-loads").first.click()
    page.wait_for_url("**/indexes/tags/#tag:vectorized-loads")
    assert page.locator("article").get_by_role("link", name="Vector copy with 16-byte loads").first.is_visible()


def test_search_finds_a_page_and_follows_it(page, site):
    page.goto(site)
    page.locator(".md-search__input").click()
    page.locator(".md-search__input").press_sequentially("reduction", delay=20)  # Material listens to keys
    result = page.locator(".md-search-result__item a", has_text="Reduction that was not reproduced").first
    result.wait_for(state="visible", timeout=15_000)
    page.screenshot(path=str(SHOTS / "search.png"))
    result.click()
    page.wait_for_url("**/kernels/reduce-worse/**")
    assert page.locator(".kw-header .kw-state-not-reproduced").is_visible()


def test_script_in_title_and_tags_renders_as_text(page, site):
    page.goto(site + "patterns/hostile/")
    heading = page.locator("article h1").first
    assert "<script>window.__pwned = 1</script>" in heading.inner_text()
    assert "<b>bold</b>" in heading.inner_text()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.screenshot(path=str(SHOTS / "hostile.png"))
    page.goto(site + "patterns/hostile-tags/")
    assert page.locator(".md-tag", has_text="<script>window.__pwned=9</script>").first.is_visible()
    assert page.locator(".md-tag", has_text="<img src=x onerror=window.__pwned=8>").first.is_visible()
    page.goto(site + "indexes/tags/")
    assert page.locator("article").get_by_text("<script>window.__pwned=9</script>").first.is_visible()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.screenshot(path=str(SHOTS / "hostile-tags.png"), full_page=True)


# ---------------------------------------------------------------- payloads: nothing runs, nothing leaves


@pytest.fixture(scope="module")
def payload_site(tmp_path_factory, served):
    root = tmp_path_factory.mktemp("payloads")
    shutil.copytree(PAYLOADS / "wiki", root / "wiki")
    build_site(root, root / "site", strict=False)  # what `kwiki serve` shows: sanitised, with warnings
    with served(root / "site") as url:
        yield url


def _hover(*texts):
    return lambda pg: [pg.locator("article").get_by_text(t, exact=True).hover() for t in texts]


def _click(*texts):
    return lambda pg: [pg.locator("article").get_by_text(t, exact=True).click() for t in texts]


FIRE = {  # what a reader does on each payload page (loading it fires the rest)
    "attr-list": _hover("hover me", "Hover this paragraph."),
    "backslash-url": None,
    "base-href": _click("home page"),  # a relative link: with <base> it would lead to evil.example
    "details-ontoggle": _click("Opened"),  # toggles again (it also fires on load, being open)
    "img-onerror": None,
    "javascript-link": _click("click me", "click me too", "click me three"),
    "remote-css": None,
    "svg-onload": None,
    "theme-config": None,  # Material would take its base URL and search worker from the page
}


@pytest.fixture(scope="module")
def payload_context(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context
    context.close()


@pytest.fixture
def guarded(payload_context, payload_site):
    """A page whose requests to any other host are recorded and refused (Playwright route interception)."""
    pg = payload_context.new_page()
    pg.offsite, pg.dialogs, pg.errors = [], [], []

    def route(r):
        if r.request.url.startswith((payload_site, "data:", "blob:")):
            r.continue_()
        else:
            pg.offsite.append(r.request.url)
            r.abort()

    pg.route("**/*", route)
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    pg.close()


def test_every_payload_page_is_fired():
    assert sorted(FIRE) == sorted(p.stem for p in (PAYLOADS / "wiki" / "payloads").glob("*.md"))


@pytest.mark.parametrize("name", sorted(FIRE))
def test_payload_runs_no_script_and_fetches_nothing_elsewhere(guarded, payload_site, name):
    pg = guarded
    pg.goto(f"{payload_site}payloads/{name}/", wait_until="networkidle")
    if FIRE[name]:
        FIRE[name](pg)
        pg.wait_for_load_state("networkidle")
    pg.wait_for_timeout(100)  # handlers fire asynchronously (toggle, load)
    assert pg.evaluate("typeof window.__pwned") == "undefined", name
    assert pg.offsite == [], "requests left for another host"
    assert pg.dialogs == [] and pg.errors == []
    assert pg.url.startswith(payload_site)


@pytest.mark.parametrize("path", ["payloads/active.html", "payloads/diagram.svg"])
def test_files_a_browser_would_run_are_not_served(guarded, payload_site, path):
    response = guarded.goto(payload_site + path)
    assert response is not None and response.status == 404
    assert guarded.evaluate("typeof window.__pwned") == "undefined"


# ---------------------------------------------------------------- readers: layout, charts, weight, accessibility

VIEWS = {"home": "", "ladder": "nvidia/kernels/gemv-bf16/", "gemm": "nvidia/kernels/gemm-aligned/",
         "ws": "nvidia/techniques/warp-specialization/algo-warp-specialization/", "tags": "indexes/tags/",
         "loads": "nvidia/techniques/vectorized-loads/", "persistent": "nvidia/techniques/persistent-kernel/"}
FIRST_VIEW_TYPES = frozenset({"document", "stylesheet", "script", "xhr", "fetch"})
MIN_CHART_PX = 11
# every ladder or claims table, and the scroll wrapper Material puts around a Markdown table
TABLE_REGIONS = ".kw-scroll, .kw-ladder-table, .kw-claims table, .kw-claims .md-typeset__scrollwrap"
SERIOUS = frozenset({"serious", "critical"})


@pytest.fixture(scope="module")
def wiki_built(tmp_path_factory):
    """The repository's own wiki, built as `kwiki build` builds it (its mkdocs.yml, artifacts and results): the
    site's directory."""
    root = tmp_path_factory.mktemp("wiki")
    for name in ("wiki", "artifacts", "results"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.o", "build"))
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    build_site(root, root / "site")
    return root / "site"


@pytest.fixture(scope="module")
def wiki_site(wiki_built, served):
    with served(wiki_built) as url:
        yield url


GENERATED = 288  # beside the repository's 12 pages: 300
GROWTH = 0.02  # a first view at 300 pages weighs at most 2% more than at 12
LISTINGS = {"home": "", "tags": "indexes/tags/", "evidence": "indexes/evidence/",
            "architectures": "indexes/architectures/"}


def _gen_wiki():
    spec = importlib.util.spec_from_file_location("gen_wiki", REPO / "bench" / "gen_wiki.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_wiki", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def grown_site(tmp_path_factory, served):
    """The repository's wiki beside 288 generated pages with claims, ladders, three runs each in the results
    store and traceable measurements blocks (bench/gen_wiki.py --store): 300 pages, built once."""
    root = tmp_path_factory.mktemp("grown")
    for name in ("wiki", "artifacts", "results"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.o", "build"))
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    _gen_wiki().generate(root, GENERATED, seed=0, measured=0.75, store=True)
    report = build_site(root, root / "site")
    assert report.pages >= 12 + GENERATED  # the repository's own pages grow in number
    with served(root / "site") as url:
        yield url


def _first_view(browser, url: str, width: int, scheme: str):
    """A fresh context (empty cache) at `width` in `scheme`; the page loaded until the network is idle, and
    the bytes of what it fetched by resource type: every request the page (or a worker it starts) made, sized
    by its response's Content-Length (reading bodies in a `requestfinished` handler lost a request now and
    then, and a first view's weight must not depend on the timing)."""
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    pg = context.new_page()
    requests = []
    pg.on("request", lambda request: requests.append(request))
    pg.goto(url, wait_until="networkidle")
    pg.wait_for_timeout(200)  # what a script starts after load (the search worker did, before it waited for search)
    pg.wait_for_load_state("networkidle")
    fetched: dict[str, tuple[str, int]] = {}
    for request in requests:
        response = None if request.url.startswith(("data:", "blob:")) else request.response()
        size = int(response.headers.get("content-length") or 0) if response is not None else 0
        fetched[request.url] = (request.resource_type, size)
    return context, pg, fetched


def _overflowing(pg) -> list[str]:
    return pg.eval_on_selector_all(TABLE_REGIONS, """els => els
        .filter(e => e.getClientRects().length && e.scrollWidth > e.clientWidth + 1)
        .map(e => `${e.className || e.tagName}: ${e.scrollWidth} > ${e.clientWidth}`)""")


def _chart_text_px(pg) -> list[tuple[str, float]]:
    """Each chart's smallest text as rendered: its smallest font-size x its shown width / its viewBox width."""
    pg.evaluate("document.querySelectorAll('article details').forEach(d => d.open = true)")
    return pg.evaluate("""async () => {
        const out = [];
        for (const img of document.querySelectorAll('article img.kw-chart')) {
            const svg = await (await fetch(img.src)).text();
            const sizes = [...svg.matchAll(/font-size="([\\d.]+)"/g)].map(m => parseFloat(m[1]));
            const box = parseFloat(svg.match(/viewBox="0 0 ([\\d.]+)/)[1]);
            out.push([img.getAttribute('src'), Math.min(...sizes) * img.getBoundingClientRect().width / box]);
        }
        return out;
    }""")


def _serious_violations(pg) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(pg)
    return [f"{v['id']} ({v['impact']}): {v['help']}: {[n['target'] for n in v['nodes']][:3]}"
            for v in results.response["violations"] if v["impact"] in SERIOUS]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1400, 390])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_reader_view(browser, wiki_site, view, width, scheme):
    """At desktop and phone width, light and dark: no ladder or claims table scrolls sideways at 1400 px, no
    chart text under 11 px at 390 px, a first view of at most 400 KB, and no serious accessibility violation."""
    context, pg, fetched = _first_view(browser, wiki_site + VIEWS[view], width, scheme)
    try:
        offsite = [u for u in fetched if not u.startswith(wiki_site) and not u.startswith(("data:", "blob:"))]
        assert offsite == []
        dark = pg.evaluate("document.body.getAttribute('data-md-color-scheme')")
        assert dark == ("slate" if scheme == "dark" else "default")
        weight = sum(size for kind, size in fetched.values() if kind in FIRST_VIEW_TYPES)
        assert weight <= FIRST_VIEW_BYTES, sorted(fetched.items(), key=lambda f: -f[1][1])[:8]
        if view in ("ladder", "gemm", "ws"):
            assert pg.locator(".kw-ladder-table").count() > 0 and pg.locator(".kw-claims").count() > 0
        if width == 1400:
            assert _overflowing(pg) == []
        else:
            small = [(src, px) for src, px in _chart_text_px(pg) if px < MIN_CHART_PX]
            assert small == []
        pg.screenshot(path=str(SHOTS / f"{view}-{width}-{scheme}.png"), full_page=view != "tags")
        assert _serious_violations(pg) == []
    finally:
        context.close()


def test_ladder_regions_are_reachable_by_keyboard_and_become_cards_on_a_phone(browser, wiki_site):
    context, pg, _ = _first_view(browser, wiki_site + VIEWS["ladder"], 390, "light")
    try:
        region = pg.locator(".kw-scroll").first
        assert region.get_attribute("tabindex") == "0" and region.get_attribute("role") == "region"
        assert region.get_attribute("aria-label").startswith("gemv_bf16_sm90a ladder at ")
        region.focus()
        assert pg.evaluate("document.activeElement.classList.contains('kw-scroll')")
        assert not pg.locator(".kw-ladder-table thead").first.is_visible()  # a card per row: labels in the cells
        assert pg.locator(".kw-ladder-table caption").first.is_visible()
        assert _overflowing(pg) == []
    finally:
        context.close()


# ---------------------------------------------------------------- pages that answer at a glance

SCREENS = {"desktop": (1400, 900), "phone": (390, 844)}
ANSWERING = ("ladder", "gemm", "ws", "loads", "persistent")  # pages with measurements: a figure in the first screen
FIGURE = ".kw-answer .kw-fig"


def _screen(browser, url: str, screen: str, scheme: str = "light"):
    width, height = SCREENS[screen]
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    pg = context.new_page()
    pg.goto(url, wait_until="networkidle")
    return context, pg


@pytest.mark.parametrize("screen", sorted(SCREENS))
@pytest.mark.parametrize("view", ANSWERING)
def test_first_measured_figure_is_within_the_first_screen(browser, wiki_site, view, screen):
    """The answer box's first figure lies wholly inside the first screen (before: 2.5 to 5.8 screens down at
    1400x900, up to 12.5 on a phone), and it is a number."""
    context, pg = _screen(browser, wiki_site + VIEWS[view], screen)
    try:
        figure = pg.locator(FIGURE).first
        assert figure.is_visible()
        box = figure.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= SCREENS[screen][1], box
        assert any(ch.isdigit() for ch in figure.inner_text())
    finally:
        context.close()


DRAWN = {"ladder": "curve", "ws": "curve", "loads": "curve", "persistent": "timeline",  # what each draws of its runs
         "decode": "compare"}
DRAWN_VIEWS = {**VIEWS, "decode": "nvidia/kernels/gemm-decode/"}  # not a reader view: its first view is over budget


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("screen", sorted(SCREENS))
@pytest.mark.parametrize("view", sorted(DRAWN))
def test_curves_and_the_measured_timeline_are_drawn(browser, wiki_site, view, screen, scheme):
    """The GEMV, warp-specialization and vectorized-loads pages draw their curve across sizes, the persistent-kernel
    page its measured timeline, the decode GEMM page its comparison over M: an image that loads, shows, and lies
    within the article's column at desktop and phone width, its white card inverted in the dark scheme only."""
    context, pg = _screen(browser, wiki_site + DRAWN_VIEWS[view], screen, scheme)
    try:
        drawn = pg.locator(f'article img.kw-chart[src*="/{DRAWN[view]}-"]')
        assert drawn.count() >= 1, view
        img = drawn.first
        img.scroll_into_view_if_needed()
        pg.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=img.element_handle(), timeout=10_000)
        assert img.is_visible()
        box, column = img.bounding_box(), pg.locator("article").bounding_box()
        assert box is not None and column is not None and box["width"] >= 0.5 * min(column["width"], 480)
        assert column["x"] - 0.5 <= box["x"] and box["x"] + box["width"] <= column["x"] + column["width"] + 0.5
        inverted = "invert" in img.evaluate("img => getComputedStyle(img).filter")
        assert inverted == (scheme == "dark")
    finally:
        context.close()


def test_badges_never_break_inside_a_word(browser, wiki_site):
    """At 1400 px every verdict and state badge is one line (they broke mid-word in the claims column)."""
    for view in ANSWERING:
        context, pg = _screen(browser, wiki_site + VIEWS[view], "desktop")
        try:
            broken = pg.eval_on_selector_all(".kw-badge", """els => els.filter(e => e.getClientRects().length > 1
                || e.getBoundingClientRect().height > 1.9 * parseFloat(getComputedStyle(e).lineHeight)
                || getComputedStyle(e).whiteSpace !== 'nowrap')  // in a narrower cell it would break
                .map(e => e.textContent)""")
            assert broken == [], view
        finally:
            context.close()


def _right_edges(pg) -> list[str]:
    """Tables and table wrappers whose right edge passes their article's (Material's wrapper reached 16 px past)."""
    return pg.evaluate("""() => {
        const limit = document.querySelector('article').getBoundingClientRect().right + 0.5;
        return [...document.querySelectorAll('article table, article .md-typeset__scrollwrap, .kw-claims, .kw-home')]
            .filter(e => e.getClientRects().length && e.getBoundingClientRect().right > limit)
            .map(e => `${e.className || e.tagName}: ${e.getBoundingClientRect().right} > ${limit}`);
    }""")


@pytest.mark.parametrize("screen", sorted(SCREENS))
@pytest.mark.parametrize("view", ["home", *ANSWERING])
def test_no_table_passes_its_column_or_scrolls_sideways(browser, wiki_site, view, screen):
    """No table reaches past its column, and at desktop width none scrolls sideways; on a phone the home page's
    table is a card per page (it was unreadable at 390 px)."""
    context, pg = _screen(browser, wiki_site + VIEWS[view], screen)
    try:
        assert _right_edges(pg) == []
        scrolling = pg.eval_on_selector_all("article table, article .md-typeset__scrollwrap, .kw-scroll", """els =>
            els.filter(e => e.getClientRects().length && e.scrollWidth > e.clientWidth + 1)
               .map(e => `${e.className || e.tagName}: ${e.scrollWidth} > ${e.clientWidth}`)""")
        if screen == "desktop" or view == "home":
            assert scrolling == []
        if view == "home" and screen == "phone":
            assert not pg.locator(".kw-home thead").first.is_visible()
    finally:
        context.close()


def test_layout_width_is_the_same_on_the_home_page_and_a_content_page(browser, wiki_site):
    widths = []
    for view in ("home", "gemm"):
        context, pg = _screen(browser, wiki_site + VIEWS[view], "desktop")
        widths.append(pg.evaluate("document.querySelector('.md-main__inner').getBoundingClientRect().width"))
        context.close()
    assert widths[0] == widths[1]


def test_one_ladder_per_artifact_the_others_link_to_it(browser, wiki_site):
    """The warp-specialized GEMM's ladder is on its page, SHAPE_TABLES shapes of it, linking to every shape on the
    ladder's own page; the persistent-kernel page shows only its claimed shapes and links to the page that owns it
    (it printed the same ladder in full on four pages)."""
    from kwiki.site.pages import SHAPE_TABLES

    owner = "nvidia/techniques/warp-specialization/algo-warp-specialization/"
    tables = '.kw-scroll[aria-label^="gemm_bf16_sm90a ladder"]'
    context, pg = _screen(browser, wiki_site + owner, "desktop")
    shown = pg.locator(tables).count()
    every = pg.locator("article a", has_text="its full ladder").first.get_attribute("href") or ""
    context.close()
    assert shown == SHAPE_TABLES and "indexes/ladders/gemm_bf16_sm90a" in every
    context, pg = _screen(browser, wiki_site + "indexes/ladders/gemm_bf16_sm90a/", "desktop")
    whole = pg.locator(tables).count()
    context.close()
    context, pg = _screen(browser, wiki_site + "nvidia/techniques/persistent-kernel/", "desktop")
    try:
        some = pg.locator(tables).count()
        assert 0 < some < whole and shown < whole
        link = pg.locator("article a", has_text="Warp specialization for Hopper GEMM").first
        assert "algo-warp-specialization" in (link.get_attribute("href") or "")
    finally:
        context.close()


# ---------------------------------------------------------------- search: what it found before, it finds still

# queries by what they match: page titles, summaries, code terms (the index's `terms`), tags
SEARCHES = {"title": ["GEMV", "persistent", "warp specialization", "TMA"],
            "summary": ["accumulation", "arithmetic intensity", "power cap"],
            "code": ["cp.async.bulk.tensor", "setmaxnreg", "__shfl_xor_sync", "cuTensorMapEncodeTiled"],
            "tag": ["block-reduction", "wave-quantization", "l2-flush", "tensor-core"]}
SEARCH_HITS = FIXTURE / "search_hits.json"  # the pages each query found in the repository's wiki before issue 23


# each scroll waits for its own scroll event (or a second) and two frames after it: Material reads the list's offset
# at the frame after a scroll, so the list is seen at the top before it is seen at the end
SCROLL_AWAY_AND_BACK = """async el => {
    const frame = () => new Promise(done => requestAnimationFrame(done));
    const scrolled = () => new Promise(done => {
        el.addEventListener("scroll", done, {once: true});
        setTimeout(done, 1000);
    }).then(frame).then(frame);
    let seen = scrolled(); el.scrollTo(0, 0); await seen;
    seen = scrolled(); el.scrollTo(0, el.scrollHeight); await seen;
}"""


def _search_hits(browser, url: str, query: str) -> list[str]:
    """The pages (paths relative to the site) Material's search lists for `query`, best first."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    try:
        pg.goto(url, wait_until="networkidle")
        pg.locator(".md-search__input").click()
        # the whole query in one key-up: typed a key at a time, every prefix is a query of its own, and on a slow
        # machine the count read below was a prefix's ("tensor-": 35 hits) while the list became the query's (11)
        pg.locator(".md-search__input").fill(query)
        pg.locator(".md-search__input").press("End")
        pg.wait_for_function("""() => {
            const meta = document.querySelector('.md-search-result__meta');
            return meta && /match/i.test(meta.textContent);
        }""", timeout=15_000)
        pg.wait_for_timeout(300)  # the list follows the count
        # Material lists 10 results, then 4 more each time the end of the list scrolls into view: scroll away and
        # back until every page the count announces is listed (a query that a growing wiki matches more often
        # would otherwise push an old hit past the first batches; scrolling to a bottom already reached adds none)
        meta = pg.locator(".md-search-result__meta").text_content() or ""
        total = int(m.group(1)) if (m := re.search(r"(\d+)", meta)) else 1
        for _ in range(4 + total // 4):
            shown = pg.locator(".md-search-result__item").count()
            if shown >= total:
                break
            pg.eval_on_selector(".md-search__scrollwrap", SCROLL_AWAY_AND_BACK)
            try:
                pg.wait_for_function("n => document.querySelectorAll('.md-search-result__item').length > n",
                                     arg=shown, timeout=3_000)
            except playwright.TimeoutError:
                pass  # the next turn scrolls again
        assert pg.locator(".md-search-result__item").count() == total, (query, meta)
        hrefs = pg.eval_on_selector_all(".md-search-result__item > .md-search-result__link",
                                        "els => els.map(e => e.href)")
    finally:
        context.close()
    return [h[len(url):].split("#")[0] for h in hrefs]


def test_search_still_finds_what_it_found_before(browser, wiki_site):
    """Every page a query found in the repository's wiki before the index loaded on first use, it finds still
    (titles, summaries, code terms, tags; pages added since may join the hits)."""
    before = json.loads(SEARCH_HITS.read_text(encoding="utf-8"))
    assert sorted(before) == sorted(SEARCHES) and all(sorted(before[k]) == sorted(v) for k, v in SEARCHES.items())
    lost = {}
    for kind, queries in SEARCHES.items():
        for query in queries:
            now = _search_hits(browser, wiki_site, query)
            missing = [hit for hit in before[kind][query] if hit not in now]
            if missing:
                lost[f"{kind}: {query}"] = missing
    assert lost == {}


# ---------------------------------------------------------------- 300 pages: a first view that does not grow


def _weight(browser, url: str) -> tuple[int, list[str]]:
    """The bytes of a first view at desktop width (HTML, CSS, JS, and what it fetches), and the URLs fetched."""
    context, _, fetched = _first_view(browser, url, 1400, "light")
    context.close()
    return sum(size for kind, size in fetched.values() if kind in FIRST_VIEW_TYPES), sorted(fetched)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_first_view_does_not_grow_with_the_wiki(browser, wiki_site, grown_site, view):
    """At 300 pages a page's first view weighs within 2% of its weight at 12 and within 400 KB: the navigation
    is pruned to the page's section and the search index loads on first use of search, not with the page."""
    small, _ = _weight(browser, wiki_site + VIEWS[view])
    large, urls = _weight(browser, grown_site + VIEWS[view])
    assert [u for u in urls if "search_index" in u] == []
    assert large <= FIRST_VIEW_BYTES
    assert large <= small * (1 + GROWTH), (view, small, large)


def test_every_page_of_the_wiki_is_within_the_first_view_budget(wiki_built):
    """Every page the site builds (the wiki's, its listings, each artifact's sources and each ladder's every shape),
    not only the reader views: a page with many shapes or a long source no longer passes unseen (the decode GEMM
    page weighed 447 KB on 2026-12-04, its HTML 136 KB, and no test looked at it)."""
    assert over_budget(wiki_built) == []


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_a_pages_weight_from_its_files_is_no_less_than_what_a_browser_fetches(browser, wiki_built, wiki_site, view):
    """The budget test above reads files, not a browser: what a reader's first view fetches is no more than that,
    and the search worker is not part of it."""
    weight, urls = _weight(browser, wiki_site + VIEWS[view])
    assert [u for u in urls if "workers/search" in u or "search_index" in u] == []
    assert weight <= first_view(wiki_built, wiki_built / VIEWS[view] / "index.html")


@pytest.mark.parametrize("view", sorted(LISTINGS))
def test_listing_pages_stay_within_budget_at_300_pages(browser, grown_site, view):
    weight, _ = _weight(browser, grown_site + LISTINGS[view])
    assert weight <= FIRST_VIEW_BYTES, (view, weight)


def test_search_index_loads_on_first_use_and_finds_a_generated_page(browser, grown_site):
    context, pg, fetched = _first_view(browser, grown_site, 1400, "light")
    try:
        assert [u for u in fetched if "search_index" in u] == []
        with pg.expect_response(lambda r: "search/search_index.json" in r.url):
            pg.locator(".md-search__input").click()
        pg.locator(".md-search__input").press_sequentially("cuTensorMapEncodeTiled", delay=10)
        hit = pg.locator(".md-search-result__item a", has_text="TMA from PTX").first
        hit.wait_for(state="visible", timeout=15_000)
    finally:
        context.close()
