"""The finished site's scripts: only the theme's own, and none that fetches from another host at run time.

Page content is sanitised (kwiki.site.sanitize), so a script can reach the site only through the theme:
its templates, its JavaScript, or a config that switches on one of its integrations (analytics, a
repository's facts fetched from its host). kwiki refuses those settings (kwiki.wiki.siteconfig); this audit
checks the result, so a refused setting that found another way in still fails the strict build:
- an inline `<script>` is Material's `__config` (JSON, whose URLs stay on the site) or text that appears
  in Material's installed templates (their `{{ values }}` filled in);
- no inline script names a URL on another host (what a script would fetch when the page runs);
- every `.js` file of the site is byte-identical to one Material ships (its bundle as
  kwiki.site.searchindex.defer_index patches it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

from kwiki.site.sanitize import parse_url
from kwiki.site.searchindex import deferred

_SCRIPT = re.compile(r"(?is)<script\b([^>]*)>(.*?)</script\s*>")
_SRC = re.compile(r"(?i)\bsrc\s*=")
_JSON_CONFIG = re.compile(r"""(?i)\bid\s*=\s*["']?__config\b""")
_URL_LITERAL = re.compile(r"""["'`]((?:[a-zA-Z][a-zA-Z0-9+.\-]*:)?//[^"'`\s]+)""")


@functools.lru_cache(maxsize=1)
def _theme() -> tuple[list[re.Pattern[str]], frozenset[str]]:
    """The inline scripts of Material's templates (as patterns) and the SHA-256 of every JavaScript file it
    ships."""
    import material  # type: ignore[import-untyped]

    base = Path(material.__file__).parent / "templates"
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(base.rglob("*.html")))
    bodies = [m.group(2).strip() for m in _SCRIPT.finditer(text) if not _SRC.search(m.group(1))]
    scripts = set()
    for path in base.rglob("*.js"):
        data = path.read_bytes()
        scripts.add(hashlib.sha256(data).hexdigest())
        patched, why = deferred(data.decode("utf-8", errors="surrogateescape"))
        if why is None:  # the bundle as kwiki.site.searchindex.defer_index leaves it
            scripts.add(hashlib.sha256(patched.encode("utf-8", errors="surrogateescape")).hexdigest())
    # a script that is a template value alone (`{{ ... }}`) has no text of Material's to match: not allowed
    return [re.compile(_template_pattern(b), re.DOTALL) for b in bodies
            if re.sub(r"\{\{.*?\}\}|\{%.*?%\}", "", b, flags=re.DOTALL).strip()], \
        frozenset(scripts)


def _template_pattern(body: str) -> str:
    """A template's inline script as a pattern: its text literal, each `{{ value }}` a value without quotes or
    markup, each `{% statement %}` anything (what Material's own template logic writes)."""
    out = []
    for part in re.split(r"(\{\{.*?\}\}|\{%.*?%\})", body, flags=re.DOTALL):
        if part.startswith("{{"):
            out.append(r"[^\"'<>\n]*")
        elif part.startswith("{%"):
            out.append(r".*?")
        else:
            out.append(re.escape(part))
    return "".join(out)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def script_problems(html: str) -> list[str]:
    """The inline scripts of one finished page that are not the theme's, or that fetch from another host."""
    templates, _ = _theme()
    out = []
    for m in _SCRIPT.finditer(html):
        attrs, body = m.group(1), m.group(2).strip()
        if _SRC.search(attrs) or not body:
            continue  # an external script: remote_resources checks its host, script_files its bytes
        if _JSON_CONFIG.search(attrs):
            try:
                urls = [s for s in _strings(json.loads(body)) if parse_url(s).remote]
            except (ValueError, RecursionError):
                urls = ["(not JSON)"]
            out += [f"the theme's config names {u} (fetched when the page runs)" for u in urls]
            continue
        remote = [u for u in _URL_LITERAL.findall(body) if parse_url(u).remote]
        if remote:
            out.append(f"an inline script fetches from another host at run time ({remote[0]})")
        elif not any(t.fullmatch(body) for t in templates):
            snippet = " ".join(body.split())[:60]
            out.append(f"an inline script that is not the theme's ({snippet!r})")
    return out


def script_files(site_dir: Path) -> list[str]:
    """'file: ...' for each JavaScript file of the site that Material does not ship byte for byte."""
    _, shipped = _theme()
    out = []
    for path in sorted(site_dir.rglob("*.js")):
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() not in shipped:
            out.append(f"{path.relative_to(site_dir).as_posix()}: a script the theme does not ship")
    return out


def audit_scripts(site_dir: Path) -> list[str]:
    """Every script problem of the finished site (`script_problems` per page, `script_files`), located."""
    out = []
    for path in sorted(site_dir.rglob("*.html")):
        if path.is_file():
            rel = path.relative_to(site_dir).as_posix()
            out += [f"{rel}: {p}" for p in dict.fromkeys(script_problems(path.read_text("utf-8", "replace")))]
    return out + script_files(site_dir)
