"""The static site: stage `wiki/` with what kwiki generates, build it with MkDocs, add the agents' files.

`kwiki build` never touches `wiki/`: it writes a staged copy under `.kwiki/site/docs/` in which
every page gets its header (architectures, evidence, what the last run found), its claims table,
its charts (SVG files drawn by kwiki) and its artifact sources; the indexes (evidence,
architectures, tags) and the home page's state of the wiki are generated pages there too. MkDocs
with Material then builds that directory as plain Markdown, strict, and kwiki adds `llms.txt`,
`index.json` and every page's Markdown source to the result. The staged directory needs no MkDocs
plugin of kwiki's, so it builds with Material's successor later; kwiki's own build adds one plugin
object in-process, the sanitiser (`sanitize.py`): every page's rendered content goes through an
allow-list, so no page's script runs on the site. Finally every HTML and CSS file is checked for
resources fetched from another host and for `<base>`: viewing a page must not send a request off
the machine.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from kwiki.core.errors import KwikiError, ManifestError, UsageError
from kwiki.core.paths import inside, links_out
from kwiki.core.writefile import write_atomic
from kwiki.results.standing import claim_rows_by_page, standing
from kwiki.results.store import ClaimRow, RecordRow, gpu_slug, read_all
from kwiki.results.storelines import RESULTS_DIR
from kwiki.results.trace import Store, trace
from kwiki.site import charts, gpumatrix, searchindex
from kwiki.site.listings import (
    ARCHITECTURES,
    EVIDENCE,
    HOME,
    INDEX_DIR,
    TAGS,
    LastRun,
    SitePage,
    architectures_page,
    evidence_page,
    home_block,
    last_run,
    nav,
    tags_page,
)
from kwiki.site.render import (
    artifact_page,
    artifact_section,
    chart,
    claims_table,
    header,
    html_text,
    md_text,
    problems_note,
    sources_section,
    stylesheet,
)
from kwiki.site.sanitize import Sanitizer, mark_own, remote_in_css, remote_in_html
from kwiki.wiki.catalog import ARTIFACTS_DIR, WIKI_DIR, load_wiki

if TYPE_CHECKING:
    from mkdocs.livereload import LiveReloadServer

    from kwiki.wiki.manifest import Manifest

log = logging.getLogger(__name__)

STAGE_DIR = ".kwiki/site"
SERVE_DIR = ".kwiki/serve"
SITE_MARK = ".kwiki-site"  # in every output directory kwiki built (MkDocs keeps dot-files when it empties one)
# the repository's own folders, present or not: no build may write its site there
OWN_FOLDERS = (WIKI_DIR, ARTIFACTS_DIR, RESULTS_DIR, "schema", "kwiki", "tests", "bench", ".git", ".kwiki")
ASSETS = "assets/kwiki"
SOURCES_DIR = f"{INDEX_DIR}/artifacts"  # one page per artifact: its sources (out of the nav and the search index)
CSS = f"{ASSETS}/kwiki.css"
BASE_CONFIG = "mkdocs.yml"
DESCRIPTION = "GPU kernel techniques whose numbers are re-measured by a machine"
EXTENSIONS = ["admonition", "attr_list", "md_in_html", "tables", "toc", "pymdownx.details",
              "pymdownx.superfences", "pymdownx.highlight"]
VALIDATION = {"links": {"not_found": "warn", "absolute_links": "warn", "unrecognized_links": "warn", "anchors": "warn"},
              "nav": {"omitted_files": "warn", "not_found": "warn", "absolute_links": "warn"}}
# Material's light and dark schemes, following the reader's system setting until they toggle
PALETTE = [
    {"media": "(prefers-color-scheme: light)", "scheme": "default", "primary": "indigo", "accent": "indigo",
     "toggle": {"icon": "material/brightness-4", "name": "Switch to dark mode"}},
    {"media": "(prefers-color-scheme: dark)", "scheme": "slate", "primary": "indigo", "accent": "indigo",
     "toggle": {"icon": "material/brightness-7", "name": "Switch to light mode"}},
]
_H1 = re.compile(r"^#\s+\S")
_SCRIPT = re.compile(r"<(/?)(script|iframe|object|embed)\b", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")


class SiteError(KwikiError):
    """The site could not be built: page errors, MkDocs warnings in strict mode, or remote resources."""

    exit_code = 1

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or []


@dataclass
class SiteReport:
    site_dir: Path
    pages: int
    charts: int
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Context:
    root: Path
    records: dict[str, list[RecordRow]]  # artifact name -> its rows in the results store
    key: str = ""  # marks the markup kwiki generates as its own (`site_key`, sanitize.mark_own)
    manifests: dict[str, tuple[str, list[str], str | None]] = field(default_factory=dict)  # rel -> name, ...
    files: dict[str, bytes] = field(default_factory=dict)  # staged path -> content
    sources: dict[str, str] = field(default_factory=dict)  # artifact rel -> the staged page of its sources
    loaded: dict[str, Manifest | None] = field(default_factory=dict)  # artifact rel -> its manifest


# ---------------------------------------------------------------- staging


def _artifact(ctx: _Context, rel: str) -> tuple[str, list[str], str | None]:
    """The name the results store uses for an artifact, its variants in manifest order, its baseline."""
    from kwiki.wiki.manifest import MANIFEST, load_manifest

    refused = inside(ctx.root, rel, must_exist=False)  # the containment rule: never read what lies outside
    rel = rel.rstrip("/")
    if rel not in ctx.manifests:
        ctx.manifests[rel] = (Path(rel).name, [], None)
        if not refused and (ctx.root / rel / MANIFEST).is_file():
            try:
                m = load_manifest(ctx.root / rel, ctx.root)
                ctx.manifests[rel] = (m.name, [v.name for v in m.variants], m.baseline)
            except ManifestError:
                pass  # the artifact section shows the problem
    return ctx.manifests[rel]


def site_key(root: Path) -> str:
    """The secret that marks kwiki's own markup in the staged pages (sanitize.mark_own), so that the sanitiser
    can tell kwiki's badges from a page's HTML: random, kept in `.kwiki/site/key` (ignored by git, never
    published; a fresh checkout makes a fresh one) so that unchanged staged pages stay byte-identical from
    build to build. A page's author cannot know it, so cannot mark their HTML as kwiki's."""
    import secrets

    path = root / STAGE_DIR / "key"
    try:
        key = path.read_text(encoding="ascii").strip()
        if re.fullmatch(r"[0-9a-f]{32}", key):
            return key
    except (OSError, UnicodeDecodeError):
        pass
    key = secrets.token_hex(16)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, key.encode("ascii"))
    except OSError:
        pass  # .kwiki/ cannot be written: a key for this build alone
    return key


def _own(ctx: _Context, markdown: str) -> str:
    """A fragment kwiki generated, marked as kwiki's (its author text is escaped; see sanitize.mark_own)."""
    return mark_own(markdown, ctx.key) if ctx.key else markdown


