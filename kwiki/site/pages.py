"""A wiki page as the site stages it: its header, body with generated regions filled, claims, ladders, charts,
and the page of each artifact's sources.

`generate` (stage.py) hands each page here with a `Context` that collects the staged files; every
fragment kwiki writes is marked as its own (`sanitize.mark_own`), so the sanitiser can tell kwiki's
markup from a page's HTML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from kwiki.core.errors import ManifestError
from kwiki.core.numbers import params_text
from kwiki.core.strict import Scalar
from kwiki.core.tracked import artifact_entry_problem
from kwiki.results.store import ClaimRow, RecordRow, gpu_slug
from kwiki.site import charts, gpumatrix
from kwiki.site.answer import answer_box
from kwiki.site.curves import draw_compare, draw_curve
from kwiki.site.glossary import Entry, definitions, link_first_uses
from kwiki.site.listings import ARCHITECTURES, INDEX_DIR, SitePage
from kwiki.site.render import (
    artifact_page,
    artifact_section,
    chart,
    claims_table,
    header,
    html_text,
    md_text,
    problems_note,
    relative,
    sources_section,
)
from kwiki.site.sanitize import mark_own
from kwiki.site.tagpages import page_tags
from kwiki.wiki.catalog import ARTIFACTS_DIR
from kwiki.wiki.owners import Owner, claimed_params, matches

if TYPE_CHECKING:
    from kwiki.results.audits import Audits
    from kwiki.results.ladders import Ladder, ShapeGroup
    from kwiki.results.timelines import Timeline
    from kwiki.wiki.manifest import Manifest

ASSETS = "assets/kwiki"
SOURCES_DIR = f"{INDEX_DIR}/artifacts"  # one page per artifact: its sources (out of the nav and the search index)
# one page per ladder whose owning page shows part of it: every shape (out of the nav and the search index)
LADDERS_DIR = f"{INDEX_DIR}/ladders"
# the shape tables a page shows of a ladder it owns, those its claims name first (a table a shape: the decode GEMM
# page's 31 made its HTML 136 KB, where a first view may weigh 400 KB and the theme's CSS and scripts take 271)
SHAPE_TABLES = 3
CSS = f"{ASSETS}/kwiki.css"
_H1 = re.compile(r"^#\s+\S")
_SCRIPT = re.compile(r"<(/?)(script|iframe|object|embed)\b", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass
class Context:
    root: Path
    records: dict[str, list[RecordRow]]  # artifact name -> its rows in the results store
    key: str = ""  # marks the markup kwiki generates as its own (`ensure_site_key`, sanitize.mark_own)
    manifests: dict[str, tuple[str, list[str], str | None]] = field(default_factory=dict)  # rel -> name, ...
    files: dict[str, bytes] = field(default_factory=dict)  # staged path -> content
    sources: dict[str, str] = field(default_factory=dict)  # artifact rel -> the staged page of its sources
    loaded: dict[str, Manifest | None] = field(default_factory=dict)  # artifact rel -> its manifest
    git: frozenset[str] | None = None  # the files git tracks (kwiki.core.tracked): only those are published
    owners: dict[str, Owner] = field(default_factory=dict)  # artifact rel -> the page showing its full ladder
    glossary: list[Entry] = field(default_factory=list)  # every term a page defines (kwiki.site.glossary)
    pages: list[SitePage] = field(default_factory=list)
    timelines: list[Timeline] = field(default_factory=list)  # the committed ones (kwiki.results.timelines)
    audits: Audits | None = None  # the committed profile audits (kwiki.results.audits)


@dataclass
class PageLadder:
    """An artifact's ladder as one page shows it: whole on the page that owns it, else the claimed rows."""

    rel: str  # the artifact's path
    ladder: Ladder
    wanted: list[dict[str, Scalar]]  # the parameter sets the page's claims select from it
    owner: Owner | None  # None: this page owns it
    runs: list[Ladder] = field(default_factory=list)  # the last runs of its series, `ladder` the last: its curves



def _artifact(ctx: Context, rel: str) -> tuple[str, list[str], str | None]:
    """The name the results store uses for an artifact, its variants in manifest order, its baseline."""
    from kwiki.wiki.manifest import MANIFEST, load_manifest

    refused = artifact_entry_problem(ctx.root, rel, ctx.git, must_exist=False)  # never read what is refused
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



def own(ctx: Context, markdown: str) -> str:
    """A fragment kwiki generated, marked as kwiki's (its author text is escaped; see sanitize.mark_own)."""
    return mark_own(markdown, ctx.key) if ctx.key else markdown


