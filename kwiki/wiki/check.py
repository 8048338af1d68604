"""`kwiki check`: schema, unique ids, references, links, artifact paths, generated regions.

Reads only; never writes a file.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from kwiki.core.errors import ManifestError, Problem
from kwiki.core.paths import inside, links_out
from kwiki.core.tracked import artifact_entry_problem, cache_problems, tracked, unpublishable, wiki_files
from kwiki.wiki.catalog import WIKI_DIR, Wiki, page_files
from kwiki.wiki.drafts import draft_reason
from kwiki.wiki.evidence import EvidenceLevel
from kwiki.wiki.limits import limit_problems
from kwiki.wiki.manifest import MANIFEST, Manifest, load_manifest, shape_list
from kwiki.wiki.markers import code_lines
from kwiki.wiki.pages import Page

if TYPE_CHECKING:
    from kwiki.wiki.model import Comparison, PageMeta

_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(\s*(?:<([^>\n]+)>|([^)\s<>]+))(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass
class Report:
    pages: int
    problems: list[Problem]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_json(self) -> dict[str, Any]:
        from kwiki import SCHEMA_VERSION

        return {
            "schema_version": SCHEMA_VERSION,
            "ok": self.ok,
            "pages": self.pages,
            "problems": [p.as_json() for p in self.problems],
        }


# below this many pages, starting worker processes costs more than it saves
PARALLEL_MIN_PAGES = 500


@dataclass(frozen=True)
class _Summary:
    """What the whole-wiki checks need of a page: where it is, its id, the ids it names."""

    path: str
    id: str | None
    id_line: int
    refs: tuple[tuple[str, int, int, str], ...]  # (field, index, line, page id)
    measured: tuple[PageMeta, int] | None = None  # a page with a measurements block: its meta, the block's line
    measures: frozenset[str] = frozenset()  # ids of its claims that kwiki measures (they have a `measure`)
    contradicted: tuple[tuple[str, int, str, str], ...] = ()  # (field, line, page id, claim id) on other pages
    draft: tuple[str, int, str] | None = None  # a draft (kwiki.wiki.drafts): field, its line, why; --strict warns
    page_links: tuple[tuple[int, str, str], ...] = ()  # (line, target, path of the page file it leads to)


_Job = tuple[Path, list[Path], bool, frozenset[str] | None, frozenset[str] | None]


def _check_files(job: _Job) -> tuple[list[_Summary], list[Problem]]:
    """Load pages and run every check that needs only the page itself (a worker's share)."""
    from kwiki.wiki.pages import load_page

    root, files, strict, known, git_files = job
    summaries: list[_Summary] = []
    problems: list[Problem] = []
    for file in files:
        page = load_page(file, root, strict)
        problems.extend(page.problems)
        problems.extend(check_file(page))
        problems.extend(check_limits(page))
        if page.meta is None:
            summaries.append(_Summary(page.path, None, 0, ()))
            continue
        refs = tuple((name, i, page.line_of(name, i), ref) for name, i, ref in page.meta.references())
        measured = (page.meta, page.line_of("measurements")) if page.meta.measurements is not None else None
        measures = frozenset(c.id for c in page.meta.claims if c.measure is not None)
        contradicted = tuple(
            (f"claims[{i}].contradicted_by.page", page.line_of("claims", i, "contradicted_by"), c.contradicted_by.page,
             c.contradicted_by.claim)
            for i, c in enumerate(page.meta.claims)
            if c.contradicted_by is not None and c.contradicted_by.page not in (None, page.id))
        why = draft_reason(page.meta)
        at = "status" if page.meta.status == "draft" else "summary"
        draft = (at, page.line_of(at), why) if why is not None else None
        summaries.append(_Summary(page.path, page.id, page.line_of("id"), refs, measured, measures, contradicted,
                                  draft, _page_links(page, root)))
        if strict:
            problems.extend(check_id_convention(page))
            problems.extend(check_headline(page))
        problems.extend(check_sources(page, root))
        problems.extend(check_artifacts(page, root, git_files))
        problems.extend(check_manifests(page, root))
        problems.extend(check_evidence(page))
        problems.extend(check_regions(page))
        problems.extend(check_links(page, root, known))
    return summaries, problems


Traced = Callable[[Path, list[tuple[str, "PageMeta", int]]], list[Problem]]


def check(root: Path, strict: bool = False, jobs: int = 0, traced: Traced | None = None) -> Report:
    """Check every page under root/wiki; large wikis are split over `jobs` processes (default: CPUs).

    `traced` checks the pages that carry a measurements block against the results store, given
    (path, meta, line of the block) for each: `kwiki check` passes kwiki.results.trace.check_pages,
    which sits above this module. Its severities stand under `strict` too: an untraceable figure
    is an error either way, and a block written before run ids stays a warning, as only a
    `kwiki verify` on a GPU can write it again (its figures do trace, through older rows).
    """
    files = page_files(root)
    known = _plain_page_files(root, files)
    git_files = tracked(root)
    jobs = jobs or os.cpu_count() or 1
    # workers are forked (no re-import); forking a process that runs threads is unsafe, so then stay serial
    if jobs > 1 and len(files) >= PARALLEL_MIN_PAGES and threading.active_count() == 1:
        size = -(-len(files) // jobs)
        shares = [(root, files[i : i + size], strict, known, git_files) for i in range(0, len(files), size)]
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            parts = list(pool.map(_check_files, shares))
    else:
        parts = [_check_files((root, files, strict, known, git_files))]
    summaries = [s for part in parts for s in part[0]]
    problems = [p for part in parts for p in part[1]]
    problems.extend(check_ids(summaries, root))
    problems.extend(check_wiki_links(root, git_files))
    problems.extend(cache_problems(git_files))
    ids = {s.id for s in summaries if s.id}
    problems.extend(
        Problem(s.path, line, f"{name}[{i}]", f"no page has id {ref!r}")
        for s in summaries for name, i, line, ref in s.refs if ref not in ids
    )
    problems.extend(check_contradictions(summaries))
    problems.extend(check_links_to_drafts(summaries))
    if strict:
        problems = [Problem(p.path, p.line, p.field, p.message, "error") for p in problems]
        # a draft is allowed: a warning that says it is left out, never an error, even under --strict
        problems.extend(Problem(s.path, s.draft[1], s.draft[0], f"a draft, left out of the site, query, MCP and "
                                f"skills: {s.draft[2]}", "warning") for s in summaries if s.draft is not None)
    if traced is not None:
        problems.extend(traced(root, [(s.path, *s.measured) for s in summaries if s.measured is not None]))
    return Report(pages=len(files), problems=sorted(set(problems)))


def check_ids(pages: Wiki | Iterable[Page | _Summary], root: Path | None = None) -> list[Problem]:
    """Pages whose id an older page already has. `pages`: a Wiki, Pages or summaries (path, id, id line).

    The page that had the id first keeps it, the others are blamed: see `_ages`.
    """
    items: Iterable[Page | _Summary]
    if isinstance(pages, Wiki):
        root, items = pages.root, pages.pages
    else:
        items = pages
    by_id: dict[str, list[Page | _Summary]] = {}
    for page in items:
        if page.id:
            by_id.setdefault(page.id, []).append(page)
    shared = {page_id: group for page_id, group in by_id.items() if len(group) > 1}
    if not shared:
        return []
    ages = _ages(root, sorted(page.path for group in shared.values() for page in group))
    out = []
    for page_id, group in shared.items():
        original, *later = sorted(group, key=lambda page: ages[page.path])
        for page in later:
            line = page.id_line if isinstance(page, _Summary) else page.line_of("id")
            out.append(Problem(page.path, line, "id", f"id {page_id!r} is already used by {original.path}"))
    return out


HOME_PAGE = f"{WIKI_DIR}/index.md"  # the wiki's home page: the one page exempt from the id convention


def check_id_convention(page: Page) -> list[Problem]:
    """A page id is `<type>-<slug>` (`technique-persistent-kernel`); the wiki's home page, wiki/index.md, is exempt.

    Checked under --strict (how the wiki is checked), where it is an error, as every problem is there.
    """
    if page.meta is None or page.path == HOME_PAGE:
        return []
    prefix = f"{page.meta.type.value}-"
    if page.meta.id.startswith(prefix) and len(page.meta.id) > len(prefix):
        return []
    return [Problem(page.path, page.line_of("id"), "id", f"id {page.meta.id!r} does not follow the convention "
                    f"'<type>-<slug>': a page of type {page.meta.type.value!r} has an id that starts with "
                    f"{prefix!r} (e.g. '{prefix}{page.meta.id}')")]


def check_limits(page: Page) -> list[Problem]:
    """A page past the headings or nesting limit (kwiki.wiki.limits): building it would cost too much."""
    if page.fm is None:
        return []
    return [Problem(page.path, page.fm.body_line + line - 1, field, message)
            for line, field, message in limit_problems(page.fm.body)]


_ENDINGS = {b"\r\n": "CR LF", b"\n": "LF", b"\r": "CR"}


def check_file(page: Page) -> list[Problem]:
    """A page's name and line endings: what the index, the site and write-back can carry."""
    out = []
    try:
        page.path.encode("utf-8")
    except UnicodeEncodeError:
        out.append(Problem(page.path, 0, "", "the file name is not UTF-8; the index, the site and JSON output "
                                             "cannot carry it (rename it)"))
    if page.fm is None:
        return out
    try:
        raw = page.file.read_bytes()  # the page is known to be small; decoding hid its line endings
    except OSError:
        return out
    if b"\r" in raw:
        first = b""
        for number, m in enumerate(re.finditer(rb"\r\n|\r|\n", raw), start=1):
            first = first or m.group()
            if m.group() != first:
                out.append(Problem(page.path, number, "", f"mixed line endings: this line ends with "
                                   f"{_ENDINGS[m.group()]}, line 1 with {_ENDINGS[first]}; kwiki verify cannot "
                                   "rewrite such a page byte-exactly (convert it to one style)"))
                break
    return out


def _ages(root: Path | None, paths: list[str]) -> dict[str, tuple[int, int, str]]:
    """Sort keys, oldest page first: pages committed to git by the time of the commit that added
    them, then pages git does not know by modification time, then by path."""
    import subprocess

    added: dict[str, int] = {}
    if root is not None:
        try:
            argv = ["git", "log", "--relative", "--no-renames", "--diff-filter=A", "--format=@%ct", "--name-only", "-z"]
            log = subprocess.run([*argv, "--", *paths], cwd=root, capture_output=True, timeout=30,
                                 encoding="utf-8", errors="surrogateescape")
        except (OSError, subprocess.SubprocessError):
            log = None
        when = 0
        for item in (log.stdout if log is not None and log.returncode == 0 else "").replace("\n", "\0").split("\0"):
            if item.startswith("@") and item[1:].isdigit():
                when = int(item[1:])
            elif item:
                added[item] = min(when, added.get(item, when))
    out = {}
    for path in paths:
        if path in added:
            out[path] = (0, added[path], path)
            continue
        try:
            mtime = os.stat(root / path).st_mtime_ns if root is not None else 0
        except OSError:
            mtime = 0
        out[path] = (1, mtime, path)
    return out


def check_artifacts(page: Page, root: Path, git_files: frozenset[str] | None = None) -> list[Problem]:
    """Each `artifacts` entry names a path under artifacts/ that git tracks (kwiki.core.tracked), and
    `artifact_dir` keeps the containment rule. `git_files`: `tracked(root)`."""
    assert page.meta is not None
    out = []
    for name, rel in sorted(page.meta.artifacts.items()):
        why = artifact_entry_problem(root, rel, git_files)
        if why:
            out.append(Problem(page.path, page.line_of("artifacts", name), f"artifacts.{name}", why))
    if page.meta.artifact_dir:
        why = inside(root, page.meta.artifact_dir)
        if why:
            out.append(Problem(page.path, page.line_of("artifact_dir"), "artifact_dir", why))
    return out


def check_wiki_links(root: Path, git_files: frozenset[str] | None = None) -> list[Problem]:
    """Links committed under wiki/ that break the containment rule or lead out of wiki/ or to a path with a
    dot-component (kwiki.core.tracked; pages are reported when loaded). The site never reads nor publishes them.
    """
    out = []
    refused = links_out(root, root / WIKI_DIR)
    for path in refused:
        if path.suffix == ".md" and not path.is_dir():
            continue  # a page: load_page reports it
        rel = path.relative_to(root).as_posix()
        out.append(Problem(rel, 0, "", f"{inside(root, rel)}; the site does not publish it"))
    for path in wiki_files(root / WIKI_DIR):
        why = unpublishable(root, path, WIKI_DIR, git_files) if path.is_symlink() and path not in refused else None
        if why is not None:
            out.append(Problem(path.relative_to(root).as_posix(), 0, "", why))
    return out


def check_evidence(page: Page) -> list[Problem]:
    meta = page.meta
    assert meta is not None
    if meta.evidence_level == EvidenceLevel.verified and meta.measurements is None:
        return [Problem(page.path, page.line_of("evidence_level"), "evidence_level",
                        "'verified' is set only by kwiki verify (no measurements block on this page)")]
    if meta.evidence_level == EvidenceLevel.measured and meta.measurements is None:
        return [Problem(page.path, page.line_of("evidence_level"), "evidence_level",
                        "'measured' is written by kwiki verify; this page has no kwiki measurements",
                        "warning")]
    line = page.line_of("measurements")
    if meta.measurements is not None and not any(
        r.name == "measurements" and r.open_line < line < r.close_line for r in page.yaml_regions
    ):
        return [Problem(page.path, line, "measurements",
                        "measurements block outside its '# kwiki:measurements' markers (written by hand?)")]
    return []


def check_headline(page: Page) -> list[Problem]:
    """A published page whose claims kwiki measures names the one it answers with (`headline`: the first figure of
    its answer box, its figure in the home page's table), and that claim is one kwiki measures. Checked under
    --strict (how the wiki is checked), where it is an error, as every problem is there; a draft, left out of the
    site, is not asked."""
    meta = page.meta
    assert meta is not None
    measured = [c.id for c in meta.claims if c.measure is not None]
    if not measured or draft_reason(meta) is not None:
        return []
    some = ", ".join(measured[:3]) + (", ..." if len(measured) > 3 else "")
    if meta.headline is None:
        return [Problem(page.path, page.line_of("claims"), "headline",
                        "the page's claims are measured but it names no headline: add `headline: CLAIM_ID`, the "
                        f"claim that answers the page's question ({some})")]
    if meta.headline not in measured:
        return [Problem(page.path, page.line_of("headline"), "headline",
                        f"headline {meta.headline!r} is a claim kwiki does not measure (it has no `measure`), so the "
                        f"answer box and the home page show no figure for it: name a measured one ({some})")]
    return []


def check_regions(page: Page) -> list[Problem]:
    return [
        Problem(page.path, r.open_line, f"kwiki:{r.name}",
                "generated region was edited by hand (checksum mismatch); rerun kwiki verify")
        for r in [*page.yaml_regions, *page.regions]
        if r.edited
    ]


def _links(body: str, first_line: int) -> Iterator[tuple[int, str]]:
    lines = body.split("\n")
    code = code_lines(lines) if "](" in body else []
    for i, line in enumerate(lines):
        if "](" not in line or code[i]:  # code as every renderer sees it (kwiki.wiki.markers.code_lines)
            continue
        for m in _LINK.finditer(_INLINE_CODE.sub("", line)):
            yield first_line + i, m.group(1) or m.group(2)


def _plain_page_files(root: Path, files: list[Path]) -> frozenset[str] | None:
    """Page files reached without any symbolic link, when wiki/ itself is no link; else None.

    A relative link that normalises (lexically) to one of these names that page and nothing
    else, so `check_links` need not resolve it on disk.
    """
    wiki_dir = str(root / WIKI_DIR)
    if os.path.realpath(wiki_dir) != wiki_dir:
        return None
    return frozenset(str(f) for f in files if not os.path.islink(f))


def check_links(page: Page, root: Path, known: frozenset[str] | None = None) -> list[Problem]:
    """Relative Markdown links must lead to an existing file inside wiki/.

    `known` (from `_plain_page_files`) lets links to pages skip resolving the path on disk.
    """
    assert page.fm is not None
    out = []
    base = os.path.dirname(page.file)
    for line, target in _links(page.fm.body, page.fm.body_line):
        if _EXTERNAL.match(target) or target.startswith("#"):
            continue
        path = unquote(target.split("#", 1)[0].split("?", 1)[0])
        if not path:
            continue
        if path.startswith("/"):
            out.append(Problem(page.path, line, "link", f"link {target!r} is absolute; link pages by relative path"))
            continue
        if known is not None and os.path.normpath(os.path.join(base, path)) in known:
            continue
        try:
            resolved = (page.file.parent / path).resolve()
            exists = resolved.exists()
        except (OSError, RuntimeError, ValueError):  # a looping link, a name too long, a NUL
            out.append(Problem(page.path, line, "link", f"link {target!r} cannot be resolved to a file"))
            continue
        if not exists:
            out.append(Problem(page.path, line, "link", f"link {target!r} leads to a file that does not exist"))
        elif not str(resolved).startswith(str((root / WIKI_DIR).resolve()) + os.sep):
            out.append(Problem(page.path, line, "link", f"link {target!r} leaves wiki/; the site cannot serve it "
                                                        "(link to the source on the web or embed it)"))
    return out


def _page_links(page: Page, root: Path) -> tuple[tuple[int, str, str], ...]:
    """The page's relative links to Markdown files: (line, target, the file's path from `root`)."""
    assert page.fm is not None
    out = []
    for line, target in _links(page.fm.body, page.fm.body_line):
        path = unquote(target.split("#", 1)[0].split("?", 1)[0])
        if _EXTERNAL.match(target) or not path.endswith(".md") or path.startswith("/"):
            continue
        rel = os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(page.file), path)), root)
        out.append((line, target, Path(rel).as_posix()))
    return tuple(out)


