"""What a page may put on the site: an allow-list for its HTML, and URLs read the way a browser reads them.

A page body is Markdown with raw HTML and attribute lists (`{: ... }`), so it can write any tag
or attribute; the site must still run no page's script and fetch nothing from another host.
Three pieces, one policy:

- `parse_url`: the scheme and host a browser would see in an attribute value (WHATWG-style:
  control characters stripped, tabs and newlines dropped, `\\` read as `/`, `https:/\\host`,
  `//host`); `remote_in_html` and `remote_in_css` use it for the site's no-remote-resources
  check, which also flags `<base>`.
- `clean`: the HTML MkDocs rendered for a page's content (author text and what kwiki generates
  alike) through `nh3` with an allow-list of tags and attributes; it also says what it removed,
  so a strict build can name the page.
- `mark_own` and the `own` key of `clean`: the `kw-*` classes (kwiki's badges, header, claims table,
  ...) belong to kwiki. `kwiki build` marks each element it generates with one more class,
  `kw-own-<key>`, the key a random secret of the checkout (`.kwiki/site/key`, never committed nor
  published); `clean` keeps `kw-*` classes only on elements that carry the mark, removes the mark,
  and strips them from everything else, so a page's own HTML or attribute lists cannot draw
  kwiki's green "verified" badge.
- `Sanitizer`: a MkDocs plugin object that `kwiki build` registers in-process (no entry point):
  it cleans every page's content before the search index and the theme see it, keeps files a
  browser would run (`.html`, `.svg`, `.js`, ...) out of the site, and audits each finished page
  for event handlers, script URLs and `<base>` that reached it another way (title, TOC, theme).

`nh3` is imported inside the functions that need it, out of the CLI start-up path.
"""

from __future__ import annotations

import os
import posixpath
import re
from html import escape, unescape
from typing import Any, NamedTuple
from urllib.parse import urlsplit

SAFE_SCHEMES = frozenset({"http", "https", "mailto"})  # and relative URLs
SPECIAL_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp", "file"})  # WHATWG: '\' is '/' in these
TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del", "details",
    "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
    "input", "ins", "kbd", "label", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong",
    "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr", "u", "ul", "var", "wbr",
})
CLEAN_CONTENT = frozenset({"script", "style", "template", "svg", "math", "iframe", "object", "embed", "noscript",
                           "noembed", "noframes", "textarea", "title", "xmp", "select"})  # removed with their content
ATTRIBUTES: dict[str, frozenset[str]] = {
    "*": frozenset({"class", "id", "title", "lang", "dir"}),
    "a": frozenset({"href"}),
    "img": frozenset({"src", "alt", "width", "height", "loading"}),
    "td": frozenset({"align", "colspan", "rowspan", "style"}),
    "th": frozenset({"align", "colspan", "rowspan", "scope", "style"}),
    "col": frozenset({"span"}), "colgroup": frozenset({"span"}),
    "ol": frozenset({"start", "reversed"}),
    "details": frozenset({"open"}),
    "time": frozenset({"datetime"}),
    "input": frozenset({"checked", "disabled", "name"}),  # Markdown task lists and tabs; `type` below
    "label": frozenset({"for"}),
    # a scroll region a keyboard can reach (tabindex, role, aria-label), a block kept out of the search index
    "div": frozenset({"tabindex", "role", "aria-label", "data-search-exclude"}),
    "table": frozenset({"aria-label"}),
}
INPUT_TYPES = frozenset({"checkbox", "radio"})
STYLE_PROPERTIES = frozenset({"text-align"})  # what Markdown tables write on td/th
URL_ATTRIBUTES = frozenset({"href", "src"})
LINK_ATTRIBUTES = frozenset({"href", "src", "action", "formaction", "xlink:href", "data", "poster", "background"})
REPORTED_SCHEMES = SAFE_SCHEMES | {"javascript", "vbscript", "data", "file", "blob", "filesystem", "ftp", "ws", "wss",
                                   "about", "view-source", "intent", "tel", "sms"}  # named when removed