def _add_chart(ctx: _Context, sp: SitePage, name: str, spec: dict[str, Any], alt: str) -> str:
    assert sp.meta is not None  # charts are drawn for valid pages only
    path = f"{ASSETS}/charts/{sp.meta.id}/{name}.svg"
    ctx.files[path] = charts.draw(spec)
    return chart(path, sp.rel, alt)


def _manifest(ctx: _Context, rel: str) -> Manifest | None:
    """The artifact's manifest (None: refused by the containment rule, missing or invalid)."""
    from kwiki.wiki.manifest import MANIFEST, load_manifest

    rel = rel.rstrip("/")
    if rel not in ctx.loaded:
        ctx.loaded[rel] = None
        if not inside(ctx.root, rel, must_exist=False) and (ctx.root / rel / MANIFEST).is_file():
            try:
                ctx.loaded[rel] = load_manifest(ctx.root / rel, ctx.root)
            except ManifestError:
                pass  # the artifact section shows the problem
    return ctx.loaded[rel]


def _ladder_tables(ctx: _Context, sp: SitePage) -> str:
    """Each artifact's ladder from its latest run per GPU in the results store: a table per shape group."""
    from kwiki.results.ladders import from_store
    from kwiki.site.ladder import ladders_block

    meta = sp.meta
    assert meta is not None
    found = []
    for rel in sorted({r.rstrip("/") for r in meta.artifacts.values()}):
        m = _manifest(ctx, rel)
        if m is not None:
            found += from_store(m, ctx.records.get(m.name, []), path=rel)
    return ladders_block(found)