def check_links_to_drafts(summaries: Iterable[_Summary]) -> list[Problem]:
    """A published page that links to a draft: the site leaves the draft out, so the link would break its build."""
    summaries = list(summaries)
    drafts = {s.path for s in summaries if s.draft is not None}
    return [Problem(s.path, line, "link", f"link {target!r} leads to a draft ({path}), which the site leaves out: "
                    "publish that page or drop the link", "warning")
            for s in summaries if s.draft is None for line, target, path in s.page_links if path in drafts]


# ---------------------------------------------------------------- sources a reader can open

_WEB = re.compile(r"^https?://(?!(?:localhost|127\.|0\.0\.0\.0|\[::1\]))[^\s/?#@]+\.[^\s/?#@]+(?:[/?#]\S*)?$",
                  re.IGNORECASE)
_DOI = re.compile(r"^doi:10\.\d{4,9}/\S+$", re.IGNORECASE)
_ARXIV = re.compile(r"^arxiv:(?:\d{4}\.\d{4,5}|[a-z.-]+/\d{7})(?:v\d+)?$", re.IGNORECASE)
LOCATORS = "an http(s) URL, 'doi:10.…' or 'arXiv:NNNN.NNNNN' as `url`, or a file of this repository as `path`"


def public(url: str) -> bool:
    """Whether `url` is a locator any reader can open: an http(s) URL on a public host name, a DOI, an arXiv id."""
    return bool(_WEB.match(url) or _DOI.match(url) or _ARXIV.match(url))