def _add_chart(ctx: Context, sp: SitePage, name: str, spec: dict[str, Any], alt: str, at: str | None = None) -> str:
    """Draw a chart of page `sp` and return its image, linked from the staged page `at` (default: the page's)."""
    assert sp.meta is not None  # charts are drawn for valid pages only
    path = f"{ASSETS}/charts/{sp.meta.id}/{name}.svg"
    if spec["kind"] == "timeline":
        from kwiki.site.timeline import draw_timeline

        ctx.files[path] = draw_timeline(spec)
    else:
        ctx.files[path] = (draw_curve(spec) if spec["kind"] == "curve" else draw_compare(spec)
                           if spec["kind"] == "compare" else charts.draw(spec))
    return chart(path, at or sp.rel, alt)


def _manifest(ctx: Context, rel: str) -> Manifest | None:
    """The artifact's manifest (None: refused by the containment rule, missing or invalid)."""
    from kwiki.wiki.manifest import MANIFEST, load_manifest

    rel = rel.rstrip("/")
    if rel not in ctx.loaded:
        ctx.loaded[rel] = None
        if (not artifact_entry_problem(ctx.root, rel, ctx.git, must_exist=False)
                and (ctx.root / rel / MANIFEST).is_file()):
            try:
                ctx.loaded[rel] = load_manifest(ctx.root / rel, ctx.root)
            except ManifestError:
                pass  # the artifact section shows the problem
    return ctx.loaded[rel]


def page_ladders(ctx: Context, sp: SitePage) -> list[PageLadder]:
    """Each artifact's ladder from its latest run per GPU in the results store, as this page shows it: whole
    when the page owns the artifact (kwiki.wiki.owners), else only the groups at the shapes its claims select; with
    the last runs of its series, whose median the curves draw."""
    from kwiki.results.ladders import store_runs

    meta = sp.meta
    assert meta is not None
    out = []
    for rel in sorted({r.rstrip("/") for r in meta.artifacts.values()}):
        m = _manifest(ctx, rel)
        if m is None:
            continue
        owner = ctx.owners.get(rel)
        owner = None if owner is None or owner.rel == sp.rel else owner
        wanted = claimed_params(meta, rel)
        for runs in store_runs(m, ctx.records.get(m.name, []), path=rel):
            ladder = runs[-1]
            if owner is not None:
                groups = [g for g in ladder.groups if any(matches(g.params, w) for w in wanted)]
                ladder = ladder.model_copy(update={"groups": groups, "others": []})
            out.append(PageLadder(rel, ladder, wanted, owner, runs))
    return out


def shown(pl: PageLadder) -> Ladder:
    """The ladder as its page's tables show it: a ladder the page owns with more than SHAPE_TABLES shapes (sweep sizes
    aside, which one line stands for) keeps the SHAPE_TABLES shapes its claims name first, in claim order, then the
    first in the ladder's order; the tables stay in the ladder's order. Another page's ladder: as `page_ladders` cut
    it."""
    shapes = [g for g in pl.ladder.groups if not g.sweep]
    if pl.owner is not None or len(shapes) <= SHAPE_TABLES:
        return pl.ladder

    def first_claim(g: ShapeGroup) -> int:
        return next((i for i, w in enumerate(pl.wanted) if matches(g.params, w)), len(pl.wanted))

    kept = {id(g) for g in sorted(shapes, key=first_claim)[:SHAPE_TABLES]}
    return pl.ladder.model_copy(update={"groups": [g for g in pl.ladder.groups if g.sweep or id(g) in kept]})


def ladder_page(name: str) -> str:
    """The staged path of the page of every shape of artifact `name`."""
    return f"{LADDERS_DIR}/{re.sub(r'[^A-Za-z0-9_.]+', '-', name).strip('-.') or 'artifact'}.md"


def _ladder_page(ctx: Context, sp: SitePage, rel: str, ladders: list[Ladder]) -> str:
    """Stage the page of every shape of the artifact `rel` (its ladders on each GPU model, then its bar chart of
    each shape); its staged path."""
    from kwiki.site.ladder_html import ladders_block

    name = ladders[0].artifact
    staged = ladder_page(name)
    front = yaml.safe_dump({"title": html_text(f"Every shape of {name}"), "search": {"exclude": True}},
                           allow_unicode=True, width=10_000)
    back = (f"The ladder of `{name}` at every shape it ran, from [{md_text(sp.title)}]({relative(sp.rel, staged)}), "
            f"which shows {SHAPE_TABLES} of them beside its claims.\n")
    bars = _bar_charts(ctx, sp, rel, staged)
    text = own(ctx, "\n".join(x for x in (back, ladders_block(ladders), bars) if x))
    ctx.files[staged] = f"---\n{front}---\n\n{text}".encode()
    return staged