def _ladders(ctx: _Context, sp: SitePage) -> str:
    """A bar chart of each artifact's variants (per GPU and parameter set), charting what the claims measure,
    collapsed under the ladder's tables."""
    meta = sp.meta
    assert meta is not None
    out = []
    for rel in sorted(set(meta.artifacts.values())):
        name, variants, baseline = _artifact(ctx, rel)
        keys = {k for k, v in meta.artifacts.items() if v == rel}
        measures = [c.measure for c in meta.claims if c.measure and c.measure.artifact in keys]
        wanted = [m.of.figure for m in measures if m.per is None] + [m.of.figure for m in measures if m.per]
        for n, spec in enumerate(charts.ladder_specs(ctx.records.get(name, []), variants, baseline, wanted)):
            alt = f"{name}: {spec['figure']} of each variant on {spec['gpu']}, {spec['date']} {spec['params']}"
            out.append(_add_chart(ctx, sp, f"ladder-{name}-{gpu_slug(spec['gpu'])}-{n}", spec, alt.strip()))
    if not out:
        return ""
    body = "\n".join("    " + line if line else line for line in "\n".join(out).split("\n"))
    return f'??? note "Charts of the ladder ({len(out)})"\n\n{body}\n'


def _roofline(ctx: _Context, sp: SitePage) -> str:
    """For pages tagged 'roofline': a page whose artifacts are memory-bound (one names a ceiling variant) gets
    every memory-bound artifact under the measured bandwidth roof; any other (GEMM) gets its own artifacts'
    points under the datasheet memory roof and the best measured compute rate per dtype."""
    from kwiki.results.gpu import Gpu
    from kwiki.results.peaks import dram_peak
    from kwiki.wiki.manifest import MANIFEST, load_manifest

    assert sp.meta is not None
    if "roofline" not in sp.meta.tags:
        return ""
    own = [m for m in (_manifest(ctx, rel) for rel in sorted(set(sp.meta.artifacts.values()))) if m is not None]
    if own and not any(m.ceiling for m in own):
        rows = [r for m in own for r in ctx.records.get(m.name, [])]
        dram = {}
        for gpu in {r.gpu for r in rows}:
            peak = dram_peak(Gpu(index=0, name=gpu, uuid=None, cc=0))
            if peak is not None:
                dram[gpu] = peak.value
        return "\n".join(
            _add_chart(ctx, sp, f"roofline-{gpu_slug(spec['gpu'])}", spec,
                       f"compute roofline of this page's artifacts on {spec['gpu']}, {spec['date']}")
            for spec in charts.compute_roofline_specs(rows, [m.name for m in own], dram))
    ceilings: dict[str, tuple[str, str | None]] = {}
    for path in sorted((ctx.root / ARTIFACTS_DIR).glob(f"*/{MANIFEST}")):
        try:
            m = load_manifest(path.parent, ctx.root)
        except ManifestError:
            continue
        if m.ceiling:
            ceilings[m.name] = (m.ceiling, m.baseline)
    rows = [r for name in sorted(ceilings) for r in ctx.records.get(name, [])]
    return "\n".join(
        _add_chart(ctx, sp, f"roofline-{gpu_slug(spec['gpu'])}", spec,
                   f"roofline of the memory-bound artifacts on {spec['gpu']}, {spec['date']}")
        for spec in charts.roofline_specs(rows, ceilings))


def _history(ctx: _Context, sp: SitePage, rows: list[ClaimRow]) -> str:
    """Each claim over the runs, and the same values as a table beside the chart (collapsed)."""
    assert sp.meta is not None
    spec = charts.history_spec(sp.meta.claims, rows)
    if not spec:
        return ""
    image = _add_chart(ctx, sp, "history", spec, "measured / claimed for each claim over the runs, by commit")
    table = charts.history_table(spec)
    lines = ["| " + " | ".join(md_text(c) for c in row) + " |" for row in table]
    lines.insert(1, "|" + " --- |" * len(table[0]))
    body = "\n".join("    " + line for line in lines)
    return f'{image}\n??? note "Values of the chart (measured / claimed)"\n\n{body}\n'