def check_sources(page: Page, root: Path) -> list[Problem]:
    """Every source a page cites can be opened by a reader: each `sources` entry has a public locator or
    an in-repo path (the containment rule, kwiki.core.paths.inside), and every claim's `source` and every
    `source_refs` entry names one of those entries."""
    meta = page.meta
    assert meta is not None
    out: list[Problem] = []
    ids: set[str] = set()
    for i, entry in enumerate(meta.sources):
        line = page.line_of("sources", i)
        if isinstance(entry, str):
            ids.add(entry)
            out.append(Problem(page.path, line, f"sources[{i}]", f"source {entry!r} names no locator a reader can "
                                                                 f"open; write it as {{id, title, url}} ({LOCATORS})"))
            continue
        ids.add(entry.id)
        if entry.url is not None and not public(entry.url):
            out.append(Problem(page.path, page.line_of("sources", i, "url"), f"sources[{i}].url",
                               f"{entry.url!r} is not a public locator ({LOCATORS})"))
        if entry.path is not None:
            why = inside(root, entry.path)
            if why:
                out.append(Problem(page.path, page.line_of("sources", i, "path"), f"sources[{i}].path", why))
        if entry.url is None and entry.path is None:
            out.append(Problem(page.path, line, f"sources[{i}]", f"source {entry.id!r} names no locator a reader "
                                                                 f"can open ({LOCATORS})"))
    for i, loc in enumerate(meta.source):
        if not public(loc.path) and inside(root, loc.path):
            out.append(Problem(page.path, page.line_of("source", i, "path"), f"source[{i}].path",
                               f"{loc.path!r} is neither a public locator nor a file of this repository"))
    for i, ref in enumerate(meta.source_refs):
        if ref.source_id not in ids:
            out.append(Problem(page.path, page.line_of("source_refs", i, "source_id"), f"source_refs[{i}].source_id",
                               f"no entry of 'sources' has id {ref.source_id!r}"))
    for i, claim in enumerate(meta.claims):
        if claim.source is not None and claim.source not in ids:
            out.append(Problem(page.path, page.line_of("claims", i, "source"), f"claims[{i}].source",
                               f"no entry of 'sources' has id {claim.source!r}"))
    return out