RESOURCE_ATTRIBUTES = frozenset({"src"})  # of the allowed ones, fetched when the page is shown
# ids the theme looks up (Material reads its settings from the first `#__config` in the document)
_THEME_ID = re.compile(r"__(config|analytics|consent|drawer|search|settings|toc|palette_\d+|nav_[\d_]+)\Z")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
_C0_SPACE = "".join(chr(c) for c in range(0x21))
_EVENT = re.compile(r"on[a-z]")
# a start tag and its attributes, quotes respected (over output that nh3, MkDocs or the theme serialised)
_START_TAG = re.compile(r"""<([a-zA-Z][^\t\n\f\r />]*)((?:[^>"']|"[^"]*"|'[^']*')*+)>""")  # *+: no backtracking
_ATTRIBUTE = re.compile(r"""([^\t\n\f\r />"'=][^\t\n\f\r />"'=]*)"""
                        r"""(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\t\n\f\r >]*)))?""")
_ACTIVE_HINT = re.compile(r"(?i)\bon[a-z]|href|src|action|data|poster|background|style|manifest|codebase|archive"
                          r"|refresh")  # a tag without any of these needs no closer look
_STYLE = re.compile(r"(?is)<style\b[^>]*>(.*?)</style")
_TEXT_ALIGN = re.compile(r"(?i)\s*text-align\s*:\s*(left|right|center|justify|start|end)\s*\Z")
# files a browser runs as a document or script when they are opened from the site
ACTIVE_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".xht", ".shtml", ".xml", ".xsl", ".xslt", ".svg",
                             ".svgz", ".js", ".mjs", ".wasm", ".swf"})
SNIPPET = 80
OWN_PREFIX = "kw-"  # kwiki's class namespace: its stylesheet's and generated markup's classes
THEME_PREFIX = "md-"  # Material's class namespace: its dialogs, banners, header, navigation, buttons
OWN_MARK = "kw-own-"  # + the build's key: the class that marks an element as generated by kwiki
# a code span of generated Markdown (left alone: what it shows is text), a class attribute, an attribute list
_OWN = re.compile(
    r"(?P<code>(?<!`)(?P<tick>`+)[^`](?:.*?[^`])?(?P=tick)(?!`))"
    + r'|(?<![\w-])class="(?P<cls>kw-[^"<>`]*)"'
    + r"|(?<!\\)\{ (?P<attrs>\.kw-[\w-]+(?: \.[\w-]+)*)(?P<rest>(?: [a-z]+=[\w-]+)*) \}")
WITHHELD = ("<!doctype html>\n<meta charset=\"utf-8\">\n<title>Page withheld</title>\n"
            "<p>{where} is withheld: its HTML would run script or load from another host "
            "(see the build's warnings).</p>\n")


class Url(NamedTuple):
    """What a browser reads in a URL attribute: its scheme (lower case; None for a relative URL) and host."""

    scheme: str | None
    host: str | None  # lower case; None when the URL names no host (a path, mailto:, javascript:)

    @property
    def safe(self) -> bool:
        """A link a reader may follow: relative, http(s) or mailto."""
        return self.scheme is None or self.scheme in SAFE_SCHEMES

    @property
    def remote(self) -> bool:
        """Fetching it sends a request to a host named in the URL (not the site's own)."""
        return bool(self.host)


def parse_url(value: str) -> Url:
    """The scheme and host of `value` as a browser parses it (WHATWG URL, against an http(s) page).

    Leading and trailing C0 controls and spaces are stripped and tabs and newlines removed
    anywhere (`jav\\tascript:` is `javascript:`); the scheme is case-insensitive; in special
    schemes and relative URLs `\\` is `/`, so `https:/\\evil`, `/\\evil` and `\\\\evil` name the
    host `evil`, as do `https:evil` and `https:///evil` (a browser skips the slashes after a
    special scheme unless the page has the same scheme; assuming it does not is the safe side).
    """
    text = _TAB_NEWLINE.sub("", value.strip(_C0_SPACE))
    m = _SCHEME.match(text)
    scheme = m.group(0)[:-1].lower() if m else None
    if scheme is not None and scheme not in SPECIAL_SCHEMES:
        return Url(scheme, None)  # mailto:, javascript:, data:, ...: no host a resource is fetched from
    rest = text[m.end():] if m else text
    end = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    head = rest[:end].replace("\\", "/")
    if scheme is None and not head.startswith("//"):
        return Url(None, None)  # a path on the site's own host
    authority = head.lstrip("/").split("/", 1)[0]
    try:
        host = urlsplit("//" + authority).hostname
    except ValueError:  # a malformed IPv6 literal: the browser refuses it; naming it is the safe side
        host = authority.lower()
    return Url(scheme, host or None)


def _snippet(text: str) -> str:
    """Markup as one printable line for a message (no newline can start a forged `path:line:` line)."""
    text = "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))
    return text if len(text) <= SNIPPET else text[: SNIPPET - 3] + "..."


