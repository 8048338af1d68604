"""Markdown tables kwiki writes into pages (claims, ladder) and the terminal report of a run."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from kwiki.core.numbers import NONE, fmt, fmt_spread, params_text
from kwiki.verify.claims import ClaimResult
from kwiki.verify.gates import Gating
from kwiki.verify.plan import PlannedArtifact
from kwiki.verify.record import Record
from kwiki.verify.run import RunOutcome
from kwiki.verify.series import drift_text
from kwiki.wiki.model import Claim, MeasuredClaim, Provenance
from kwiki.wiki.verdict import PASSING, RUNS, Verdict


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


SPREAD_NOTES = {
    "run": "± is the run's half inter-quartile range",
    "series": "each figure is the median over the last runs of its series, ± the run-to-run band "
              "(3 MAD, at least 2%), with the lowest and highest run",
}


def provenance_line(p: Provenance, spread: str = "run") -> str:
    """The line under a generated table; `spread` says what its ± means ('run' or 'series')."""
    commit = f"commit {p.commit}{' (dirty)' if p.dirty else ''}" if p.commit else "no commit"
    return (f"*Measured by `kwiki verify` on {provenance_text(p, full=True)} on {p.date}; {commit}; "
            f"artifact {p.artifact_hash or '?'}; {SPREAD_NOTES[spread]}.*\n")


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


def runs_text(mc: MeasuredClaim | None) -> str:
    """'3 runs, 4.381–4.452' or '1 of 3 runs: provisional': what a figure stands on ('—' before series)."""
    if mc is None or mc.runs is None:
        return NONE
    spread = f", {fmt(mc.range[0])}–{fmt(mc.range[1])}" if mc.range and mc.runs > 1 else ""
    if mc.runs < RUNS:
        return f"{mc.runs} of {RUNS} runs{spread}: provisional"
    return f"{mc.runs} runs{spread}"


def measured_text(mc: MeasuredClaim, unit: str) -> str:
    """'4.410 TB/s ±2.0% (+8.4% vs the series median)': a measured figure with its band and drift."""
    if mc.value is None:
        return NONE
    value = f"{fmt(mc.value)} {mc.unit or unit}{fmt_spread(mc.spread)}"
    if mc.drift is not None:
        value += f" (latest run {drift_text(mc.drift)})"
    elif mc.change and mc.change not in ("new", "same"):
        value += f" ({mc.change})"
    return value


def claims_table(claims: list[Claim], measured: Mapping[str, MeasuredClaim], *,
                 text: Callable[[str], str] = _cell,
                 verdict: Callable[[MeasuredClaim | None], str] = _plain_verdict) -> str:
    """The claims table, one definition for the page (plain Markdown) and the site (`text` escapes
    for Markdown, `verdict` draws a badge): claimed, measured, ratio to the claim, verdict, the runs
    it stands on, where."""
    rows = ["| claim | claimed | measured | ratio | verdict | runs | provenance |",
            "| --- | --- | ---: | ---: | --- | --- | --- |"]
    for claim in claims:
        mc = measured.get(claim.id)
        cond = _conditions(claim)
        cell = f"{text(claim.statement)}<br><small>`{claim.id}`{' · ' + text(cond) if cond else ''}</small>"
        value = ratio = NONE
        if mc is not None and mc.value is not None:
            value = measured_text(mc, claim.unit)
            ratio = f"{mc.value / claim.reference:.2f}×" if claim.reference else NONE
        where = provenance_text(mc.provenance) if mc and mc.provenance else NONE
        rows.append(f"| {cell} | {text(claim.describe())} | {text(value)} | {ratio} | {verdict(mc)} "
                    f"| {text(runs_text(mc))} | {text(where)} |")
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


def _rate_vs(record: Record, base: Record) -> float:
    """How much faster `record` went than `base`, in like units only: FLOP/s over FLOP/s when both
    declare FLOPs, else bytes/s over bytes/s when both declare bytes, else the inverse ratio of times.

    Ratios of rates compare runs that do different amounts of work fairly (a read stream against a
    copy that moves each byte twice); for the same work they equal the ratio of times.
    """
    mine, theirs = record.figures(), base.figures()
    for unit in ("tflop_per_s", "gb_per_s"):
        if mine.get(unit) and theirs.get(unit):
            return mine[unit] / theirs[unit]
    return theirs["time_us"] / mine["time_us"]


def _sm_mhz(record: Record) -> str:
    """The SM clock the record ran at, where the run read it ('—' where it did not): the range over its
    samples (protocol 2; before and after them in protocol 1), and the share of its sampling window
    spent under the power cap when there was any ('1740–1755, 100% power-capped')."""
    c = record.clocks
    clocks = [v for v in (c.sm_mhz_min, c.sm_mhz_max) if v is not None] or \
        [v for v in (c.sm_mhz_before, c.sm_mhz_after) if v is not None]
    if not clocks:
        mhz = record.figures().get("sm_mhz")
        return f"{mhz:.0f}" if mhz is not None else NONE
    low, high = min(clocks), max(clocks)
    text = f"{low:.0f}" if low == high else f"{low:.0f}–{high:.0f}"
    if c.window_s and c.power_cap_s:
        text += f", {c.power_cap_s / c.window_s:.0%} power-capped"
    return text


def ladder_table(planned: PlannedArtifact, outcomes: list[RunOutcome], gating: Gating | None = None) -> str:
    """Every variant of one artifact run: time, throughput, ratio to the baseline, what changed, SM clock.

    A record a gate failed keeps its row and time, but shows no rate: the gate stands in its place."""
    assert planned.manifest is not None
    m = planned.manifest
    records = [r for o in outcomes for r in o.records]
    base: dict[str, Record] = {}
    sol: dict[str, float] = {}
    for r in records:
        if r.variant == m.baseline and r.timing is not None:
            base[params_text(r.params)] = r
        if r.variant == m.ceiling and r.timing is not None and r.bytes:
            sol[params_text(r.params)] = r.figures()["gb_per_s"]
    head = f"**{m.title}** (`{planned.path}`, target {planned.run_target}"
    head += f"; baseline `{m.baseline}`)\n\n" if m.baseline else ")\n\n"
    rows = [("| variant | what changed | params | time (us) | throughput | rate vs baseline | of speed of light "
             "| SM MHz | registers |"),
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    order = {v.name: i for i, v in enumerate(m.variants)}
    for r in sorted(records, key=lambda r: (params_text(r.params), order.get(r.variant, 99))):
        variant = m.variant(r.variant)
        desc = variant.description if variant else ""
        if r.timing is None:
            what = "profiled (no timing)" if r.check.passed else "check failed"
            rows.append(f"| `{r.variant}` | {_cell(desc)} | {_cell(params_text(r.params))} | {what} | — | — | — "
                        f"| {_sm_mhz(r)} | {_cell(str(r.extra.get('registers', '—')))} |")
            continue
        refused = gating.failed(r) if gating else []
        if refused:
            rows.append(f"| `{r.variant}` | {_cell(desc)} | {_cell(params_text(r.params))} "
                        f"| {fmt(r.timing.median_us)} | refused: gate {', '.join(f.gate for f in refused)} | — | — "
                        f"| {_sm_mhz(r)} | {_cell(str(r.extra.get('registers', '—')))} |")
            continue
        baseline = base.get(params_text(r.params))
        vs = f"{fmt(_rate_vs(r, baseline), 3)}x" if baseline is not None else "—"
        ceiling = sol.get(params_text(r.params))
        of_sol = f"{r.figures()['gb_per_s'] / ceiling:.0%}" if ceiling and r.bytes else "—"
        regs = r.extra.get("registers", "—")
        rows.append("| " + " | ".join(_cell(str(c)) for c in (
            f"`{r.variant}`", desc, params_text(r.params), fmt(r.timing.median_us) + fmt_spread(r.timing.spread),
            _figure(r, m.ceiling is not None), vs, of_sol, _sm_mhz(r), regs)) + " |")
    failed = [o for o in outcomes if o.status != "ok"]
    for o in failed:
        rows.append(f"| `{','.join(o.variants)}` | run {o.status}: {_cell(o.message[:120])} "
                    "| | — | — | — | — | — | — |")
    for name in planned.not_applicable:
        v = m.variant(name)
        rows.append(f"| `{name}` | {_cell(v.description if v else '')} | not applicable on "
                    f"{planned.run_target} (targets {', '.join(v.targets) if v else '?'}) | — | — | — | — | — | — |")
    return head + "\n".join(rows) + "\n"


def terminal_table(results: list[ClaimResult]) -> str:
    header = ("page", "artifact", "claim", "variant.figure", "measured", "runs", "claimed", "verdict")
    rows = [header]
    for r in results:
        measured = "—"
        if r.median is not None:
            measured = f"{fmt(r.median)} {r.unit}{fmt_spread(r.band)}"
        elif r.value is not None:
            measured = f"{fmt(r.value)} {r.unit}{fmt_spread(r.spread)}"
        runs = "—" if r.runs is None else f"{r.runs}/{RUNS}" + (
            f" {fmt(r.range[0])}–{fmt(r.range[1])}" if r.range and r.runs > 1 else "")
        verdict = r.verdict.value + (" [provisional]" if r.provisional else "")
        if r.drift is not None:
            verdict += f" [drifted {r.drift * 100:+.1f}%]"
        if r.gates:
            verdict += " [GATE " + ", ".join(g.name for g in r.gates) + "]"
        art = (r.artifact or "—").removeprefix("artifacts/")
        rows.append((r.page, art, r.claim, r.figure, measured, runs, r.claimed, verdict))
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
    """One line per claim that did not pass, with why, and one per claim whose latest run drifted."""
    lines = []
    for r in results:
        if r.detail and r.verdict not in PASSING | {Verdict.not_testable}:
            lines.append(f"{r.page}: {r.claim}: {r.verdict.value}: {r.detail}")
        if r.drift is not None and r.value is not None:
            lines.append(f"{r.page}: {r.claim}: drifted: this run {fmt(r.value)} {r.unit} is {drift_text(r.drift)} "
                         f"({fmt(r.median)} over {r.runs} runs, band ±{(r.band or 0) * 100:.1f}%)")
    return "\n".join(lines)


def gates_section(gating: Gating) -> str:
    """The GATES section of the terminal report: every record a gate failed, loudly, then the warnings."""
    failed = [(a, r, f) for a, r, f in gating.findings if f.fail]
    warned = [(a, r, f) for a, r, f in gating.findings if not f.fail]
    if not failed and not warned:
        return ""
    lines = ["GATES"]
    if failed:
        lines.append(f"  {len(failed)} records FAILED a gate: their figures are refused (no claim built on them "
                     "is reproduced, no page shows them)")
        lines += [f"  FAILED {f.gate}: {a} {r.variant} [{params_text(r.params)}]: {f.reason}" for a, r, f in failed]
    if warned:
        lines += [f"  warning {f.gate}: {a} {r.variant} [{params_text(r.params)}]: {f.reason}" for a, r, f in warned]
    return "\n".join(lines)


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True)