def check_contradictions(summaries: Iterable[_Summary]) -> list[Problem]:
    """A claim marked `contradicted_by` a claim of another page: that page exists and kwiki measures that claim."""
    pages = {s.id: s for s in summaries if s.id}
    out = []
    for s in summaries:
        for field, line, page_id, claim_id in s.contradicted:
            other = pages.get(page_id)
            if other is None:
                out.append(Problem(s.path, line, field, f"no page has id {page_id!r}"))
            elif claim_id not in other.measures:
                out.append(Problem(s.path, line, field, f"page {page_id!r} has no claim {claim_id!r} that kwiki "
                                                        "measures (one with a 'measure')"))
    return out


# ---------------------------------------------------------------- the artifacts a page names


@lru_cache(maxsize=256)
def _load_manifest(directory: Path, root: Path) -> Manifest | ManifestError:
    try:
        return load_manifest(directory, root)
    except ManifestError as exc:
        return exc


def check_binary_of(root: Path, rel: str, manifest: Manifest) -> list[Problem]:
    """`build.binary_of` names an artifact folder inside the repository, as `kwiki verify` requires
    (kwiki.verify.plan._borrow): the containment rule, and a manifest there."""
    if not manifest.build.binary_of:
        return []
    target = Path(os.path.normpath(Path(rel) / manifest.build.binary_of)).as_posix()
    why = inside(root, target) or (None if (root / target / MANIFEST).is_file() else f"{target!r} has no {MANIFEST}")
    if why is None:
        return []
    path = f"{rel}/{MANIFEST}"
    try:
        lines = (root / path).read_text(encoding="utf-8", errors="replace").splitlines()
        line = next((i for i, text in enumerate(lines, 1) if text.strip().startswith("binary_of:")), 1)
    except OSError:
        line = 1
    return [Problem(path, line, "build.binary_of", why)]