def _allowed(tag: str, name: str) -> bool:
    return name in ATTRIBUTES["*"] or name in ATTRIBUTES.get(tag, ()) or (tag == "input" and name == "type")


def attribute_problem(tag: str, name: str, value: str | None) -> str | None:
    """Why the sanitiser removes attribute `name` of `<tag>` (None: it keeps it)."""
    if _EVENT.match(name):
        return f"event handler '{name}' removed"
    if not _allowed(tag, name):
        return f"attribute '{name}' removed (not allowed)"
    value = value or ""
    if name in URL_ATTRIBUTES:
        url = parse_url(value)
        if not url.safe:
            return f"{name} removed: scheme '{url.scheme}:' is not http, https or mailto"
        if name in RESOURCE_ATTRIBUTES and url.remote:
            return f"{name} removed: it would be fetched from another host ({url.host})"
    if name == "style" and not all(_TEXT_ALIGN.match(d) for d in value.split(";") if d.strip()):
        return f"style '{value}' removed (only text-align)"
    if name == "id" and _THEME_ID.match(value):
        return f"id '{value}' removed (the theme's own)"
    if tag == "input" and name == "type" and value.lower() not in INPUT_TYPES:
        return f"input type '{value}' removed (only checkbox and radio)"
    return None


def _tag_problems(html: str) -> list[str]:
    """The elements `clean` removes, once per element name, in document order (for messages)."""
    out: dict[str, str] = {}
    skip_to = 0
    lower = html.lower()
    for m in _START_TAG.finditer(html):
        tag = m.group(1).lower()
        if m.start() < skip_to or tag in TAGS or tag in out:
            continue
        out[tag] = f"{_snippet(m.group(0))}: <{tag}> removed"
        if tag in CLEAN_CONTENT:  # what it holds goes with it: not named again
            out[tag] += " with its content"
            end = lower.find(f"</{tag}", m.end())
            skip_to = len(html) if end < 0 else end
    return list(out.values())


def clean(html: str, own: str | None = None) -> tuple[str, list[str]]:
    """`html` with every tag, attribute and URL outside the allow-list removed, and what was removed.

    nh3 parses as a browser does (html5ever) and keeps only the allowed elements; every attribute
    of those goes through `attribute_problem`, the one attribute policy (nh3's own URL-scheme check
    lets the schemes in REPORTED_SCHEMES through to it, so that they are named, and drops the rest).
    With `own` (the build's key, see `mark_own`), a `kw-*` class survives only on an element kwiki
    marked as its own; without it, classes are not looked at (HTML kwiki generated, cleaned alone).
    """
    import nh3

    problems = _tag_problems(html)

    def keep(tag: str, name: str, value: str) -> str | None:
        if name == "class" and own is not None and tag in TAGS:
            given = value
            kept, forged = own_classes(given, own)
            if forged:
                problems.append(f"{_snippet(_tag_text(tag, name, given))}: {forged}")
            if kept is None:
                return None
            value = kept
        why = attribute_problem(tag, name, value)
        if why is None:
            return value
        if tag in TAGS:  # attributes of removed elements go with them
            problems.append(f"{_snippet(_tag_text(tag, name, value))}: {why}")
        return None

    cleaned = nh3.clean(html, tags=set(TAGS), clean_content_tags=set(CLEAN_CONTENT), attributes={},
                        generic_attribute_prefixes={""}, attribute_filter=keep, link_rel=None,
                        url_schemes=set(REPORTED_SCHEMES), filter_style_properties=set(STYLE_PROPERTIES),
                        strip_comments=True)
    return cleaned, list(dict.fromkeys(problems))


def mark_own(markdown: str, key: str) -> str:
    """Markdown that kwiki generated, each `class="kw-..."` and `{ .kw-... }` outside code spans given the
    class `kw-own-<key>` (which `clean` requires of a `kw-*` class). Only for kwiki's own fragments, whose
    author text is escaped (`render.md_text`): never for a page's body or a source file's text."""
    mark = OWN_MARK + key

    def one(m: re.Match[str]) -> str:
        if m.group("cls") is not None:
            return f'class="{m.group("cls")} {mark}"'
        if m.group("attrs") is not None:
            return f"{{ {m.group('attrs')} .{mark}{m.group('rest')} }}"
        whole: str = m.group(0)
        return whole

    return _OWN.sub(one, markdown)


