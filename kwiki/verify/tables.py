"""Markdown tables kwiki writes into pages (the ladder of the run it writes back, as data by `from_run`, then as a
table) and the terminal report of a run (the claims table and provenance line: kwiki.results.tables)."""

from __future__ import annotations

import json
from typing import Any

from kwiki.core.numbers import NONE, fmt, fmt_spread, params_text
from kwiki.core.strict import Scalar
from kwiki.results.ladders import (
    Entry,
    Ladder,
    Rung,
    about,
    ladder_groups,
    ladder_of,
    profiled,
    record_clock,
    registers_of,
    sweep_note,
)
from kwiki.results.record import Record
from kwiki.results.series import drift_text
from kwiki.results.tables import md_cell
from kwiki.verify import roof as roofs
from kwiki.verify.types import ClaimResult, Gating, PlannedArtifact, RunOutcome
from kwiki.wiki.owners import matches
from kwiki.wiki.verdict import PASSING, RUNS, Verdict

# ---------------------------------------------------------------- the ladder of this run


def entry_of(record: Record, gating: Gating | None) -> Entry:
    """What a ladder needs of one record of this run, with the gates it failed."""
    mhz, capped = record_clock(record)
    figures = record.figures()
    return Entry(record.variant, dict(record.params), record.check.passed,
                 figures if record.timing is not None or record.roof is not None else {},
                 record.timing.spread if record.timing else None, registers_of(record.extra.get("registers")),
                 mhz, capped, [f.as_gate() for f in gating.failed(record)] if gating else [],
                 profiled=profiled(figures, record.bytes_level))


def from_run(planned: PlannedArtifact, outcomes: list[RunOutcome], gating: Gating | None = None) -> Ladder:
    """The ladder of the run `kwiki verify` just made: its records, failed runs and the variants that do
    not apply on its target."""
    m = planned.manifest
    assert m is not None
    entries = [entry_of(r, gating) for o in outcomes for r in o.records]
    ladder = ladder_of(m, entries, path=planned.path, target=planned.run_target)
    for o in outcomes:
        if o.status != "ok":
            ladder.others.append(Rung(variant=",".join(o.variants), status="run-failed",
                                      note=f"run {o.status}: {o.message[:120]}"))
    for name in planned.not_applicable:
        v = m.variant(name)
        ladder.others.append(Rung(
            variant=name, **about(v), status="not-applicable",
            note=f"not applicable on {planned.run_target} (targets {', '.join(v.targets) if v else '?'})"))
    return ladder


# ---------------------------------------------------------------- the tables


def _sm_mhz(record: Record) -> str:
    """The SM clock the record ran at, where the run read it ('—' where it did not): the range over its
    samples (protocol 2; before and after them in protocol 1), and the share of its sampling window
    spent under the power cap when there was any ('1740–1755, 100% power-capped')."""
    return _clock_text(*record_clock(record))


def _clock_text(mhz: tuple[float, float] | None, capped: float | None) -> str:
    if mhz is None:
        return NONE
    low, high = mhz
    text = f"{low:.0f}" if low == high else f"{low:.0f}–{high:.0f}"
    if capped:
        text += f", {capped:.0%} power-capped"
    return text


def _rung_cells(rung: Rung, params: str) -> list[str]:
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


def ladder_lead(path: str) -> str:
    """What follows the title in the first line of an artifact's ladder table, up to its target: the artifact named
    by it (kwiki.verify.writeback finds a table by this)."""
    return f"** (`{path}`, target "


def ladder_table(planned: PlannedArtifact, outcomes: list[RunOutcome], gating: Gating | None = None,
                 only: list[dict[str, Scalar]] | None = None, owner: tuple[str, str] | None = None) -> str:
    """Every variant of one artifact run: time, throughput, ratio to the baseline, what changed, SM clock
    (the data: kwiki.results.ladders). With `only` (a page that does not own the artifact: kwiki.wiki.owners),
    just the shapes those parameter sets select, and a link to `owner` (title, relative path), whose page shows
    the whole ladder.

    A record a gate failed keeps its row and time, but shows no rate: the gate stands in its place."""
    ladder = from_run(planned, outcomes, gating)
    if only is not None:
        ladder = ladder.model_copy(update={"groups": [g for g in ladder.groups
                                                      if any(matches(g.params, w) for w in only)], "others": []})
    head = f"**{ladder.title}{ladder_lead(planned.path)}{planned.run_target}"
    head += f"; baseline `{ladder.baseline}`)\n\n" if ladder.baseline else ")\n\n"
    if owner is not None:
        head += (f"The rows at the shapes this page's claims name; the full ladder: [{md_cell(owner[0])}]({owner[1]})."
                 "\n\n")
    rows = [("| variant | what changed | params | time (us) | throughput | rate vs baseline | of speed of light "
             "| SM MHz | registers |"),
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for group in ladder_groups(ladder):  # the sweep's sizes are the curve's: one line below stands for them
        rows += ["| " + " | ".join(md_cell(c) for c in _rung_cells(r, params_text(group.params))) + " |"
                 for r in group.rows]
    rows += ["| " + " | ".join(md_cell(c) for c in _rung_cells(r, "")) + " |" for r in ladder.others]
    folded = sweep_note(ladder)
    return (head + "\n".join(rows) + "\n" + (f"\n*{md_cell(folded[0].upper() + folded[1:])} (on the site).*\n"
                                           if folded else "") + roof_note(planned, outcomes))


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
        if r.below_goal is not None:
            lines.append(f"{r.page}: {r.claim}: below goal by {r.below_goal:.1%} (beats what it compares with; "
                         f"not a failure): {fmt(r.median)} {r.unit}, claimed {r.claimed}")
        elif r.detail and r.verdict not in PASSING | {Verdict.not_testable}:
            lines.append(f"{r.page}: {r.claim}: {r.verdict.value}: {r.detail}")
        elif r.detail and r.verdict in PASSING and r.detail.startswith("follows series"):
            lines.append(f"{r.page}: {r.claim}: {r.detail}")
        if r.unaudited and r.verdict in PASSING:
            lines.append(f"{r.page}: {r.claim}: measured, not verified: {r.unaudited[0]}"
                         + (f" (and {len(r.unaudited) - 1} more)" if len(r.unaudited) > 1 else ""))
        if r.drift is not None and r.value is not None:
            word = "improved" if r.change == "faster" else "drifted"
            lines.append(f"{r.page}: {r.claim}: {word}: this run {fmt(r.value)} {r.unit} is {drift_text(r.drift)} "
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