def _neutral(lines: list[str]) -> list[str]:
    """Author lines with raw <script>, <iframe>, <object>, <embed> tags shown as text (code fences untouched).

    A courtesy to the reader, not the defense: the sanitiser (`sanitize.clean`) is what keeps every
    other tag, attribute and URL of a page's HTML to its allow-list.
    """
    out, fence = [], None
    for line in lines:
        m = _FENCE.match(line)
        if m and (fence is None or m.group(1) == fence):
            fence = None if fence else m.group(1)
        out.append(line if fence or m else _SCRIPT.sub(r"&lt;\1\2", line))
    return out


def _body(ctx: _Context, sp: SitePage) -> list[str]:
    """The page's body with its generated regions filled and the sections kwiki adds at the end."""
    fm = sp.page.fm
    assert fm is not None
    lines = fm.body.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and _H1.match(lines[first]):
        lines[first] = ""  # the title is the page's heading; Material writes it from the front matter
    if sp.meta is None:
        return _neutral(lines)
    regions = sorted(sp.page.regions, key=lambda r: r.open_line)
    claims = _own(ctx, claims_table(sp.meta, sp.trace))
    history = _own(ctx, _history(ctx, sp, sp.history)) if claims else ""
    tables = _ladder_tables(ctx, sp)
    ladders = _own(ctx, "\n".join(x for x in (tables, _ladders(ctx, sp)) if x))
    out: list[str] = []
    pos = 0
    for region in regions:
        start, end = region.open_line - fm.body_line, region.close_line - fm.body_line
        out += _neutral(lines[pos:start])
        if region.name == "claims":
            out += [claims, history]
            claims = history = ""
        else:
            if region.name == "ladder" and tables:  # the store's latest run, laid out: replaces every ladder region
                out += ["", ladders]
                ladders = ""
                pos = end + 1
                continue
            out += _neutral(region.content.rstrip("\n").split("\n"))
            if region.name == "ladder":
                out += ["", ladders]
                ladders = ""
        pos = end + 1
    out += _neutral(lines[pos:])
    if claims:
        out += ["", "## Claims", "", claims, history]
    if ladders:
        out += ["", "## Ladder", "", ladders]
    roofline = _own(ctx, _roofline(ctx, sp))
    if roofline:
        out += ["", "## Roofline", "", roofline]
    by_model = _own(ctx, gpumatrix.section(ctx.root, sp.meta))  # claims across GPU models, merged origins' too
    if by_model:
        out += ["", "## By GPU model", "", by_model]
    sources = sources_section(sp.meta)
    if sources:
        out += ["", _own(ctx, sources)]
    # only the section's wrapper is marked: the sources it shows are the artifact's text, not kwiki's
    wrapper, _, sources = artifact_section(ctx.root, sp.meta, ctx.sources, sp.rel).partition("\n")
    out += ["", _own(ctx, wrapper) + ("\n" + sources if sources else "")]
    return out


def _artifact_pages(ctx: _Context, pages: list[SitePage]) -> None:
    """One staged page per artifact that a page names, holding its sources (`render.artifact_page`)."""
    taken: set[str] = set()
    for rel in sorted({r.rstrip("/") for sp in pages if sp.meta for r in sp.meta.artifacts.values()}):
        text = artifact_page(ctx.root, rel)
        if text is None:
            continue
        stem = re.sub(r"[^A-Za-z0-9_.]+", "-", rel.removeprefix(ARTIFACTS_DIR + "/")).strip("-.") or "artifact"
        name, n = stem, 1
        while name in taken:
            n += 1
            name = f"{stem}-{n}"
        taken.add(name)
        ctx.sources[rel] = f"{SOURCES_DIR}/{name}.md"
        wrapper, _, body = text.partition('<div class="kw-artifacts" markdown>')
        ctx.files[ctx.sources[rel]] = (wrapper + _own(ctx, '<div class="kw-artifacts" markdown>') + body).encode()


def _front(sp: SitePage) -> str:
    """Front matter for MkDocs: title, description and tags, HTML-escaped (Material prints them raw)."""
    if sp.meta is not None:
        tags, summary = list(sp.meta.tags), sp.meta.summary
    else:
        data = sp.page.fm.data if sp.page.fm else {}
        raw = data.get("tags")
        tags = [str(t) for t in (raw if isinstance(raw, list) else [raw] if raw else [])]
        summary = data.get("summary") if isinstance(data.get("summary"), str) else None
    front: dict[str, Any] = {"title": html_text(sp.title)}
    if summary:
        front["description"] = html_text(" ".join(summary.split()))
    if tags:
        front["tags"] = [html_text(t) for t in tags]
    return "---\n" + yaml.safe_dump(front, sort_keys=True, allow_unicode=True, width=10_000) + "---\n"