def _ladder_tables(ctx: Context, sp: SitePage, ladders: list[PageLadder]) -> tuple[str, set[str]]:
    """The page's ladders as tables (`shown`), a link to the page of every shape of each it cut, and for each
    artifact another page owns, a link to its full ladder; and the artifacts whose shapes it cut."""
    from kwiki.site.ladder_html import ladders_block

    pairs = [(pl, shown(pl)) for pl in ladders]
    out = [ladders_block([ladder for _, ladder in pairs if ladder.groups])]
    cut = {pl.rel for pl, ladder in pairs if ladder is not pl.ladder}
    for rel in sorted(cut):
        whole = [pl.ladder for pl in ladders if pl.rel == rel]
        shapes = max(sum(not g.sweep for g in ladder.groups) for ladder in whole)
        page = _ladder_page(ctx, sp, rel, whole)
        out.append(f"Every shape of `{whole[0].artifact}` ({shapes} tables, and a bar chart of each): [its full ladder]"
                   f"({relative(page, sp.rel)}). This page shows the {SHAPE_TABLES} its claims name first.\n")
    links = {pl.owner for pl in ladders if pl.owner is not None}
    for owner in sorted(links, key=lambda o: o.rel):
        names = sorted({pl.ladder.artifact for pl in ladders if pl.owner == owner})
        out.append(f"The full ladder of {', '.join(f'`{n}`' for n in names)}: "
                   f"[{md_text(owner.title)}]({relative(owner.rel, sp.rel)}#ladder). This page shows the rows at "
                   "the shapes its claims name.\n")
    return "\n".join(x for x in out if x), cut


def _curves(ctx: Context, sp: SitePage, ladders: list[PageLadder]) -> str:
    """The best rung and the baseline across sizes (kwiki.site.curves), for the ladders this page owns: the median of
    the series' last runs, their range shaded."""
    from kwiki.site.curves import curve_specs

    assert sp.meta is not None
    out = []
    for pl in ladders:
        if pl.owner is not None:
            continue
        for spec in curve_specs(pl.ladder, sp.meta.set_aside, pl.runs):
            name = f"curve-{pl.ladder.artifact}-{gpu_slug(spec['gpu'])}-{spec['dtype'] or 'all'}"
            alt = (f"{pl.ladder.artifact}: best rung and baseline {spec['baseline']} across sizes "
                   f"{spec['dtype']}, share of {spec['roof']}"
                   + (", medians" if spec["runs"] > 1 else ""))
            out.append(_add_chart(ctx, sp, re.sub(r"[^A-Za-z0-9_.-]+", "-", name), spec, alt))
    out += _comparisons(ctx, sp, ladders)
    return "#### Across sizes\n\n" + "\n".join(out) if out else ""


def _comparisons(ctx: Context, sp: SitePage, ladders: list[PageLadder]) -> list[str]:
    """The page's `compare` entries (kwiki.site.curves.compare_spec), one chart per GPU model its artifact ran on,
    each with the fastest variant at each size in words under it; on the page that names them, owner or not."""
    from kwiki.results.comparisons import compare_spec, leader_text

    assert sp.meta is not None
    out = []
    for n, comp in enumerate(sp.meta.compare):
        rel = sp.meta.artifacts[comp.artifact].rstrip("/")
        for pl in (pl for pl in ladders if pl.rel == rel):
            spec = compare_spec(pl.runs or [pl.ladder], pl.ladder.artifact, comp.over, dict(comp.at), comp.variants)
            if spec is None:
                continue
            name = f"compare-{n}-{pl.ladder.artifact}-{gpu_slug(spec['gpu'])}"
            alt = (f"{pl.ladder.artifact}: {', '.join(comp.variants)} over {comp.over}"
                   + (f" at {spec['at']}" if spec["at"] else "") + f", share of {spec['roof']}"
                   + (", medians" if spec["runs"] > 1 else ""))
            out.append(_add_chart(ctx, sp, re.sub(r"[^A-Za-z0-9_.-]+", "-", name), spec, alt))
            out.append(f"\n*Fastest at each {md_text(comp.over)} on {md_text(spec['gpu'])}"
                       + (f" (medians of {spec['runs']} runs)" if spec["runs"] > 1 else "")
                       + f": {md_text(leader_text(spec))}.*\n")
    return out


