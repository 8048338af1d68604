"""Markdown tables kwiki writes into pages (claims, ladder) and the terminal report of a run."""

from __future__ import annotations

import json
import math

from kwiki.verify.claims import ClaimResult
from kwiki.verify.plan import PlannedArtifact
from kwiki.verify.record import Record
from kwiki.verify.run import RunOutcome
from kwiki.wiki.model import Provenance


def fmt(value: float | None, digits: int = 4) -> str:
    """A number with `digits` significant digits, no exponent for everyday magnitudes."""
    if value is None or not math.isfinite(value):
        return "—"
    if value == 0:
        return "0"
    mag = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - mag)
    return f"{value:.{decimals}f}" if -4 <= mag < 9 else f"{value:.{digits - 1}e}"


def fmt_spread(spread: float | None) -> str:
    return "" if spread is None else f" ±{spread * 100:.1f}%"


def provenance_line(p: Provenance) -> str:
    parts = [p.gpu]
    if p.arch:
        parts.append(p.arch)
    if p.driver:
        parts.append(f"driver {p.driver}")
    if p.cuda:
        parts.append(f"CUDA {p.cuda}")
    if p.nvcc:
        parts.append(f"nvcc {p.nvcc}")
    commit = f"commit {p.commit}{' (dirty)' if p.dirty else ''}" if p.commit else "no commit"
    return (f"*Measured by `kwiki verify` on {', '.join(parts)} on {p.date}; {commit}; "
            f"artifact {p.artifact_hash or '?'}; ± is the run's half inter-quartile range.*\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def claims_table(results: list[ClaimResult], provenance: Provenance, statements: dict[str, str]) -> str:
    rows = ["| claim | statement | claimed | measured | verdict | change |",
            "| --- | --- | --- | ---: | --- | --- |"]
    for r in results:
        measured = f"{fmt(r.value)} {r.unit}{fmt_spread(r.spread)}" if r.value is not None else "—"
        verdict = r.verdict.value + (f" ({r.detail})" if r.detail and r.value is None else "")
        rows.append("| " + " | ".join(_cell(c) for c in (
            f"`{r.claim}`", statements.get(r.claim, ""), r.claimed, measured, verdict, r.change or "")) + " |")
    return "\n".join(rows) + "\n\n" + provenance_line(provenance)


def _params(record: Record) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(record.params.items()))


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
            base[_params(r)] = _rate(r)
        if r.variant == m.ceiling and r.timing is not None and r.bytes:
            sol[_params(r)] = r.figures()["gb_per_s"]
    head = f"**{m.title}** (`{planned.path}`, target {planned.run_target}"
    head += f"; baseline `{m.baseline}`)\n\n" if m.baseline else ")\n\n"
    rows = ["| variant | what changed | params | time (us) | throughput | rate vs baseline | of speed of light | registers |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    order = {v.name: i for i, v in enumerate(m.variants)}
    for r in sorted(records, key=lambda r: (_params(r), order.get(r.variant, 99))):
        desc = (m.variant(r.variant).description if m.variant(r.variant) else "")
        if r.timing is None:
            rows.append(f"| `{r.variant}` | {_cell(desc)} | {_cell(_params(r))} | check failed | — | — | — | — |")
            continue
        ratio = base.get(_params(r))
        vs = f"{fmt(_rate(r) / ratio, 3)}x" if ratio else "—"
        ceiling = sol.get(_params(r))
        of_sol = f"{r.figures()['gb_per_s'] / ceiling:.0%}" if ceiling and r.bytes else "—"
        regs = r.extra.get("registers", "—")
        rows.append("| " + " | ".join(_cell(str(c)) for c in (
            f"`{r.variant}`", desc, _params(r), fmt(r.timing.median_us) + fmt_spread(r.timing.spread),
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
        if r.detail and r.verdict.value not in ("reproduced", "better", "not-testable"):
            lines.append(f"{r.page}: {r.claim}: {r.verdict.value}: {r.detail}")
    return "\n".join(lines)


def dumps(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True)