def stage_page(ctx: _Context, sp: SitePage, home: str | None) -> str:
    parts = [_front(sp), ""]
    if sp.meta is not None and sp.standing is not None and home is None:
        parts.append(_own(ctx, header(sp.meta, sp.standing, sp.rel, ARCHITECTURES)))
    errors = [p.format() for p in sp.page.problems if p.severity == "error"]
    if errors:
        parts.append(problems_note(errors))
    if home is not None:
        parts.append(_own(ctx, home))
    if sp.page.fm is not None:
        parts += _body(ctx, sp)
    return "\n".join(parts).rstrip("\n") + "\n"


def _site_pages(root: Path, rows: list[RecordRow | ClaimRow], strict: bool) -> list[SitePage]:
    from kwiki.wiki.check import check_ids

    wiki = load_wiki(root)
    problems = [p for page in wiki.pages for p in page.problems if p.severity == "error"]
    problems += check_ids(wiki)
    if strict and problems:
        raise SiteError(f"{len(problems)} page errors (run 'kwiki check')", [p.format() for p in sorted(problems)])
    by_page = claim_rows_by_page(rows)
    store = Store(rows)
    out = []
    for page in wiki.pages:
        rel = Path(page.path).relative_to(WIKI_DIR).as_posix()
        history = [*by_page.get(page.id or "", []), *by_page.get(page.path, [])] if page.meta else []
        traced = trace(page.meta, store, page.path) if page.meta else None  # nothing untraceable shows as verified
        st = standing(page.meta, history, traced) if page.meta else None
        out.append(SitePage(page, rel, page.meta, st, history, traced))
    return out


def page_url(rel: str, directory_urls: bool = True) -> str:
    """The URL MkDocs gives staged page `rel`, relative to the site's root ('' for the home page)."""
    stem = rel.removesuffix(".md")
    if not directory_urls:
        return stem + ".html"
    if stem == "index" or stem.endswith("/index"):
        return stem.removesuffix("index")
    return stem + "/"


def _summaries(pages: list[SitePage], directory_urls: bool) -> dict[str, str]:
    return {page_url(sp.rel, directory_urls): " ".join(sp.meta.summary.split())
            for sp in pages if sp.meta is not None and sp.meta.summary}


def generate(root: Path, strict: bool = True, site_name: str = "KernelWiki", key: str | None = None
             ) -> tuple[dict[str, bytes], list[SitePage], LastRun | None]:
    """Every file of the staged docs directory (path -> bytes), the pages, and the last verify run;
    kwiki's own markup is marked with `key` (default: `site_key`)."""
    rows = read_all(root)
    pages = _site_pages(root, rows, strict)
    records: dict[str, list[RecordRow]] = {}
    for row in rows:
        if isinstance(row, RecordRow):
            records.setdefault(row.artifact, []).append(row)
    ctx = _Context(root, records, site_key(root) if key is None else key)
    wiki = root / WIKI_DIR
    refused = set(links_out(root, wiki))  # committed links that lead out (or are broken): never read
    why = [f"{inside(root, p.relative_to(root).as_posix())}; not published" for p in sorted(refused)]
    if why and strict:
        raise SiteError(f"{len(why)} links under {WIKI_DIR}/ break the containment rule (run 'kwiki check')", why)
    for message in why:
        log.warning("kwiki: %s", message)
    for path in sorted(wiki.rglob("*")):
        rel = path.relative_to(wiki).as_posix()
        if (path not in refused and path.is_file() and not path.name.endswith(".md")
                and not any(p.startswith(".") for p in rel.split("/"))):
            ctx.files[rel] = path.read_bytes()
    for reserved in (INDEX_DIR + "/", ASSETS + "/"):
        taken = sorted(f for f in [*ctx.files, *(p.rel for p in pages)] if f.startswith(reserved))
        if taken:
            raise SiteError(f"wiki/{taken[0]}: the site generates '{reserved}'; move this file elsewhere")
    run = last_run(rows)
    block = home_block(pages, run)
    _artifact_pages(ctx, pages)
    for sp in pages:
        ctx.files[sp.rel] = stage_page(ctx, sp, block if sp.rel == HOME else None).encode()
    if HOME not in ctx.files:
        front = yaml.safe_dump({"title": html_text(site_name)}, allow_unicode=True)
        ctx.files[HOME] = f"---\n{front}---\n\n{_own(ctx, block)}".encode()
    ctx.files[EVIDENCE] = _own(ctx, evidence_page(pages)).encode()
    ctx.files[ARCHITECTURES] = _own(ctx, architectures_page(pages)).encode()
    ctx.files[TAGS] = tags_page().encode()
    ctx.files[CSS] = stylesheet().encode()
    return ctx.files, pages, run