def check_manifests(page: Page, root: Path) -> list[Problem]:
    """Problems of the artifact directories a page names and of its claims' `measure` selectors."""
    meta = page.meta
    assert meta is not None
    out: list[Problem] = []
    manifests: dict[str, Manifest] = {}
    for key, rel in sorted(meta.artifacts.items()):
        directory = root / rel
        if inside(root, rel, must_exist=False) or not (directory / MANIFEST).is_file():
            continue  # check_artifacts reports a path that breaks the containment rule; it is not read
        loaded = _load_manifest(directory.resolve(), root.resolve())
        if isinstance(loaded, ManifestError):
            problem = loaded.problem()
            out.append(Problem(problem.path, problem.line, problem.field or MANIFEST, problem.message))
        else:
            manifests[key] = loaded
            out.extend(check_binary_of(root, rel.rstrip("/"), loaded))
    for i, claim in enumerate(meta.claims):
        m = claim.measure
        if m is None:
            continue
        rel = meta.artifacts.get(m.artifact, "")
        where = page.line_of("claims", i, "measure")
        if m.artifact not in manifests:
            if not (root / rel / MANIFEST).is_file():
                out.append(Problem(page.path, where, f"claims[{i}].measure.artifact",
                                   f"{rel!r} is not an artifact directory (no {MANIFEST})"))
            continue
        for label, sel in (("of", m.of), ("per", m.per)):
            key = m.key_of(sel) if sel is not None else m.artifact
            if sel is None or key not in manifests:  # another artifact's manifest problem is reported above
                continue
            if sel.variant not in {v.name for v in manifests[key].variants}:
                line = page.line_of("claims", i, "measure", label, "variant")
                out.append(Problem(page.path, line, f"claims[{i}].measure.{label}.variant",
                                   f"variant {sel.variant!r} is not in {meta.artifacts.get(key, '')}/{MANIFEST}"))
            if sel.params and manifests[key].declares_shape(sel.params) is False:  # issue 25: shapes, one source
                out.append(Problem(page.path, page.line_of("claims", i, "measure", label, "params"),
                                   f"claims[{i}].measure.{label}.params",
                                   f"params {dict(sel.params)} match no shape of {meta.artifacts.get(key, '')}/"
                                   f"{MANIFEST} ({shape_list(manifests[key])})"))
    out.extend(_comparison_problems(page, manifests))
    return out


