"""MkDocs and Material for the staged site: the configuration kwiki adds to the repository's mkdocs.yml, the
theme templates it amends, the build (in-process, with the sanitiser as a plugin object), and the check
for resources a built page would fetch from another host.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kwiki.core.writefile import write_atomic
from kwiki.site.errors import SiteError
from kwiki.site.listings import ARCHITECTURES_DIR, EVIDENCE_DIR, TAGS_DIR, SitePage, nav
from kwiki.site.pages import ASSETS, CSS, LADDERS_DIR, SOURCES_DIR
from kwiki.site.sanitize import Sanitizer, remote_in_css, remote_in_html
from kwiki.wiki.catalog import WIKI_DIR
from kwiki.wiki.siteconfig import BASE_CONFIG, ConfigProblems, read_config

DESCRIPTION = "GPU kernel techniques whose numbers are re-measured by a machine"
EXTENSIONS = ["admonition", "attr_list", "md_in_html", "tables", "toc", "pymdownx.details",
              "pymdownx.superfences", "pymdownx.highlight"]
VALIDATION = {"links": {"not_found": "warn", "absolute_links": "warn", "unrecognized_links": "warn", "anchors": "warn"},
              "nav": {"omitted_files": "warn", "not_found": "warn", "absolute_links": "warn"}}
# Material's light and dark schemes, following the reader's system setting until they toggle
# navigation.prune: a page carries the navigation of its own section only (the other sections collapsed to
# one link each), so its HTML does not grow with the wiki; the full tree would be every page's title on
# every page (59.7 KB of the GEMM page's HTML at 12 pages, 175 KB at 300)
FEATURES = ("navigation.prune",)
PAGED_DIRS = (EVIDENCE_DIR, ARCHITECTURES_DIR, TAGS_DIR)  # the listings' further pages: out of the navigation
PALETTE = [
    {"media": "(prefers-color-scheme: light)", "scheme": "default", "primary": "indigo", "accent": "indigo",
     "toggle": {"icon": "material/brightness-4", "name": "Switch to dark mode"}},
    {"media": "(prefers-color-scheme: dark)", "scheme": "slate", "primary": "indigo", "accent": "indigo",
     "toggle": {"icon": "material/brightness-7", "name": "Switch to light mode"}},
]


def _names(items: list[Any]) -> list[str]:
    return [next(iter(i)) if isinstance(i, dict) else str(i) for i in items]


def base_config(root: Path) -> dict[str, Any]:
    """The fields kwiki's site takes from the repository's mkdocs.yml, read as plain data (kwiki.wiki.siteconfig);
    SiteError with located problems when it asks for anything else."""
    try:
        return read_config(root)
    except ConfigProblems as exc:
        raise SiteError(f"{BASE_CONFIG}: {len(exc.problems)} settings kwiki's site does not allow (see the README's "
                        "'Security and trust')", [p.format() for p in exc.problems]) from None


def write_theme_overrides(directory: Path) -> Path | None:
    """Material's templates that kwiki amends, written under `directory` (None when none applies): the search
    dialog gets the accessible name Material leaves out (axe: aria-dialog-name)."""
    import material  # type: ignore[import-untyped]

    template = Path(material.__file__).parent / "templates" / "partials" / "search.html"
    try:
        text = template.read_text(encoding="utf-8")
    except OSError:
        return None
    dialog = 'data-md-component="search" role="dialog">'
    if dialog not in text:
        return None
    target = directory / "partials" / "search.html"
    data = text.replace(dialog, dialog[:-1] + ' aria-label="Search">', 1).encode()
    if not target.is_file() or target.read_bytes() != data:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, data)
    return directory


def config_overrides(base: dict[str, Any], docs_dir: Path, site_dir: Path, pages: list[SitePage],
                     strict: bool, overrides: Path | None = None) -> dict[str, Any]:
    """The repository's mkdocs.yml, with what the generated site needs added."""
    theme = base.get("theme") or {}
    theme = {"name": theme} if isinstance(theme, str) else dict(theme)
    theme.update({"name": "material", "font": False})
    features = [str(f) for f in theme.get("features") or []]
    theme["features"] = features + [f for f in FEATURES if f not in features]
    theme.setdefault("palette", PALETTE)
    if overrides is not None:
        theme.setdefault("custom_dir", str(overrides))
    plugins = list(base.get("plugins") or [])
    plugins += [p for p in ("search", "tags") if p not in _names(plugins)]
    extensions = list(base.get("markdown_extensions") or [])
    extensions += [e for e in EXTENSIONS if e not in _names(extensions)]
    validation = {k: dict(v) for k, v in (base.get("validation") or {}).items()}
    for group, options in VALIDATION.items():
        validation.setdefault(group, {}).update(options)
    return {
        "site_name": str(base.get("site_name") or "KernelWiki"),
        "site_description": base.get("site_description") or DESCRIPTION,
        "use_directory_urls": bool(base.get("use_directory_urls", True)),
        "docs_dir": str(docs_dir), "site_dir": str(site_dir), "strict": strict,
        "theme": theme, "plugins": plugins, "markdown_extensions": extensions, "validation": validation,
        "extra_css": [CSS], "nav": nav(pages),
        "not_in_nav": "\n".join([*([str(base["not_in_nav"])] if base.get("not_in_nav") else []),
                                  f"/{SOURCES_DIR}/", f"/{LADDERS_DIR}/", *(f"/{d}/" for d in PAGED_DIRS)]),
    }


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.levelname}: {record.getMessage()}")