def sync(directory: Path, files: dict[str, bytes]) -> None:
    """Make `directory` hold exactly `files`, writing only what changed (so MkDocs sees stable mtimes)."""
    directory.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        target = directory / rel
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, data)
    for path in sorted(directory.rglob("*"), reverse=True):
        rel = path.relative_to(directory).as_posix()
        if path.is_file() and rel not in files:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


# ---------------------------------------------------------------- MkDocs


def _names(items: list[Any]) -> list[str]:
    return [next(iter(i)) if isinstance(i, dict) else str(i) for i in items]


def base_config(root: Path) -> dict[str, Any]:
    """The repository's mkdocs.yml (read as MkDocs reads it), or nothing."""
    from mkdocs.exceptions import MkDocsException
    from mkdocs.utils.yaml import yaml_load

    path = root / BASE_CONFIG
    if not path.is_file():
        return {}
    try:
        data = yaml_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, MkDocsException) as exc:
        raise SiteError(f"{BASE_CONFIG}: cannot read it: {exc}") from None
    if not isinstance(data, dict):
        raise SiteError(f"{BASE_CONFIG}: not a mapping")
    return data


def theme_overrides(directory: Path) -> Path | None:
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
        "extra_css": [*(base.get("extra_css") or []), CSS], "nav": nav(pages),
        "not_in_nav": "\n".join([*([str(base["not_in_nav"])] if base.get("not_in_nav") else []), f"/{SOURCES_DIR}/"]),
    }


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.levelname}: {record.getMessage()}")


def run_mkdocs(overrides: dict[str, Any], config_file: Path, own: str | None = None) -> list[str]:
    """Build with MkDocs in this process; the warnings it logged (raises SiteError in strict mode).
    `own` is the key that marked kwiki's own markup when the pages were staged (`site_key`)."""
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # Material's banner about MkDocs 2; pinned below it
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    if not config_file.is_file():
        config_file.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(config_file, b"site_name: KernelWiki\n")
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


def _built_here(directory: Path) -> bool:
    """Whether `directory` holds a site kwiki built (its mark, or the agents' files of an older build)."""
    from kwiki.site.exports import INDEX_JSON, LLMS

    return (directory / SITE_MARK).is_file() or ((directory / LLMS).is_file() and (directory / INDEX_JSON).is_file())


def site_dir_problem(root: Path, site_dir: Path) -> str | None:
    """Why the site must not be built into `site_dir`, or None.

    MkDocs empties its output directory before it writes, so that directory must not be the
    repository, contain it, be or lie inside one of its own folders (wiki, artifacts, results,
    ..., any folder at the top of the repository that no kwiki build wrote), nor hold files that
    no kwiki build wrote; its parent must exist.
    """
    empties = "a build empties its output directory first"
    real_root, site = Path(os.path.realpath(root)), Path(os.path.realpath(site_dir))
    if site == real_root:
        return f"is the repository itself; {empties}"
    if site in real_root.parents:
        return f"contains the repository; {empties}"
    if site == real_root / SERVE_DIR:
        return None  # kwiki serve's own folder
    own = {name: Path(os.path.realpath(real_root / name)) for name in OWN_FOLDERS}
    if site.is_relative_to(real_root):
        top = site.relative_to(real_root).parts[0]
        if top not in own and (real_root / top).exists() and not _built_here(real_root / top):
            own[top] = real_root / top
    for name, folder in sorted(own.items()):
        if site == folder or folder in site.parents or site in folder.parents:
            return (f"is, holds or lies inside {name!r}, one of the repository's own folders and files; "
                    f"{empties} (choose a new folder, such as 'site')")
    if site.exists() and not site.is_dir():
        return "is not a directory"
    if not site.parent.is_dir():
        return f"its parent directory {site.parent} does not exist"
    if site.is_dir() and any(site.iterdir()) and not _built_here(site):
        return f"holds files that no kwiki build wrote; {empties} (empty it, or choose a new folder)"
    return None