def _timelines(ctx: Context, sp: SitePage) -> str:
    """Each committed timeline of an artifact whose ladder this page shows whole, on a GPU model the page's runs of
    it were on (kwiki.results.timelines: the untimed trace pass of a verify run), with its caption in words."""
    from kwiki.site.timeline import caption, timeline_spec

    assert sp.meta is not None
    out = []
    for rel in sorted({r.rstrip("/") for r in sp.meta.artifacts.values()}):
        owner = ctx.owners.get(rel)
        m = _manifest(ctx, rel)
        if m is None or (owner is not None and owner.rel != sp.rel):
            continue  # like its ladder's charts: on the page that owns it
        gpus = {r.gpu for r in ctx.records.get(m.name, [])}
        for n, t in enumerate(t for t in ctx.timelines if t.artifact == m.name and t.gpu in gpus):
            spec = timeline_spec(t)
            if spec is None:
                continue
            alt = (f"{m.name} {t.variant}: what each warpgroup did when, {len(spec['lanes'])} lanes, on {t.gpu}"
                   + (f", {spec['params']}" if spec["params"] else ""))
            name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"timeline-{m.name}-{gpu_slug(t.gpu or '')}-{t.variant}-{n}")
            out.append(_add_chart(ctx, sp, name, spec, alt) + "\n" + md_text(caption(spec, t.run_id)) + "\n")
    return "#### Measured timeline\n\n" + "\n".join(out) if out else ""


def _audits(ctx: Context, sp: SitePage) -> str:
    """For a page tagged `profile-audit`: every committed profile audit, declared against profiled work per level,
    as a chart, a table of its distribution and a line of words (kwiki.site.auditchart)."""
    from kwiki.site.auditchart import TAG, audit_spec, audit_table, caption, draw_audits

    assert sp.meta is not None
    if TAG not in sp.meta.tags or ctx.audits is None:
        return ""
    spec = audit_spec(ctx.audits)
    if spec is None:
        return md_text("No profile audit is committed yet (`kwiki verify --profile` runs them where ncu is found).")
    path = f"{ASSETS}/charts/{sp.meta.id}/audits.svg"
    ctx.files[path] = draw_audits(spec)
    image = chart(path, sp.rel, "declared / profiled work of every committed profile audit, per level, with the "
                                "tolerance of each level")
    table = audit_table(spec)
    lines = ["| " + " | ".join(md_text(c) for c in row) + " |" for row in table]
    lines.insert(1, "|" + " --- |" * len(table[0]))
    return f"{image}\n\n" + "\n".join(lines) + "\n\n" + md_text(caption(spec)) + "\n"


def _excerpts(ctx: Context, sp: SitePage, ladders: list[PageLadder]) -> str:
    """A link to each rung's code on the artifact's page (kwiki.site.excerpts), for the artifacts
    whose ladder this page owns."""
    from kwiki.site.excerpts import rung_index

    out = []
    for rel in sorted({pl.rel for pl in ladders if pl.owner is None}):
        m = _manifest(ctx, rel)
        if m is not None and rel in ctx.sources:
            out.append(rung_index(ctx.root, rel, m, relative(ctx.sources[rel], sp.rel)))
    return "\n".join(x for x in out if x)


def _bar_charts(ctx: Context, sp: SitePage, rel: str, at: str) -> str:
    """A bar chart of the artifact's variants per GPU and parameter set, charting what the page's claims measure,
    linked from the staged page `at`, collapsed ('' when there is none)."""
    meta = sp.meta
    assert meta is not None
    name, variants, baseline = _artifact(ctx, rel)
    keys = {k for k, v in meta.artifacts.items() if v.rstrip("/") == rel}
    measures = [c.measure for c in meta.claims if c.measure and c.measure.artifact in keys]
    wanted = [m.of.figure for m in measures if m.per is None] + [m.of.figure for m in measures if m.per]
    out = []
    for n, spec in enumerate(charts.ladder_specs(_unswept(ctx, rel, ctx.records.get(name, [])), variants,
                                                 baseline, wanted)):
        alt = f"{name}: {spec['figure']} of each variant on {spec['gpu']}, {spec['date']} {spec['params']}"
        out.append(_add_chart(ctx, sp, f"ladder-{name}-{gpu_slug(spec['gpu'])}-{n}", spec, alt.strip(), at))
    if not out:
        return ""
    body = "\n".join("    " + line if line else line for line in "\n".join(out).split("\n"))
    return f'??? note "Charts of the ladder ({len(out)})"\n\n{body}\n'


