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
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from kwiki.core.errors import UsageError
from kwiki.core.paths import inside, links_out
from kwiki.core.tracked import linked_folders, tracked, unpublishable, wiki_files
from kwiki.core.writefile import write_atomic
from kwiki.results.audits import Audits
from kwiki.results.freshness import changed
from kwiki.results.standing import claim_rows_by_page, standing
from kwiki.results.store import ClaimRow, RecordRow, read_all
from kwiki.results.timelines import load_timelines
from kwiki.results.trace import Store, trace
from kwiki.site import searchindex
from kwiki.site.audit import audit_scripts
from kwiki.site.decisions import decisions_page
from kwiki.site.errors import SiteError
from kwiki.site.glossary import entries
from kwiki.site.listings import (
    DECISIONS,
    HOME,
    INDEX_DIR,
    LastRun,
    SitePage,
    architectures_pages,
    evidence_pages,
    home_block,
    last_run,
)
from kwiki.site.outdir import SERVE_DIR, STAGE_DIR, mark, output_dir, site_dir_problem
from kwiki.site.pages import ASSETS, CSS, Context, artifact_pages, own, stage_page
from kwiki.site.render import html_text, stylesheet
from kwiki.site.tagpages import tags_pages
from kwiki.site.theme import (
    base_config,
    config_overrides,
    remote_resources,
    run_mkdocs,
    write_theme_overrides,
)
from kwiki.site.weight import over_budget
from kwiki.wiki.catalog import WIKI_DIR, load_wiki
from kwiki.wiki.drafts import draft_reason, is_draft
from kwiki.wiki.owners import owners
from kwiki.wiki.siteconfig import BASE_CONFIG

if TYPE_CHECKING:
    from mkdocs.livereload import LiveReloadServer

log = logging.getLogger(__name__)

__all__ = [
    "BASE_CONFIG",
    "SERVE_DIR",
    "STAGE_DIR",
    "SiteError",
    "SiteReport",
    "base_config",
    "build_site",
    "config_overrides",
    "ensure_site_key",
    "generate",
    "live_server",
    "output_dir",
    "page_url",
    "remote_resources",
    "run_mkdocs",
    "sync",
]


@dataclass
class SiteReport:
    site_dir: Path
    pages: int
    charts: int
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)



KEY_FILE = f"{STAGE_DIR}/key"


def ensure_site_key(root: Path) -> str:
    """The secret that marks kwiki's own markup in the staged pages (sanitize.mark_own), so that the sanitiser
    can tell kwiki's badges from a page's HTML. It is this machine's (kwiki.core.machine) seal of a random salt
    kept in `.kwiki/site/key` (ignored by git, never published), so unchanged staged pages stay byte-identical
    from build to build, and a key file a checkout carries gives its author nothing. A salt git tracks is not
    used (a key for this build alone); a key that reached the site is retired (`retire_site_key`). A page's
    author cannot know the key, so cannot mark their HTML as kwiki's."""
    import secrets

    from kwiki.core.machine import seal
    from kwiki.core.tracked import is_tracked, tracked

    path = root / KEY_FILE
    files = tracked(root)
    if files is not None and is_tracked(files, KEY_FILE):
        log.warning("kwiki: %s: git tracks it; a key for this build alone (run: git rm --cached %s)",
                    KEY_FILE, KEY_FILE)
        return secrets.token_hex(16)
    try:
        salt = path.read_text(encoding="ascii").strip()
        if re.fullmatch(r"[0-9a-f]{32}", salt):
            return seal(root, "site", salt)[:32]
    except (OSError, UnicodeDecodeError):
        pass
    salt = secrets.token_hex(16)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, salt.encode("ascii"))
    except OSError:
        pass  # .kwiki/ cannot be written: a key for this build alone
    return seal(root, "site", salt)[:32]


def retire_site_key(root: Path) -> None:
    """Forget the site key (it reached a finished page): the next build makes a new one."""
    (root / KEY_FILE).unlink(missing_ok=True)



