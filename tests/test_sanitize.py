"""The sanitised site: no page's script runs and nothing is fetched from another host.

Each payload page under tests/fixtures/sanitize/wiki/payloads/ is one attempt that fired in
Chromium before the sanitiser existed (tests/test_browser.py fires them in a browser too). Here the
built HTML is read back with the standard library's parser, independent of the sanitiser's own.
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kwiki.site import sanitize
from kwiki.site.sanitize import active_markup, clean, parse_url, remote_in_css, remote_in_html
from kwiki.site.stage import SiteError, build_site, remote_resources

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "sanitize"
PAYLOADS = sorted(p.stem for p in (FIXTURE / "wiki" / "payloads").glob("*.md"))


class _Read(HTMLParser):
    """Every start tag of a page with its attributes (values decoded as a browser decodes them)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def tags(text: str) -> list[tuple[str, dict[str, str]]]:
    reader = _Read()
    reader.feed(text)
    reader.close()
    return reader.tags


def scheme(value: str) -> str:
    """What a browser takes for the scheme: controls and spaces stripped, tabs and newlines removed."""
    value = re.sub(r"[\t\n\r]", "", value.strip("".join(map(chr, range(0x21)))))
    m = re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*):", value)
    return m.group(1).lower() if m else ""


@pytest.fixture(scope="module")
def payload_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("payloads")
    shutil.copytree(FIXTURE / "wiki", root / "wiki")
    report = build_site(root, root / "site", strict=False)
    return root, report


def page_html(payload_site, name: str) -> str:
    return (payload_site[0] / "site" / "payloads" / name / "index.html").read_text(encoding="utf-8")


# ---------------------------------------------------------------- built pages


@pytest.mark.parametrize("name", PAYLOADS)
def test_payload_page_has_no_handler_script_url_base_or_theme_id(payload_site, name):
    page = page_html(payload_site, name)
    article = page.split("<article", 1)[1].split("</article>", 1)[0]
    found = tags(page)
    assert [(t, a) for t, a in found if any(k.startswith("on") for k in a)] == []
    assert [(t, a) for t, a in found for k in ("href", "src", "action") if scheme(a.get(k, "")) in
            ("javascript", "vbscript", "data")] == []
    assert [t for t, _ in found if t == "base"] == []
    assert [t for t, _ in tags(article) if t in ("svg", "style", "form", "meta", "iframe")] == []
    assert sum(a.get("id") == "__config" for _, a in found) == 1  # the theme's own <script id="__config">
    assert "__pwned" not in article


def test_payload_pages_fetch_nothing_from_another_host(payload_site):
    assert remote_resources(payload_site[0] / "site") == []


def test_strict_build_names_every_payload_page(tmp_path):
    root = tmp_path
    shutil.copytree(FIXTURE / "wiki", root / "wiki")
    with pytest.raises(SiteError, match="unsafe constructs") as err:
        build_site(root, root / "site")
    named = {p.split(":")[0] for p in err.value.problems}
    assert named == {f"wiki/payloads/{n}.md" for n in PAYLOADS} | {"wiki/payloads/active.html",
                                                                     "wiki/payloads/diagram.svg"}
    assert "wiki/payloads/img-onerror.md: <img onerror=\"window.__pwned = 'img-onerror'\">: " \
           "event handler 'onerror' removed" in err.value.problems


def test_non_strict_build_warns_with_the_page(payload_site):
    warnings = payload_site[1].warnings
    assert any(w.startswith("wiki/payloads/base-href.md:") and "<base> removed" in w for w in warnings)
    assert any(w.startswith("wiki/payloads/attr-list.md:") and "'onmouseover'" in w for w in warnings)


def test_files_a_browser_would_run_are_not_published(payload_site):
    site = payload_site[0] / "site"
    assert not (site / "payloads" / "active.html").exists()
    assert not (site / "payloads" / "diagram.svg").exists()
    assert (site / "assets" / "kwiki" / "kwiki.css").is_file()  # kwiki's own files stay


def test_attribute_list_keeps_class_and_id(payload_site):
    home = (payload_site[0] / "site" / "index.html").read_text(encoding="utf-8")
    assert '<h2 class="note" id="stays">What stays</h2>' in home


