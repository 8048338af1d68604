"""The profile audits as committed: how far each audited record's declared work sits from what Nsight Compute counted,
per level, against the tolerance that level is held to.

`audit_spec` reads kwiki.results.audits (what `kwiki verify` wrote to results/audits/; the site only reads it) into
chart data: per level (DRAM bytes, L2 bytes, FLOPs) the declared/profiled ratio of every audit that counted
something, and how many failed. `draw_audits` draws one strip per level, a dot per audit and the tolerance as a red
line; `audit_table` gives the same distribution in numbers (audits, artifacts, min, median, 90th percentile, max,
tolerance, failed), and a page tagged `profile-audit` shows both (kwiki.site.pages). Nothing here is typed in: an
empty results/audits/ draws nothing.
"""

from __future__ import annotations

import html
from typing import Any

from kwiki.core.numbers import fmt
from kwiki.results.audits import FLOPS_TOLERANCE, Audits, distribution, tolerance_for
from kwiki.site.charts import GRID, INK, MUTED, PALETTE, TEXT, WIDTH, _lines, _n, _svg, _text, _ticks, _title, _wrap

TAG = "profile-audit"  # the page tag that asks for the section
FAIL = "#c62828"
LEVELS = {"dram": "DRAM bytes", "l2": "L2 bytes", "flops": "FLOPs"}


def audit_spec(audits: Audits) -> dict[str, Any] | None:
    """Chart data of every committed audit that counted something: per level, (artifact, variant, ratio) and the
    failed count; None when there is none."""
    levels: dict[str, dict[str, Any]] = {}
    gpus = set()
    for row in audits.rows.values():
        if not row.counted:
            continue
        gpus.add(row.gpu)
        pairs = [(row.bytes_level, row.bytes_declared, row.bytes_profiled), ("flops", row.flops_declared,
                                                                          row.flops_profiled)]
        for level, declared, profiled in pairs:
            if declared is None or not profiled:
                continue
            entry = levels.setdefault(level, {"points": [], "failed": 0, "artifacts": set()})
            entry["points"].append((row.artifact, row.variant, declared / profiled))
            entry["artifacts"].add(row.artifact)
            entry["failed"] += 0 if row.passed else 1
    if not levels:
        return None
    out = []
    for level in sorted(levels, key=lambda lv: (list(LEVELS).index(lv) if lv in LEVELS else len(LEVELS), lv)):
        e = levels[level]
        tol = FLOPS_TOLERANCE if level == "flops" else tolerance_for(level)
        out.append({"level": level, "label": LEVELS.get(level, level), "tolerance": tol,
                    "points": sorted(e["points"]), "failed": e["failed"], "artifacts": len(e["artifacts"])})
    return {"kind": "audits", "gpus": sorted(gpus), "levels": out}


def audit_table(spec: dict[str, Any]) -> list[list[str]]:
    """The distribution in numbers, a row per level (header first)."""
    rows = [["level", "audits", "artifacts", "min", "median", "90th pct", "max", "fails above", "failed"]]
    for lv in spec["levels"]:
        d = distribution((lv["level"], r) for _, _, r in lv["points"])[lv["level"]]
        tol = lv["tolerance"]
        rows.append([lv["label"], str(len(lv["points"])), str(lv["artifacts"]), fmt(d["min"], 3), fmt(d["median"], 3),
                     fmt(d["p90"], 4), fmt(d["max"], 4), fmt(1 + tol, 3) if tol is not None else "not audited",
                     str(lv["failed"])])
    return rows


def draw_audits(spec: dict[str, Any]) -> bytes:
    """A strip per level: each audit a dot at declared / profiled, the level's tolerance a red line, 1.0 marked."""
    title = "Declared / profiled work of every committed profile audit" + (
        f" on {', '.join(spec['gpus'])}" if spec["gpus"] else "")
    body, top = _title(title)
    top += 10
    left, right, strip = 96, WIDTH - 22, 34
    tols = [lv["tolerance"] for lv in spec["levels"] if lv["tolerance"] is not None]
    low = min(r for lv in spec["levels"] for _, _, r in lv["points"])
    high = max([r for lv in spec["levels"] for _, _, r in lv["points"]] + [1 + t for t in tols])
    ticks = _ticks(min(low, 0.9), max(high, 1.0), 4)
    scale = (right - left) / ((ticks[-1] - ticks[0]) or 1.0)

    def x(v: float) -> float:
        return left + (v - ticks[0]) * scale

    bottom = top + strip * len(spec["levels"])
    for t in ticks:
        body.append(f'<line x1="{_n(x(t))}" y1="{top - 4}" x2="{_n(x(t))}" y2="{_n(bottom + 4)}" stroke="{GRID}"/>')
        body.append(_text(x(t), bottom + 20, fmt(t, 3, trim=True), anchor="middle", fill=MUTED))
    for i, lv in enumerate(spec["levels"]):
        y0 = top + i * strip
        body.append(_text(left - 6, y0 + strip / 2 + 5, lv["label"], anchor="end"))
        if lv["tolerance"] is not None:
            lx = x(1 + lv["tolerance"])
            body.append(f'<line x1="{_n(lx)}" y1="{_n(y0 + 2)}" x2="{_n(lx)}" y2="{_n(y0 + strip - 2)}" '
                        f'stroke="{FAIL}" stroke-width="2"><title>fails above {fmt(1 + lv["tolerance"], 3)}'
                        "</title></line>")
        for n, (artifact, variant, ratio) in enumerate(lv["points"]):
            jitter = (n * 7 % 5 - 2) * (strip - 12) / 5
            tip = f"{artifact} {variant}: declared / profiled {fmt(ratio, 4)}"
            body.append(f'<circle cx="{_n(x(ratio))}" cy="{_n(y0 + strip / 2 + jitter)}" r="3" '
                        f'fill="{PALETTE[0]}" fill-opacity="0.6"><title>{html.escape(tip)}</title></circle>')
    body.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{_n(bottom + 4)}" stroke="{INK}"/>')
    body.append(_text((left + right) / 2, bottom + 38, "declared / profiled (above the red line: fails)",
                      anchor="middle", fill=MUTED))
    lines = _wrap("A dot per audited record. Left of 1: the record declares less than the kernel moves (honest, "
                  "e.g. a re-read); right of the red line: it declares more than was counted.", WIDTH - 20)
    body += _lines(10, bottom + 62, lines, fill=MUTED)
    return _svg(WIDTH, bottom + 62 + len(lines) * (TEXT + 4), title, body)


def caption(spec: dict[str, Any]) -> str:
    """The chart in one line of words."""
    parts = []
    for lv in spec["levels"]:
        worst = max(r for _, _, r in lv["points"])
        parts.append(f"{lv['label']}: {len(lv['points'])} audits of {lv['artifacts']} artifacts, the highest "
                     f"{fmt(worst, 4)}" + (f" against a limit of {fmt(1 + lv['tolerance'], 3)}"
                                           if lv["tolerance"] is not None else ", not yet held to a tolerance")
                     + (f", {lv['failed']} failed" if lv["failed"] else ", none failed"))
    return "; ".join(parts) + ". Read from results/audits/, as kwiki verify --profile committed them."