def own_classes(value: str, key: str | None) -> tuple[str | None, str | None]:
    """A class attribute's value with kwiki's `kw-*` classes kept only if `key` marks the element as
    kwiki's (the mark itself removed), and why classes were removed (None: none were, or only the mark)."""
    tokens = value.split()
    mine = key is not None and OWN_MARK + key in tokens
    theme = [t for t in tokens if t.startswith(THEME_PREFIX)]  # never a page's: the theme's dialogs, banners, ...
    kept = [t for t in tokens if not t.startswith(THEME_PREFIX)
            and (not t.startswith(OWN_PREFIX) or (mine and not t.startswith(OWN_MARK)))]
    if len(kept) == len(tokens):
        return value, None
    forged = [t for t in tokens if t.startswith(OWN_PREFIX)]
    why = None if mine or not forged else (f"class '{' '.join(forged)}' removed: kwiki's own classes (kw-*) are "
                                           "for what kwiki generates (a page cannot draw its badges)")
    if theme:
        why = (f"class '{' '.join(theme)}' removed: Material's classes (md-*) are the theme's (a page cannot draw "
               "its dialogs or banners)") + (f"; {why}" if why else "")
    return " ".join(kept) or None, why


def _tag_text(tag: str, name: str, value: str) -> str:
    return f'<{tag} {name}="{value}">'


def _attributes(text: str) -> list[tuple[str, str]]:
    return [(m.group(1).lower(), unescape(next((g for g in m.groups()[1:] if g is not None), "")))
            for m in _ATTRIBUTE.finditer(text)]


def active_markup(html: str) -> list[str]:
    """Event handlers, non-http(s) URLs and `<base>` anywhere in a finished page (the theme's part included)."""
    out = []
    for m in _START_TAG.finditer(html):
        tag, rest = m.group(1).lower(), m.group(2)
        if tag == "base":
            out.append(f"{_snippet(m.group(0))}: <base> re-points every relative link and script")
        if not _ACTIVE_HINT.search(rest):
            continue  # the common case (<span class="nb">), decided without parsing attributes
        for name, value in _attributes(rest):
            if _EVENT.match(name):
                out.append(f"{_snippet(m.group(0))}: event handler '{name}'")
            elif name in LINK_ATTRIBUTES and not parse_url(value).safe:
                out.append(f"{_snippet(m.group(0))}: {name} with scheme '{parse_url(value).scheme}:'")
    return out


# ---------------------------------------------------------------- resources fetched from another host

# attributes whose URL the browser fetches while showing the page, on any element
FETCHED = frozenset({"src", "srcset", "imagesrcset", "poster", "data", "background", "lowsrc", "dynsrc", "codebase",
                     "archive", "manifest", "xlink:href"})
FETCHED_HREF = frozenset({"link", "image", "use", "feimage"})  # elements whose href is fetched, not followed
# <link rel=...> values that name a page for search engines and feed readers: the browser fetches nothing
PASSIVE_REL = frozenset({"canonical", "alternate", "author", "license", "help", "next", "prev", "me", "bookmark"})
_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|(.))", re.DOTALL)
_CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)"'\s]*))""", re.IGNORECASE)
_CSS_IMPORT = re.compile(r"""@import\s+(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
_CSS_IMAGE_SET = re.compile(r"image-set\(([^)]*)\)", re.IGNORECASE)
_CSS_STRING = re.compile(r""""([^"]*)"|'([^']*)'""")
_REFRESH_URL = re.compile(r"""url\s*=\s*["']?([^"']*)""", re.IGNORECASE)


def _css_unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(1):
            code = int(m.group(1), 16)
            return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
        escaped: str = m.group(2)
        return escaped

    return _CSS_ESCAPE.sub(one, text)


def remote_in_css(text: str) -> list[str]:
    """URLs that CSS (a file, a `<style>` element or a `style` attribute) fetches from another host."""
    if "\\" in text:
        text = _css_unescape(text)  # `\75rl(` is `url(`
    lower = text.lower()
    if "url(" not in lower and "@import" not in lower and "image-set(" not in lower:  # the common case, fast
        return []
    found = [(m.start(), next(g for g in m.groups() if g is not None)) for m in _CSS_URL.finditer(text)]
    found += [(m.start(), next(g for g in m.groups() if g is not None)) for m in _CSS_IMPORT.finditer(text)]
    for m in _CSS_IMAGE_SET.finditer(text):
        found += [(m.start(), s.group(1) if s.group(1) is not None else s.group(2))
                  for s in _CSS_STRING.finditer(m.group(1))]
    return [url for _, url in sorted(found) if parse_url(url).remote]


