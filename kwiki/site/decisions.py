"""Decision tables: "if your shape / dtype / size is X, use Y (measured: ..., claim ...)", one per technique family.

A row is a claim that carries a `decision` (kwiki.wiki.model.Decision): its axes are the claim's
`conditions.shape`, `conditions.dtype` and the decision's `size`, what to use is the decision's `use`, and the
figure, verdict and provenance are the claim's measurement, as `kwiki verify` wrote it. Each row names the page
and the claim it comes from. A row is left out, and the table says why below it, when its claim was not
measured (no figure to decide on), did not hold (a verdict other than reproduced or better), or confounds factors
(its comparison changes more than one: `varies` names two or more). Families, and rows within a family, are
sorted so the table reads the same from build to build.
"""

from __future__ import annotations

from dataclasses import dataclass

from kwiki.site.answer import figure_text
from kwiki.site.listings import DECISIONS, SitePage
from kwiki.site.render import md_text, relative
from kwiki.wiki.verdict import PASSING

NONE = "any"


@dataclass(frozen=True)
class Row:
    """One row of a family's table, traced to the claim it comes from."""

    family: str
    shape: str
    dtype: str
    size: str
    use: str
    over: str | None
    figure: str
    verdict: str
    page_id: str
    page_rel: str
    page_title: str
    claim: str


@dataclass(frozen=True)
class LeftOut:
    family: str
    page_id: str
    claim: str
    why: str


def rows(pages: list[SitePage]) -> tuple[dict[str, list[Row]], list[LeftOut]]:
    """Every family's rows, and the claims with a decision that stay out of the tables, with why."""
    tables: dict[str, list[Row]] = {}
    left: list[LeftOut] = []
    for sp in pages:
        meta = sp.meta
        if meta is None:
            continue
        measured = meta.measurements.claims if meta.measurements else {}
        for claim in meta.claims:
            d = claim.decision
            if d is None:
                continue
            mc = measured.get(claim.id)
            figure = figure_text(claim, mc)
            why = None
            if len(d.varies) > 1:
                why = f"its comparison changes {', '.join(d.varies)} at once (confounded)"
            elif mc is None or figure is None:
                why = "not measured"
            elif mc.verdict not in PASSING:
                why = f"it did not hold ({mc.verdict.value})"
            if why is not None:
                left.append(LeftOut(d.family, meta.id, claim.id, why))
                continue
            assert mc is not None and figure is not None
            c = claim.conditions
            tables.setdefault(d.family, []).append(Row(
                d.family, c.shape or NONE, c.dtype or NONE, d.size or NONE, d.use, d.over, figure, mc.verdict.value,
                meta.id, sp.rel, sp.title, claim.id))
    for family in tables:
        tables[family].sort(key=lambda r: (r.dtype, r.shape, r.size, r.use, r.page_id, r.claim))
    left.sort(key=lambda x: (x.family, x.page_id, x.claim))
    return dict(sorted(tables.items())), left


def table(family_rows: list[Row], from_rel: str) -> list[str]:
    """A family's table as Markdown lines; each row links the page of its claim."""
    out = ["| if your shape is | dtype | size | use | measured | from |", "| --- | --- | --- | --- | ---: | --- |"]
    for r in family_rows:
        measured = f"{r.figure}" + (f" over {r.over}" if r.over and r.over not in r.figure else "")
        out.append(f"| {md_text(r.shape)} | {md_text(r.dtype)} | {md_text(r.size)} | {md_text(r.use)} "
                   f"| {md_text(measured)} ({md_text(r.verdict)}) "
                   f"| [{md_text(r.page_title)}]({relative(r.page_rel, from_rel)}) `{r.claim}` |")
    return out


def decisions_page(pages: list[SitePage]) -> str:
    """The decision tables of every family, on one generated page."""
    tables, left = rows(pages)
    lines = ["---", 'title: "Decisions"', "---", "", '<div class="kw-decisions kw-wide" markdown>', "",
             "What to use where, from the claims kwiki measured: each row is one claim's measured figure on the "
             "page it links. Claims whose comparison changes two factors at once, and claims that were not measured "
             "or did not hold, are left out (listed at the end).", ""]
    if not tables:
        lines += ["No claim places itself in a decision table yet (a claim's `decision` field; CONTRIBUTING.md, "
                  "\"Decision tables\").", ""]
    for family, family_rows in tables.items():
        lines += [f"## {md_text(family)}", "", *table(family_rows, DECISIONS), ""]
    if left:
        lines += ["## Left out", ""]
        lines += [f"- {md_text(x.family)}: `{x.page_id}` `{x.claim}`: {md_text(x.why)}" for x in left]
        lines.append("")
    lines += ["</div>", ""]
    return "\n".join(lines)