def _comparison_problems(page: Page, manifests: dict[str, Manifest]) -> list[Problem]:
    """Located problems of a page's `compare` entries: a variant the manifest lacks, a size that is not one of its
    dims, held parameters that match no declared shape or leave two shapes at one size."""
    meta = page.meta
    assert meta is not None
    out: list[Problem] = []
    for i, comp in enumerate(meta.compare):
        if comp.artifact not in manifests:
            continue  # not a key of artifacts (the model refuses it) or an artifact whose manifest is reported above
        man, rel = manifests[comp.artifact], meta.artifacts[comp.artifact]
        for j, name in enumerate(comp.variants):
            if man.variant(name) is None:
                out.append(Problem(page.path, page.line_of("compare", i, "variants", j), f"compare[{i}].variants[{j}]",
                                   f"variant {name!r} is not in {rel}/{MANIFEST}"))
        if not any(comp.over in group.dims for group in man.shapes):
            out.append(Problem(page.path, page.line_of("compare", i, "over"), f"compare[{i}].over",
                               f"{comp.over!r} is not a dim of {rel}/{MANIFEST}'s shapes ({shape_list(man)})"))
        elif comp.at and man.declares_shape(comp.at) is False:
            out.append(Problem(page.path, page.line_of("compare", i, "at"), f"compare[{i}].at",
                               f"at {dict(comp.at)} matches no shape of {rel}/{MANIFEST} ({shape_list(man)})"))
        else:
            out.extend(_one_point_each(page, i, comp, man, rel))
    return out


