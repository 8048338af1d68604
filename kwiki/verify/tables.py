"""Markdown tables kwiki writes into pages (claims, ladder) and the terminal report of a run."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from kwiki.core.numbers import NONE, fmt, fmt_spread, params_text
from kwiki.verify.claims import ClaimResult
from kwiki.verify.plan import PlannedArtifact
from kwiki.verify.record import Record
from kwiki.verify.run import RunOutcome
from kwiki.wiki.model import Claim, MeasuredClaim, Provenance
from kwiki.wiki.verdict import PASSING, Verdict


def provenance_text(p: Provenance, *, full: bool = False) -> str:
    """Where and when a figure was measured: 'NVIDIA H200, driver 580.1, CUDA 13.0, 2026-11-29, 833ed22';
    `full` adds the architecture and nvcc, and spells the commit out."""
    parts = [p.gpu]
    if full and p.arch:
        parts.append(p.arch)
    if p.driver:
        parts.append(f"driver {p.driver}")
    if p.cuda:
        parts.append(f"CUDA {p.cuda}")
    if full:
        if p.nvcc:
            parts.append(f"nvcc {p.nvcc}")
        return ", ".join(parts)
    parts.append(p.date[:10])
    if p.commit:
        parts.append(p.commit[:10] + ("+dirty" if p.dirty else ""))
    return ", ".join(parts)


def provenance_line(p: Provenance) -> str:
    commit = f"commit {p.commit}{' (dirty)' if p.dirty else ''}" if p.commit else "no commit"
    return (f"*Measured by `kwiki verify` on {provenance_text(p, full=True)} on {p.date}; {commit}; "
            f"artifact {p.artifact_hash or '?'}; ± is the run's half inter-quartile range.*\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _conditions(claim: Claim) -> str:
    c = claim.conditions
    text = ", ".join(str(b) for b in (c.gpu, c.arch, c.shape, c.dtype, c.variant) if b)
    if claim.source:
        text += ("; " if text else "") + f"source: {claim.source}"
    return text


def _plain_verdict(mc: MeasuredClaim | None) -> str:
    if mc is None:
        return "not measured"
    return mc.verdict.value + (f" ({mc.detail})" if mc.detail and mc.value is None else "")


def claims_table(claims: list[Claim], measured: Mapping[str, MeasuredClaim], *,
                 text: Callable[[str], str] = _cell,
                 verdict: Callable[[MeasuredClaim | None], str] = _plain_verdict) -> str:
    """The claims table, one definition for the page (plain Markdown) and the site (`text` escapes
    for Markdown, `verdict` draws a badge): claimed, measured, ratio to the claim, verdict, where."""
    rows = ["| claim | claimed | measured | ratio | verdict | provenance |", "| --- | --- | ---: | ---: | --- | --- |"]
    for claim in claims:
        mc = measured.get(claim.id)
        cond = _conditions(claim)
        cell = f"{text(claim.statement)}<br><small>`{claim.id}`{' · ' + text(cond) if cond else ''}</small>"
        value = ratio = NONE
        if mc is not None and mc.value is not None:
            value = f"{fmt(mc.value)} {mc.unit or claim.unit}{fmt_spread(mc.spread)}"
            if mc.change and mc.change not in ("new", "same"):
                value += f" ({mc.change})"
            ratio = f"{mc.value / claim.reference:.2f}×" if claim.reference else NONE
        where = provenance_text(mc.provenance) if mc and mc.provenance else NONE
        rows.append(f"| {cell} | {text(claim.describe())} | {text(value)} | {ratio} | {verdict(mc)} | {text(where)} |")
    return "\n".join(rows) + "\n"


def _figure(record: Record, memory_bound: bool) -> str:
    figs = record.figures()
    if "tb_per_s" in figs and memory_bound:
        return f"{fmt(figs['tb_per_s'])} TB/s"
    if "tflop_per_s" in figs:
        return f"{fmt(figs['tflop_per_s'])} TFLOP/s"
    if "tb_per_s" in figs:
        return f"{fmt(figs['tb_per_s'])} TB/s"
    return "—"


def _rate(record: Record) -> float:
    """How fast a record went: its declared work per second (FLOP/s, else bytes/s), else 1/time.

    Ratios of rates compare runs that do different amounts of work fairly (a read stream against a
    copy that moves each byte twice); for the same work they equal the ratio of times.
    """
    figs = record.figures()
    return figs.get("tflop_per_s") or figs.get("gb_per_s") or 1.0 / figs["time_us"]


def ladder_table(planned: PlannedArtifact, outcomes: list[RunOutcome]) -> str:
    """Every variant of one artifact run: time, throughput, ratio to the baseline, what changed."""
    assert planned.manifest is not None
    m = planned.manifest
    records = [r for o in outcomes for r in o.records]
    base: dict[str, float] = {}
    sol: dict[str, float] = {}
    for r in records:
        if r.variant == m.baseline and r.timing is not None:
            base[params_text(r.params)] = _rate(r)
        if r.variant == m.ceiling and r.timing is not None and r.bytes:
            sol[params_text(r.params)] = r.figures()["gb_per_s"]
    head = f"**{m.title}** (`{planned.path}`, target {planned.run_target}"
    head += f"; baseline `{m.baseline}`)\n\n" if m.baseline else ")\n\n"
    rows = ["| variant | what changed | params | time (us) | throughput | rate vs baseline | of speed of light | registers |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    order = {v.name: i for i, v in enumerate(m.variants)}
    for r in sorted(records, key=lambda r: (params_text(r.params), order.get(r.variant, 99))):
        desc = (m.variant(r.variant).description if m.variant(r.variant) else "")
        if r.timing is None:
            rows.append(f"| `{r.variant}` | {_cell(desc)} | {_cell(params_text(r.params))} | check failed | — | — | — | — |")
            continue
        ratio = base.get(params_text(r.params))
        vs = f"{fmt(_rate(r) / ratio, 3)}x" if ratio else "—"
        ceiling = sol.get(params_text(r.params))
        of_sol = f"{r.figures()['gb_per_s'] / ceiling:.0%}" if ceiling and r.bytes else "—"
        regs = r.extra.get("registers", "—")
        rows.append("| " + " | ".join(_cell(str(c)) for c in (
            f"`{r.variant}`", desc, params_text(r.params), fmt(r.timing.median_us) + fmt_spread(r.timing.spread),
            _figure(r, m.ceiling is not None), vs, of_sol, regs)) + " |")
    failed = [o for o in outcomes if o.status != "ok"]
    for o in failed:
        rows.append(f"| `{','.join(o.variants)}` | run {o.status}: {_cell(o.message[:120])} | | — | — | — | — | — |")
    for name in planned.not_applicable:
        v = m.variant(name)
        rows.append(f"| `{name}` | {_cell(v.description if v else '')} | not applicable on "
                    f"{planned.run_target} (targets {', '.join(v.targets) if v else '?'}) | — | — | — | — | — |")
    return head + "\n".join(rows) + "\n"


def terminal_table(results: list[ClaimResult]) -> str:
    header = ("page", "artifact", "claim", "variant.figure", "measured", "claimed", "verdict")
    rows = [header]
    for r in results:
        measured = f"{fmt(r.value)} {r.unit}{fmt_spread(r.spread)}" if r.value is not None else "—"
        verdict = r.verdict.value + (f" [{r.change}]" if r.change and r.change not in ("new", "same") else "")
        art = (r.artifact or "—").removeprefix("artifacts/")
        rows.append((r.page, art, r.claim, r.figure, measured, r.claimed, verdict))
    widths = [min(44, max(len(row[i]) for row in rows)) for i in range(len(header))]
    out = []
    for n, row in enumerate(rows):
        out.append("  ".join(_clip(cell, 44).ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def details(results: list[ClaimResult]) -> str:
    """One line per claim that did not pass, with why."""
    lines = []
    for r in results:
        if r.detail and r.verdict not in PASSING | {Verdict.not_testable}:
            lines.append(f"{r.page}: {r.claim}: {r.verdict.value}: {r.detail}")
    return "\n".join(lines)


def dumps(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True)
