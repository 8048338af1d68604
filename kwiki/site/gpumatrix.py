"""The "by GPU model" section of a page: each claim's verdict and median on every GPU model the stores hold.

The data is kwiki.results.matrix (ours and merged origins'); this module lays it out as one table, a column per
GPU model, and says where each figure comes from. Shown when a page's claims were judged on more than one GPU
model, or on one whose figures come from a merged origin.
"""

from __future__ import annotations

from pathlib import Path

from kwiki.core.numbers import fmt
from kwiki.results.matrix import NOT_APPLICABLE, NOT_MEASURED, Cell, Matrix, matrix
from kwiki.results.merge import LOCAL
from kwiki.site.render import VERDICT_CLASS, badge, md_text
from kwiki.wiki.model import PageMeta
from kwiki.wiki.verdict import Verdict


def _cell(cell: Cell) -> str:
    if cell.verdict == NOT_APPLICABLE:
        return badge("not applicable", "kw-verdict", "kw-v-none") + f" {md_text(cell.why)}"
    if cell.verdict == NOT_MEASURED:
        return badge("not measured", "kw-verdict", "kw-v-none")
    try:
        kind = VERDICT_CLASS.get(Verdict(cell.verdict), "none")
    except ValueError:
        kind = "none"
    figure = f" {fmt(cell.median)} {md_text(cell.unit or '')}".rstrip() if cell.median is not None else ""
    runs = f" (median of {cell.runs} runs)" if cell.runs and cell.runs > 1 else ""
    origin = "" if cell.origin == LOCAL else f" from **{md_text(cell.origin)}**"
    date = f", {md_text((cell.date or '')[:10])}" if cell.date else ""
    return f"{badge(cell.verdict, 'kw-verdict', f'kw-v-{kind}')}{figure}{runs}{origin}{date}"


def section(root: Path, meta: PageMeta) -> str:
    """The section's Markdown, or '' when the page's claims were judged on one GPU model of ours only."""
    m: Matrix = matrix(root, meta.id, meta.claims)
    merged = any(c.origin not in (None, LOCAL) for row in m.cells.values() for c in row)
    if not m.cells or (len(m.models) < 2 and not merged):
        return ""
    head = ["claim", *m.models]
    lines = ["| " + " | ".join(md_text(h) for h in head) + " |", "|" + " --- |" * len(head)]
    for claim, row in m.cells.items():
        lines.append("| " + " | ".join([md_text(claim), *(_cell(c) for c in row)]) + " |")
    note = ("Each cell: the latest verdict of the claim on that GPU model and the median it stood on. Figures "
            "\"from\" an origin were measured by another lab and merged (`kwiki results merge`): they are shown, "
            "never judged with ours, and never change this page's verdicts.")
    return "\n".join(['<div class="kw-gpu-matrix kw-wide" markdown data-search-exclude>', "", *lines, "",
                      note, "", "</div>", ""])