def test_a_page_that_slips_past_the_content_sanitiser_is_withheld(tmp_path, monkeypatch):
    """The second line: the finished page is audited, so a bypass of `clean` still runs nothing."""
    shutil.copytree(FIXTURE / "wiki", tmp_path / "wiki")
    monkeypatch.setattr(sanitize, "clean", lambda text, own=None: (text, []))
    report = build_site(tmp_path, tmp_path / "site", strict=False)
    assert any(w.startswith("wiki/payloads/img-onerror.md: ") and "event handler 'onerror'" in w
               and "withheld" in w for w in report.warnings)
    page = (tmp_path / "site" / "payloads" / "img-onerror" / "index.html").read_text()
    assert 'onerror="' not in page and "is withheld" in page


# ---------------------------------------------------------------- clean


def test_clean_keeps_what_kwiki_and_markdown_write():
    generated = (
        '<div class="kw-header">\n<p><span class="kw-badge kw-ev kw-ev-verified">verified</span> '
        '<a class="kw-arch" href="../../indexes/architectures/#sm-90a">sm_90a</a></p>\n</div>\n'
        '<h2 id="ladder">Ladder<a class="headerlink" href="#ladder" title="Permanent link">¶</a></h2>\n'
        '<table>\n<thead>\n<tr>\n<th style="text-align: right;">time</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n'
        '<td style="text-align: right;">1.0<br><small><code>c</code></small></td>\n</tr>\n</tbody>\n</table>\n'
        '<p><img alt="chart" class="kw-chart" src="../../assets/kwiki/charts/x/history.svg"></p>\n'
        '<details class="tip" open=""><summary>copy.cu</summary><div class="highlight"><pre><span></span>'
        '<code><span class="n">x</span></code></pre></div></details>\n'
        '<div class="admonition note"><p class="admonition-title">Note</p></div>\n'
        '<p><a href="https://docs.nvidia.com/cuda/">CUDA</a> <a href="mailto:a@example.com">mail</a></p>'
    )
    cleaned, problems = clean(generated)
    assert problems == []
    assert cleaned == generated.replace(' style="text-align: right;"', ' style="text-align:right"')


@pytest.mark.parametrize("payload, removed", [
    ('<img src="x" onerror="alert(1)">', "onerror"),
    ('<svg onload="alert(1)"></svg>', "<svg"),
    ('<details open ontoggle="alert(1)"><summary>s</summary></details>', "ontoggle"),
    ('<p onmouseover="alert(1)">x</p>', "onmouseover"),
    ('<a href="javascript:alert(1)">x</a>', "javascript"),
    ('<a href="jav&#x09;ascript:alert(1)">x</a>', "ascript"),
    ('<a href="data:text/html,<script>alert(1)</script>">x</a>', "data:"),
    ('<a href="vbscript:msgbox(1)">x</a>', "vbscript"),
    ('<base href="https://evil.example/">', "<base"),
    ('<img src="https:/\\evil.example/x.png">', "evil.example"),
    ('<img src="//evil.example/x.png">', "evil.example"),
    ('<div id="__config">{}</div>', "__config"),
    ('<iframe src="https://evil.example"></iframe>', "iframe"),
    ('<form action="https://evil.example/"><button>go</button></form>', "action"),
    ('<meta http-equiv="refresh" content="0;url=https://evil.example/">', "refresh"),
    ('<p style="background:url(//evil.example/x)">x</p>', "evil.example"),
    ('<style>@import "//evil.example/x.css";</style>', "evil.example"),
    ('<math><mi xlink:href="javascript:alert(1)">x</mi></math>', "javascript"),
    ('<input type="image" src="//evil.example/x">', "evil.example"),
])
def test_clean_removes_and_names_each_payload(payload, removed):
    cleaned, problems = clean(payload)
    assert removed.lower() not in cleaned.lower()
    assert problems, "a removal is named, so a strict build can fail on it"


# ---------------------------------------------------------------- URLs as a browser reads them