def _site_pages(root: Path, rows: list[RecordRow | ClaimRow], strict: bool) -> list[SitePage]:
    from kwiki.results.check import check_tree
    from kwiki.wiki.check import check_limits

    if strict:  # the strict build's check is `kwiki check`'s, whole: a build never passes what check fails
        problems = check_tree(root).errors
        if problems:
            raise SiteError(f"{len(problems)} errors (run 'kwiki check')", [p.format() for p in problems])
    wiki = load_wiki(root)
    by_page = claim_rows_by_page(rows)
    store = Store(rows, Audits.load(root))
    out = []
    for page in wiki.pages:
        over = check_limits(page)
        if over:  # only a build that is not strict gets here with one (`kwiki serve`): never built, never slow
            log.warning("kwiki: %s; not published", over[0].format())
            continue
        if page.meta is not None and is_draft(page.meta):  # drafts stay drafts: not staged, listed or exported
            log.info("kwiki: %s: a draft, not published (%s)", page.path, draft_reason(page.meta))
            continue
        rel = Path(page.path).relative_to(WIKI_DIR).as_posix()
        history = [*by_page.get(page.id or "", []), *by_page.get(page.path, [])] if page.meta else []
        traced = trace(page.meta, store, page.path) if page.meta else None  # nothing untraceable shows as verified
        st = standing(page.meta, history, traced) if page.meta else None
        out.append(SitePage(page, rel, page.meta, st, history, traced))
    earlier = changed(root, [(sp.page.path, sp.meta) for sp in out if sp.meta is not None])  # of earlier code
    for sp in out:
        if sp.trace is not None:
            sp.trace.changed = earlier.get(sp.page.path, {})
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
    kwiki's own markup is marked with `key` (default: `ensure_site_key`)."""
    rows = read_all(root)
    pages = _site_pages(root, rows, strict)
    records: dict[str, list[RecordRow]] = {}
    for row in rows:
        if isinstance(row, RecordRow):
            records.setdefault(row.artifact, []).append(row)
    ctx = Context(root, records, ensure_site_key(root) if key is None else key, git=tracked(root))
    ctx.owners = owners((sp.meta, sp.rel) for sp in pages if sp.meta is not None)
    ctx.glossary, ctx.pages = entries(pages), pages
    ctx.timelines = load_timelines(root)
    ctx.audits = Audits.load(root)
    wiki = root / WIKI_DIR
    refused = set(links_out(root, wiki))  # committed links that lead out (or are broken): never read
    why = [f"{inside(root, p.relative_to(root).as_posix())}; not published" for p in sorted(refused)]
    for path in wiki_files(wiki):  # what else may not be published (kwiki.core.tracked): never read either
        problem = None if path in refused else unpublishable(root, path, WIKI_DIR, ctx.git)
        if problem is None and path not in refused and path.is_file():
            ctx.files[path.relative_to(wiki).as_posix()] = path.read_bytes()
        elif problem is not None and path.is_symlink():
            why.append(problem)
        elif problem is not None:
            log.warning("kwiki: %s", problem)
    if why and strict:
        raise SiteError(f"{len(why)} links under {WIKI_DIR}/ break the containment rule (run 'kwiki check')", why)
    for message in why:
        log.warning("kwiki: %s", message)
    for reserved in (INDEX_DIR + "/", ASSETS + "/"):
        taken = sorted(f for f in [*ctx.files, *(p.rel for p in pages)] if f.startswith(reserved))
        if taken:
            raise SiteError(f"wiki/{taken[0]}: the site generates '{reserved}'; move this file elsewhere")
    run = last_run(rows)
    block = home_block(pages, run)
    artifact_pages(ctx, pages)
    for sp in pages:
        ctx.files[sp.rel] = stage_page(ctx, sp, block if sp.rel == HOME else None).encode()
    if HOME not in ctx.files:
        front = yaml.safe_dump({"title": html_text(site_name)}, allow_unicode=True)
        ctx.files[HOME] = f"---\n{front}---\n\n{own(ctx, block)}".encode()
    for staged, text in [*evidence_pages(pages).items(), *architectures_pages(pages).items()]:
        ctx.files[staged] = own(ctx, text).encode()
    ctx.files[DECISIONS] = own(ctx, decisions_page(pages)).encode()
    for staged, text in tags_pages(pages).items():
        ctx.files[staged] = text.encode()
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
    key = ensure_site_key(root)
    files, pages, run = generate(root, strict, base.get("site_name") or "KernelWiki", key)
    sync(stage / "docs", files)
    templates = write_theme_overrides(stage / "overrides")
    overrides = config_overrides(base, stage / "docs", site_dir, pages, strict, templates)
    t1 = time.perf_counter()
    mark(site_dir)
    warnings = run_mkdocs(overrides, stage / "mkdocs.yml", own=key,
                          published=lambda: retire_site_key(root))
    t2 = time.perf_counter()
    write_exports(site_dir, pages, overrides["site_name"], overrides["site_description"], run,
                  overrides["use_directory_urls"])
    searchindex.rewrite(site_dir, _summaries(pages, overrides["use_directory_urls"]))
    searchindex.compact_site(site_dir)  # a first view fetches the page's HTML: no template indentation in it
    deferred = searchindex.defer_index(site_dir)
    if deferred and strict:
        raise SiteError("the search index would load with every page", [deferred])
    remote = remote_resources(site_dir) + ([deferred] if deferred else []) + audit_scripts(site_dir)
    if remote and strict:
        raise SiteError(f"{len(remote)} resources would be fetched from another host", remote)
    heavy = over_budget(site_dir)  # said, not refused: the browser tests hold the repository's pages to it
    t3 = time.perf_counter()
    return SiteReport(site_dir, len(pages), sum(1 for f in files if f.endswith(".svg")),
                      {"generate": t1 - t0, "mkdocs": t2 - t1, "export": t3 - t2}, warnings + remote + heavy)


def live_server(root: Path, host: str, port: int) -> LiveReloadServer:
    """A MkDocs live-reload server over the kwiki-built site; it rebuilds when wiki, artifacts or results change."""
    from mkdocs.livereload import LiveReloadServer

    site_dir = root / SERVE_DIR
    watched = [root / WIKI_DIR, root / "artifacts", root / "results", root / BASE_CONFIG]
    # the watcher follows links to folders (watchdog's snapshot stats through them): `wiki/x -> /` would have it
    # walk the whole machine and never answer, so such a link is refused before anything starts
    walked = [p for top in watched if top.is_dir() for p in [*links_out(root, top), *linked_folders(top)]]
    if walked:
        raise UsageError(f"{walked[0].relative_to(root).as_posix()}: a link to a folder or out of the repository; "
                         "the live server would walk through it (remove it, or use 'kwiki build')")

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
    for path in watched:
        if path.exists():
            server.watch(str(path))
    return server