def _srcset(value: str) -> list[str]:
    return [c.split()[0] for c in value.split(",") if c.split()]


def remote_in_html(text: str) -> list[str]:
    """What an HTML page fetches from another host while it is shown, and any `<base>` (which re-points the
    page's relative links and scripts), in document order; links a reader follows (`<a href>`) are fine."""
    found: list[tuple[int, str]] = []
    for m in _START_TAG.finditer(text):
        tag, rest = m.group(1).lower(), m.group(2)
        if tag == "base":
            found.append((m.start(), _snippet(m.group(0))))
        if not _ACTIVE_HINT.search(rest):
            continue
        attrs = _attributes(rest)
        rel = set(next((v for n, v in attrs if n == "rel"), "").lower().split())
        passive = tag == "link" and bool(rel) and rel <= PASSIVE_REL
        refresh = tag == "meta" and ("http-equiv", "refresh") in [(n, v.lower()) for n, v in attrs]
        for name, value in attrs:
            if name in ("srcset", "imagesrcset"):
                urls = _srcset(value)
            elif name in FETCHED or (name == "href" and tag in FETCHED_HREF and not passive):
                urls = [value]
            elif name == "style":
                urls = remote_in_css(value)
            elif name == "content" and refresh:
                urls = [u.group(1) for u in _REFRESH_URL.finditer(value)]
            else:
                continue
            found += [(m.start(), url) for url in urls if parse_url(url).remote]
    found += [(m.start(), url) for m in _STYLE.finditer(text) for url in remote_in_css(m.group(1))]
    return [url for _, url in sorted(found, key=lambda f: f[0])]


class Sanitizer:
    """The MkDocs plugin object: page content cleaned, active files kept out, finished pages audited.

    `problems` collects located lines (`wiki/<page>: <snippet>: what was removed`); the caller
    decides whether they fail the build. Pages and files under `exempt` are kwiki's own output.
    """

    def __init__(self, source_dir: str, exempt: str, own: str | None = None) -> None:
        import nh3  # noqa: F401  # a missing 'site' extra is named before MkDocs starts, not in the middle

        self.source_dir = source_dir  # how messages name the staged pages' sources (wiki/)
        self.exempt = exempt
        self.own = own  # the build's key that marks kwiki's own elements (`mark_own`)
        self.problems: list[str] = []
        self.key_published = False  # the key reached a finished page: the build retires it

    def _where(self, src_uri: str) -> str:
        return posixpath.join(self.source_dir, src_uri)

    def on_files(self, files: Any, *, config: Any) -> Any:
        docs = os.path.normpath(config["docs_dir"])
        for file in list(files):
            if (file.is_documentation_page() or file.src_uri.startswith(self.exempt)
                    or file.src_dir is None or os.path.normpath(file.src_dir) != docs):
                continue  # pages, kwiki's assets, the theme's files, files a plugin generates
            suffix = posixpath.splitext(file.src_uri)[1].lower()
            if suffix in ACTIVE_SUFFIXES:
                files.remove(file)
                hint = " (for a picture use PNG; kwiki draws its charts itself)" if suffix in (".svg", ".svgz") else ""
                self.problems.append(f"{self._where(file.src_uri)}: a browser runs '{suffix}' files as a page "
                                     f"or script when they are opened; not published{hint}")
        return files

    def on_page_content(self, html: str, *, page: Any, config: Any, files: Any) -> str:
        cleaned, problems = clean(html, self.own)
        where = self._where(page.file.src_uri)
        self.problems += [f"{where}: {p}" for p in dict.fromkeys(problems)]
        return cleaned

    def on_post_page(self, output: str, *, page: Any, config: Any) -> str:
        found = list(dict.fromkeys(active_markup(output)))
        if self.own and self.own in output:  # the key must never be published: it would let a page
            found.append("kwiki's own-markup key")  # mark its HTML as kwiki's in a later build
            self.key_published = True
        if not found:
            return output
        where = self._where(page.file.src_uri)
        self.problems += [f"{where}: {p} (in the finished page; the page is withheld)" for p in found]
        return WITHHELD.format(where=escape(where))  # fail safe: the theme's HTML cannot be repaired here

    on_page_content.mkdocs_priority = -100  # type: ignore[attr-defined]  # after every other plugin's changes
    on_post_page.mkdocs_priority = -100  # type: ignore[attr-defined]  # (MkDocs reads it off the method)