def _one_point_each(page: Page, i: int, comp: Comparison, m: Manifest, rel: str) -> list[Problem]:
    """A located problem where two declared shapes that hold `comp.at` share a value of `comp.over` (the chart would
    have two points at one size), or where fewer than MIN_SIZES sizes hold it (the chart would never be drawn)."""
    from kwiki.wiki.model import MIN_SIZES

    seen: dict[str, dict[str, int]] = {}
    for group in m.shapes:
        if comp.over not in group.dims:
            continue
        for params in group.params() + group.params(sweep=True):
            if all(str(params[k]) == str(v) for k, v in comp.at.items() if k in params):
                key = str(params[comp.over])
                if key in seen and seen[key] != params:
                    return [Problem(page.path, page.line_of("compare", i, "at"), f"compare[{i}].at",
                                    f"{comp.over}={key} is two shapes of {rel}/{MANIFEST} ({seen[key]} and {params}): "
                                    f"hold the other dims in `at`")]
                seen[key] = params
    if len(seen) < MIN_SIZES:
        return [Problem(page.path, page.line_of("compare", i, "over"), f"compare[{i}].over",
                        f"{len(seen)} size{'' if len(seen) == 1 else 's'} of {comp.over} in {rel}/{MANIFEST} "
                        f"hold{'s' if len(seen) == 1 else ''} {dict(comp.at)}: a comparison draws from {MIN_SIZES} "
                        "or more")]
    return []