def _ladders(ctx: Context, sp: SitePage, cut: set[str]) -> str:
    """The bar charts of each artifact whose ladder this page owns, collapsed under the ladder's tables; those of a
    ladder whose shapes it `cut` are on that ladder's own page."""
    meta = sp.meta
    assert meta is not None
    out = []
    for rel in sorted({r.rstrip("/") for r in meta.artifacts.values()}):
        owner = ctx.owners.get(rel)
        if (owner is not None and owner.rel != sp.rel) or rel in cut:
            continue  # its charts are on the page that owns its ladder, or on its ladder's page
        out.append(_bar_charts(ctx, sp, rel, sp.rel))
    return "\n".join(x for x in out if x)


def _unswept(ctx: Context, rel: str, rows: list[RecordRow]) -> list[RecordRow]:
    """The rows of an artifact but those at its sweep's sizes (`shapes.sweep`): the curve draws those, and a bar
    chart per size would bury the ladder's own."""
    m = _manifest(ctx, rel)
    return without_sweep(m, rows) if m is not None else rows


def without_sweep(m: Manifest, rows: list[RecordRow]) -> list[RecordRow]:
    """`rows` of the artifact `m` but those at its sweep's sizes."""
    if m.sweep_shapes() is None:
        return rows
    groups: dict[str, tuple[dict[str, Scalar], set[str]]] = {}
    for r in rows:
        groups.setdefault(params_text(r.params), (dict(r.params), set()))[1].add(r.variant)
    swept = m.sweep_keys(groups)
    return [r for r in rows if params_text(r.params) not in swept]


def _roofline(ctx: Context, sp: SitePage) -> str:
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
        rows = [r for m in own for r in without_sweep(m, ctx.records.get(m.name, []))]  # a roofline: the ladder's
        dram = {}
        for gpu in {r.gpu for r in rows}:
            peak = dram_peak(Gpu(index=0, name=gpu, uuid=None, cc=0))
            if peak is not None:
                dram[gpu] = peak.value
        return "\n".join(
            _add_chart(ctx, sp, f"roofline-{gpu_slug(spec['gpu'])}", spec,
                       f"compute roofline of this page's artifacts on {spec['gpu']}, {spec['date']}")
            for spec in charts.compute_roofline_specs(rows, [m.name for m in own], dram, set(sp.meta.set_aside)))
    ceilings: dict[str, tuple[str, str | None]] = {}
    kept: dict[str, list[RecordRow]] = {}
    for path in sorted((ctx.root / ARTIFACTS_DIR).glob(f"*/{MANIFEST}")):
        try:
            m = load_manifest(path.parent, ctx.root)
        except ManifestError:
            continue
        if m.ceiling:
            ceilings[m.name] = (m.ceiling, m.baseline)
            kept[m.name] = without_sweep(m, ctx.records.get(m.name, []))  # sizes, not configurations: the curve's
    rows = [r for name in sorted(ceilings) for r in kept[name]]
    return "\n".join(
        _add_chart(ctx, sp, f"roofline-{gpu_slug(spec['gpu'])}", spec,
                   f"roofline of the memory-bound artifacts on {spec['gpu']}, {spec['date']}")
        for spec in charts.roofline_specs(rows, ceilings))


def _history(ctx: Context, sp: SitePage, rows: list[ClaimRow]) -> str:
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
    return (f'{image}\n<div class="kw-history" markdown>\n\n??? note "Values of the chart (measured / claimed)"\n\n'
            f"{body}\n\n</div>\n")


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


