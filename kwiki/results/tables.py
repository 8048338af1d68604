"""The claims table a page shows and the line that says where its figures were measured: one definition for
the Markdown kwiki writes back (kwiki.verify.tables) and the site (kwiki.site)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kwiki.core.numbers import NONE, fmt, fmt_spread
from kwiki.results.series import drift_text
from kwiki.results.states import claim_word, improved
from kwiki.wiki.model import Claim, MeasuredClaim, Provenance
from kwiki.wiki.verdict import RUNS, Verdict


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


MEASURED = "*Measured by `kwiki verify`"  # how a provenance line begins (kwiki.verify.writeback finds it by this)


def provenance_line(p: Provenance, spread: str = "run") -> str:
    """The line under a generated table; `spread` says what its ± means ('run' or 'series')."""
    commit = f"commit {p.commit}{' (dirty)' if p.dirty else ''}" if p.commit else "no commit"
    return (f"{MEASURED} on {provenance_text(p, full=True)} on {p.date}; {commit}; "
            f"artifact {p.artifact_hash or '?'}; {SPREAD_NOTES[spread]}.*\n")


def md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _conditions(claim: Claim) -> str:
    c = claim.conditions
    text = ", ".join(str(b) for b in (c.gpu, c.arch, c.shape, c.dtype, c.variant) if b)
    if claim.source:
        text += ("; " if text else "") + f"source: {claim.source}"
    return text


def _plain_verdict(claim: Claim, mc: MeasuredClaim | None) -> str:
    """The claim's state in words (kwiki.results.states), with why where it has no figure or was caught."""
    word, _ = claim_word(claim, mc)
    if mc is None:
        return word
    return word + (f" ({mc.detail})" if mc.detail and (mc.value is None or mc.verdict == Verdict.failed) else "")


def runs_text(mc: MeasuredClaim | None) -> str:
    """'3 runs, 4.381–4.452, 2 boards 1.2% apart' or '1 of 3 runs, 1 board: provisional': what a figure stands on
    ('—' before series)."""
    if mc is None or mc.runs is None:
        return NONE
    spread = f", {fmt(mc.range[0])}–{fmt(mc.range[1])}" if mc.range and mc.runs > 1 else ""
    spread += boards_text(mc)
    if mc.runs < RUNS:
        return f"{mc.runs} of {RUNS} runs{spread}: provisional"
    return f"{mc.runs} runs{spread}"


def boards_text(mc: MeasuredClaim) -> str:
    """', 1 board' or ', 2 boards 1.2% apart': the boards behind a median ('' where the block names none)."""
    if not mc.boards:
        return ""
    n = len(mc.boards)
    apart = mc.board_spread
    return f", {n} board{'s' if n != 1 else ''}" + (f" {apart:.1%} apart" if apart is not None else "")


def measured_text(mc: MeasuredClaim, unit: str, claim: Claim | None = None) -> str:
    """'4.410 TB/s ±2.0% (+8.4% vs the series median)': a measured figure with its band and drift."""
    if mc.value is None:
        return NONE
    value = f"{fmt(mc.value)} {mc.unit or unit}{fmt_spread(mc.spread)}"
    if mc.drift is not None:
        value += f" (latest run {drift_text(mc.drift)}{', improved' if claim and improved(claim, mc) else ''})"
    elif mc.change and mc.change not in ("new", "same"):
        value += f" ({mc.change})"
    return value


def claims_table(claims: list[Claim], measured: Mapping[str, MeasuredClaim], *,
                 text: Callable[[str], str] = md_cell,
                 verdict: Callable[[Claim, MeasuredClaim | None], str] = _plain_verdict,
                 provenance: bool = True) -> str:
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
            value = measured_text(mc, claim.unit, claim)
            ratio = f"{mc.value / claim.reference:.2f}×" if claim.reference else NONE
        where = provenance_text(mc.provenance) if mc and mc.provenance else NONE
        rows.append(f"| {cell} | {text(claim.describe())} | {text(value)} | {ratio} | {verdict(claim, mc)} "
                    f"| {text(runs_text(mc))} |" + (f" {text(where)} |" if provenance else ""))
    return "\n".join(rows) + "\n"