def run_mkdocs(overrides: dict[str, Any], config_file: Path, own: str | None = None,
               published: Callable[[], None] | None = None) -> list[str]:
    """Build with MkDocs in this process; the warnings it logged (raises SiteError in strict mode).
    `own` is the key that marked kwiki's own markup when the pages were staged (`ensure_site_key`);
    `published()` is called when that key reached a finished page (the caller retires it)."""
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # Material's banner about MkDocs 2; pinned below it
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    data = yaml.safe_dump({"site_name": str(overrides.get("site_name") or "KernelWiki")}).encode()
    if not config_file.is_file() or config_file.read_bytes() != data:  # kwiki's own: never the repository's file
        config_file.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(config_file, data)
    collect = _Collect()
    logger = logging.getLogger("mkdocs")
    logger.addHandler(collect)
    sanitizer = Sanitizer(WIKI_DIR, exempt=ASSETS + "/", own=own)
    try:
        config = load_config(config_file=str(config_file), **overrides)
        # an object, not an entry point (only kwiki's builds); MkDocs registers its on_* methods, though
        # its types want a BasePlugin
        config.plugins["kwiki/sanitize"] = sanitizer  # type: ignore[assignment]
        build(config)
    except MkDocsException as exc:
        raise SiteError(f"mkdocs: {exc}", collect.messages + sanitizer.problems) from None
    finally:
        logger.removeHandler(collect)
        if sanitizer.key_published and published is not None:
            published()
    if sanitizer.problems and overrides.get("strict"):
        raise SiteError(f"{len(sanitizer.problems)} unsafe constructs in pages (removed from the site; the site "
                        "runs no page's script and fetches nothing from another host)", sanitizer.problems)
    return collect.messages + sanitizer.problems


def remote_resources(site_dir: Path) -> list[str]:
    """'file: url' for every resource a page would fetch from another host (scripts, styles, images, ...),
    and 'file: <base ...>' for a <base> element, which re-points every relative link and script of the page."""
    out = []
    for path in sorted(site_dir.rglob("*")):
        if path.suffix not in (".html", ".css", ".svg") or not path.is_file():  # SVG: the charts kwiki draws
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(site_dir).as_posix()
        found = remote_in_css(text) if path.suffix == ".css" else remote_in_html(text)
        out += [f"{rel}: {url}" for url in found]
    return out