def output_dir(root: Path, value: str | Path) -> Path:
    """The site directory `value` names (relative to the repository root), resolved; UsageError when refused."""
    path = Path(value)
    site_dir = Path(os.path.realpath(path if path.is_absolute() else root / path))
    why = site_dir_problem(root, site_dir)
    if why:
        raise UsageError(f"output directory {str(value)!r}: {why}")
    return site_dir


def _mark(site_dir: Path) -> None:
    """Create `site_dir` and mark it as kwiki's, before MkDocs writes there (a failed build stays rebuildable)."""
    try:
        site_dir.mkdir(parents=True, exist_ok=True)
        if not (site_dir / SITE_MARK).is_file():
            write_atomic(site_dir / SITE_MARK, b"built by kwiki: each 'kwiki build' empties this directory first\n")
    except OSError as exc:
        raise UsageError(f"output directory {str(site_dir)!r}: cannot write there: {exc.strerror or exc}") from None


def build_site(root: Path, site_dir: Path, *, strict: bool = True) -> SiteReport:
    """Stage, build and finish the site; raises SiteError (with the problems) when anything is wrong.

    UsageError, before anything is written, when `site_dir` is refused (see `site_dir_problem`).
    """
    from kwiki.site.exports import write_exports

    why = site_dir_problem(root, site_dir)
    if why:
        raise UsageError(f"output directory {str(site_dir)!r}: {why}")
    t0 = time.perf_counter()
    stage = root / STAGE_DIR
    base = base_config(root)
    key = site_key(root)
    files, pages, run = generate(root, strict, base.get("site_name") or "KernelWiki", key)
    sync(stage / "docs", files)
    overrides = config_overrides(base, stage / "docs", site_dir, pages, strict, theme_overrides(stage / "overrides"))
    t1 = time.perf_counter()
    config_file = root / BASE_CONFIG
    _mark(site_dir)
    warnings = run_mkdocs(overrides, config_file if config_file.is_file() else stage / "base.yml", own=key)
    t2 = time.perf_counter()
    write_exports(site_dir, pages, overrides["site_name"], overrides["site_description"], run,
                  overrides["use_directory_urls"])
    searchindex.rewrite(site_dir, _summaries(pages, overrides["use_directory_urls"]))
    searchindex.compact_site(site_dir)  # a first view fetches the page's HTML: no template indentation in it
    remote = remote_resources(site_dir)
    if remote and strict:
        raise SiteError(f"{len(remote)} resources would be fetched from another host", remote)
    t3 = time.perf_counter()
    return SiteReport(site_dir, len(pages), sum(1 for f in files if f.endswith(".svg")),
                      {"generate": t1 - t0, "mkdocs": t2 - t1, "export": t3 - t2}, warnings + remote)


def live_server(root: Path, host: str, port: int) -> LiveReloadServer:
    """A MkDocs live-reload server over the kwiki-built site; it rebuilds when wiki, artifacts or results change."""
    from mkdocs.livereload import LiveReloadServer

    site_dir = root / SERVE_DIR

    def builder() -> None:
        try:
            report = build_site(root, site_dir, strict=False)
        except SiteError as exc:
            log.error("kwiki: %s%s", exc.message, "".join(f"\n  {p}" for p in exc.problems))
            return
        for warning in report.warnings:
            log.warning("kwiki: %s", warning)
        log.info("kwiki: %d pages, %d charts", report.pages, report.charts)

    builder()
    server = LiveReloadServer(builder=builder, host=host, port=port, root=str(site_dir))
    not_found = site_dir / "404.html"
    server.error_handler = lambda code: not_found.read_bytes() if not_found.is_file() else None
    for watched in (root / WIKI_DIR, root / "artifacts", root / "results", root / BASE_CONFIG):
        if watched.exists():
            server.watch(str(watched))
    return server
