"""Markdown tables kwiki writes into pages (claims, ladder) and the terminal report of a run."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from kwiki.core.numbers import NONE, fmt, fmt_spread, params_text
from kwiki.verify import ladders
from kwiki.verify import roof as roofs
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
                 verdict: Callable[[MeasuredClaim | None], str] = _plain_verdict, provenance: bool = True) -> str:
    """The claims table, one definition for the page (plain Markdown) and the site (`text` escapes
    for Markdown, `verdict` draws a badge): claimed, measured, ratio to the claim, verdict, the runs
    it stands on, where (without `provenance`: no where column, the site says it once below the table)."""
    rows = ["| claim | claimed | measured | ratio | verdict | runs |" + (" provenance |" if provenance else ""),
            "| --- | --- | ---: | ---: | --- | --- |" + (" --- |" if provenance else "")]
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
                    f"| {text(runs_text(mc))} |" + (f" {text(where)} |" if provenance else ""))
    return "\n".join(rows) + "\n"


def _sm_mhz(record: Record) -> str:
    """The SM clock the record ran at, where the run read it ('—' where it did not): the range over its
    samples (protocol 2; before and after them in protocol 1), and the share of its sampling window
    spent under the power cap when there was any ('1740–1755, 100% power-capped')."""
    return _clock_text(*ladders.record_clock(record))


def _clock_text(mhz: tuple[float, float] | None, capped: float | None) -> str:
    if mhz is None:
        return NONE
    low, high = mhz
    text = f"{low:.0f}" if low == high else f"{low:.0f}–{high:.0f}"
    if capped:
        text += f", {capped:.0%} power-capped"
    return text


def _rung_cells(rung: ladders.Rung, params: str) -> list[str]:
    """One row of the page's ladder table (cells not yet escaped)."""
    regs = str(rung.registers) if rung.registers is not None else NONE
    clock = _clock_text(rung.sm_mhz, rung.power_capped)
    head = [f"`{rung.variant}`", rung.description or "", params]
    if rung.status in ("profiled", "check-failed"):
        what = "profiled (no timing)" if rung.status == "profiled" else "check failed"
        return [*head, what, NONE, NONE, NONE, clock, regs]
    if rung.status == "refused":
        gates = ", ".join(g.name for g in rung.gates)
        return [*head, fmt(rung.time_us), f"refused: gate {gates}", NONE, NONE, clock, regs]
    if rung.status in ("run-failed", "not-applicable"):
        return [head[0], rung.note or "" if rung.status == "run-failed" else head[1],
                "" if rung.status == "run-failed" else rung.note or "", NONE, NONE, NONE, NONE, NONE, NONE]
    rate = f"{fmt(rung.rate)} {rung.rate_unit}" if rung.rate is not None else NONE
    vs = f"{fmt(rung.vs_baseline, 3)}x" if rung.vs_baseline is not None else NONE
    sol = f"{rung.of_speed_of_light:.0%}" if rung.of_speed_of_light is not None else NONE
    return [*head, fmt(rung.time_us) + fmt_spread(rung.spread), rate, vs, sol, clock, regs]


def ladder_table(planned: PlannedArtifact, outcomes: list[RunOutcome], gating: Gating | None = None) -> str:
    """Every variant of one artifact run: time, throughput, ratio to the baseline, what changed, SM clock
    (the data: kwiki.verify.ladders).

    A record a gate failed keeps its row and time, but shows no rate: the gate stands in its place."""
    ladder = ladders.from_run(planned, outcomes, gating)
    head = f"**{ladder.title}** (`{planned.path}`, target {planned.run_target}"
    head += f"; baseline `{ladder.baseline}`)\n\n" if ladder.baseline else ")\n\n"
    rows = [("| variant | what changed | params | time (us) | throughput | rate vs baseline | of speed of light "
             "| SM MHz | registers |"),
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for group in ladder.groups:
        rows += ["| " + " | ".join(_cell(c) for c in _rung_cells(r, params_text(group.params))) + " |"
                 for r in group.rows]
    rows += ["| " + " | ".join(_cell(c) for c in _rung_cells(r, "")) + " |" for r in ladder.others]
    return head + "\n".join(rows) + "\n" + roof_note(planned, outcomes)


def roof_note(planned: PlannedArtifact, outcomes: list[RunOutcome]) -> str:
    """The line under a memory-bound ladder that says how its speed of light was obtained ('' without a roof)."""
    ceiling = planned.manifest.ceiling if planned.manifest else None
    fitted = roofs.of_run([r for o in outcomes for r in o.records], ceiling)
    return f"\n*The {roofs.describe(fitted)}.*\n" if fitted is not None else ""


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