@pytest.mark.parametrize("url, host", [
    ("https:/\\evil.example/x", "evil.example"),
    ("https:\\\\evil.example/x", "evil.example"),
    ("//evil.example/x", "evil.example"),
    ("/\\evil.example/x", "evil.example"),
    ("\\\\evil.example/x", "evil.example"),
    ("\\/evil.example", "evil.example"),
    ("///evil.example/x", "evil.example"),
    ("HTTPS://Evil.Example/", "evil.example"),
    (" \x00\x1fhttps://evil.example/", "evil.example"),
    ("ht\ttp\ns://evil.example/", "evil.example"),
    ("/\t/evil.example/x", "evil.example"),
    ("https:evil.example/x", "evil.example"),
    ("https:///evil.example", "evil.example"),
    ("https://user:pw@evil.example:8443/x", "evil.example"),
    ("img/chart.svg", None),
    ("../techniques/x/", None),
    ("/assets/x.css", None),
    ("#section", None),
    ("?q=//evil.example", None),
    ("a\\b.png", None),
    ("x.png?next=\\\\evil.example", None),
    ("mailto:someone@example.com", None),
    ("javascript://evil.example/%0aalert(1)", None),
])
def test_parse_url_finds_the_host_a_browser_would_contact(url, host):
    assert parse_url(url).host == host


@pytest.mark.parametrize("url, scheme, safe", [
    ("javascript:alert(1)", "javascript", False),
    ("JaVaScRiPt:alert(1)", "javascript", False),
    ("jav\tascript:alert(1)", "javascript", False),
    ("java\nscript:alert(1)", "javascript", False),
    ("\x01 javascript:alert(1)", "javascript", False),
    ("data:text/html,x", "data", False),
    ("vbscript:x", "vbscript", False),
    ("https://example.com/", "https", True),
    ("mailto:a@b", "mailto", True),
    ("page.md#x", None, True),
    ("./javascript:alert(1)", None, True),
])
def test_parse_url_reads_the_scheme_as_a_browser_does(url, scheme, safe):
    parsed = parse_url(url)
    assert (parsed.scheme, parsed.safe) == (scheme, safe)


# ---------------------------------------------------------------- the no-remote-resources check


def test_remote_check_reads_urls_as_a_browser_does(tmp_path):
    (tmp_path / "a.html").write_text(
        '<img src="https:/\\evil.example/1.png"><base href="https://evil.example/">'
        '<link rel="stylesheet" href="\\\\evil.example/2.css"><img srcset="ok.png 1x, //evil.example/3.png 2x">'
        '<div style="background:url( &quot;//evil.example/4.png&quot; )"></div>'
        '<style>@import "https:/\\\\evil.example/5.css";</style>'  # CSS reads a doubled backslash as one
        '<meta http-equiv="refresh" content="0; url=//evil.example/6">'
        '<svg><image href="//evil.example/7.png"/><use xlink:href="https://evil.example/8.svg#x"/></svg>'
        '<a href="https:/\\fine.example/">a link is followed, not fetched</a>'
        '<link rel="canonical" href="https://fine.example/"><img src="data:image/png;base64,AAAA">')
    (tmp_path / "b.css").write_text(".x { background: \\75rl(//evil.example/9.png) } "
                                    ".y { background: image-set('https:/\\\\evil.example/10.png' 1x) }")
    assert remote_resources(tmp_path) == [
        "a.html: https:/\\evil.example/1.png", 'a.html: <base href="https://evil.example/">',
        "a.html: \\\\evil.example/2.css", "a.html: //evil.example/3.png", "a.html: //evil.example/4.png",
        "a.html: https:/\\evil.example/5.css", "a.html: //evil.example/6", "a.html: //evil.example/7.png",
        "a.html: https://evil.example/8.svg#x",
        "b.css: //evil.example/9.png", "b.css: https:/\\evil.example/10.png",
    ]


def test_remote_check_passes_material_data_urls():
    css = ".md-icon{mask-image:url(\"data:image/svg+xml;charset=utf-8,<svg xmlns='http://www.w3.org/2000/svg'/>\")}"
    assert remote_in_css(css) == []
    assert remote_in_html('<a href="https://example.com/">x</a><img src="img.png">') == []


def test_active_markup_finds_handlers_script_urls_and_base():
    found = active_markup('<p onclick="x()">a</p><a href=" jav&#x09;ascript:x()">b</a><base href="/">'
                          '<span class="on">fine</span><a href="../x/">fine</a>')
    assert [f.split(": ", 1)[1] for f in found] == [
        "event handler 'onclick'", "href with scheme 'javascript:'",
        "<base> re-points every relative link and script"]


def test_each_message_is_one_printable_line():
    _, problems = clean('<img src="x" onerror="a\nwiki/x.md:1: forged\x1b[2J">')
    assert problems == ['<img onerror="a wiki/x.md:1: forged?[2J">: event handler \'onerror\' removed']