def _body(ctx: Context, sp: SitePage, page_ladders: list[PageLadder]) -> list[str]:
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
    generated = frozenset(n for r in regions
                          for n in range(r.open_line - fm.body_line, r.close_line - fm.body_line + 1))
    lines = link_first_uses(lines, ctx.glossary, sp.rel, generated)
    claims = own(ctx, claims_table(sp.meta, sp.trace))
    history = own(ctx, _history(ctx, sp, sp.history)) if claims else ""
    tables, cut = _ladder_tables(ctx, sp, page_ladders)
    ladders = own(ctx, "\n".join(x for x in (tables, _ladders(ctx, sp, cut)) if x))
    curves = own(ctx, _curves(ctx, sp, page_ladders))
    ladders += ("\n" + curves) if curves and ladders else ""
    timeline = own(ctx, _timelines(ctx, sp))
    ladders += ("\n" + timeline) if timeline and ladders else ""
    code = _excerpts(ctx, sp, page_ladders)  # the artifact's text: not marked as kwiki's (see artifact_section)
    ladders += ("\n" + code) if code and ladders else ""
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
    if sp.meta.glossary:
        out += ["", own(ctx, definitions(sp, ctx.pages))]
    if claims:
        out += ["", "## Claims", "", claims, history]
    if ladders:
        out += ["", "## Ladder", "", ladders]
    roofline = own(ctx, _roofline(ctx, sp))
    if roofline:
        out += ["", "## Roofline", "", roofline]
    audits = own(ctx, _audits(ctx, sp))
    if audits:
        out += ["", "## Profile audits, as committed", "", audits]
    by_model = own(ctx, gpumatrix.section(ctx.root, sp.meta))  # claims across GPU models, merged origins' too
    if by_model:
        out += ["", "## By GPU model", "", by_model]
    sources = sources_section(sp.meta)
    if sources:
        out += ["", own(ctx, sources)]
    # only the section's wrapper is marked: the sources it shows are the artifact's text, not kwiki's
    wrapper, _, sources = artifact_section(ctx.root, sp.meta, ctx.sources, sp.rel, ctx.git).partition("\n")
    out += ["", own(ctx, wrapper) + ("\n" + sources if sources else "")]
    return out


def artifact_pages(ctx: Context, pages: list[SitePage]) -> None:
    """One staged page per artifact that a page names, holding its sources (`render.artifact_page`) and what each
    rung adds, as code (kwiki.site.excerpts)."""
    from kwiki.site.excerpts import excerpts

    taken: set[str] = set()
    for rel in sorted({r.rstrip("/") for sp in pages if sp.meta for r in sp.meta.artifacts.values()}):
        text = artifact_page(ctx.root, rel, ctx.git)
        if text is None:
            continue
        stem = re.sub(r"[^A-Za-z0-9_.]+", "-", rel.removeprefix(ARTIFACTS_DIR + "/")).strip("-.") or "artifact"
        name, n = stem, 1
        while name in taken:
            n += 1
            name = f"{stem}-{n}"
        taken.add(name)
        ctx.sources[rel] = f"{SOURCES_DIR}/{name}.md"
        m = _manifest(ctx, rel)
        code = excerpts(ctx.root, rel, m) if m is not None else ""
        if code:  # what each rung adds, as code, before the closing of the page's block
            head, _, tail = text.rpartition("</div>")
            text = head + "\n" + code + "\n</div>" + tail
        wrapper, _, body = text.partition('<div class="kw-artifacts" markdown>')
        ctx.files[ctx.sources[rel]] = (wrapper + own(ctx, '<div class="kw-artifacts" markdown>') + body).encode()


def _front(sp: SitePage) -> str:
    """Front matter for MkDocs: title, description and tags, HTML-escaped (Material prints them raw)."""
    if sp.meta is not None:
        summary = sp.meta.summary
    else:
        data = sp.page.fm.data if sp.page.fm else {}
        summary = data.get("summary") if isinstance(data.get("summary"), str) else None
    front: dict[str, Any] = {"title": html_text(sp.title)}
    if summary:
        front["description"] = html_text(" ".join(summary.split()))
    tags = page_tags(sp)
    if tags:
        front["tags"] = tags
    return "---\n" + yaml.safe_dump(front, sort_keys=True, allow_unicode=True, width=10_000) + "---\n"


def stage_page(ctx: Context, sp: SitePage, home: str | None) -> str:
    parts = [_front(sp), ""]
    ladders = page_ladders(ctx, sp) if sp.meta is not None and sp.page.fm is not None else []
    if sp.meta is not None and sp.standing is not None and home is None:
        box = answer_box(sp.meta, sp.standing, [(pl.ladder, pl.wanted) for pl in ladders])
        if box:  # first: the answer, then where the page stands
            parts.append(own(ctx, box))
        parts.append(own(ctx, header(sp.meta, sp.standing, sp.rel, ARCHITECTURES)))
    errors = [p.format() for p in sp.page.problems if p.severity == "error"]
    if errors:
        parts.append(problems_note(errors))
    if home is not None:
        parts.append(own(ctx, home))
    if sp.page.fm is not None:
        parts += _body(ctx, sp, ladders)
    return "\n".join(parts).rstrip("\n") + "\n"

