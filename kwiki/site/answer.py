"""The answer box a page opens with: what its measurements say, before any prose.

A page with ladders gets, per artifact and per headline shape (the shapes its claims select, at most
`MAX_SHAPES`), the best variant there (kwiki.results.ladders.best_per_shape, the variants the page sets aside
left out), its rate, its speed against the baseline and its share of the speed of light, the GPU, date and SM
clock it ran at, and the rungs that did not help (slower than the rung below them). Its headline claim (front
matter `headline`, else the standing's) comes first with its measured figure and verdict; a page without a
ladder shows that claim alone. Every number comes from the results store or the measurements block that
`kwiki verify` wrote; all text is escaped, and the box carries no link (raw HTML; see kwiki.site.render).
"""

from __future__ import annotations

from kwiki.core.numbers import fmt
from kwiki.core.strict import Scalar
from kwiki.results.ladders import Ladder, Rung, ShapeGroup, best_per_shape, ladder_groups
from kwiki.results.standing import Standing
from kwiki.results.states import claim_word
from kwiki.site.render import html_text
from kwiki.wiki.model import FIGURE_UNITS, RATIO_UNITS, Claim, MeasuredClaim, PageMeta
from kwiki.wiki.owners import matches

MAX_SHAPES = 3  # headline shapes per artifact: the box stays within a phone's first screen
MAX_UNHELPFUL = 3


def headline_claim(meta: PageMeta, st: Standing | None) -> tuple[Claim, MeasuredClaim | None] | None:
    """The claim a page answers with: its front matter's `headline`, else the standing's first measured claim."""
    measured = meta.measurements.claims if meta.measurements else {}
    claims = {c.id: c for c in meta.claims}
    cid = meta.headline or (st.headline[0] if st is not None and st.headline is not None else None)
    if cid is None or cid not in claims:
        return None
    return claims[cid], measured.get(cid)


def against(claim: Claim) -> str | None:
    """What a ratio claim's figure is against, in words: its decision's `over`, else the variant whose speed the
    figure is relative to: the `per` of a ratio of rates ('1.02× cublas': of's rate over cuBLAS's), the `of` of a
    ratio of times (cuBLAS's time over ours: ours runs at 1.28× cuBLAS's speed, '1.28× cublas')."""
    if claim.decision is not None and claim.decision.over:
        return claim.decision.over
    m = claim.measure
    if m is None or m.per is None:
        return None
    times = FIGURE_UNITS.get(m.of.figure) in ("us", "ms") and FIGURE_UNITS.get(m.per.figure) in ("us", "ms")
    return m.of.variant if times else m.per.variant


def figure_text(claim: Claim, mc: MeasuredClaim | None) -> str | None:
    """A measured figure with its direction: '1.02× cublas', '95% of device_copy', '4.41 TB/s'; None when the
    claim has no measured value."""
    if mc is None or mc.value is None:
        return None
    unit = claim.unit if claim.unit in RATIO_UNITS else (mc.unit or claim.unit)  # a fraction is measured as 'x'
    other = against(claim)
    if unit == "fraction":  # a share under 1% keeps two digits: a gap of 0.06% is not '0%'
        share = f"{mc.value:.0%}" if abs(mc.value) >= 0.01 or mc.value == 0 else f"{fmt(mc.value * 100, 2)}%"
        return share + (f" of {other}" if other else "")
    if unit in ("x", "ratio"):
        return f"{fmt(mc.value, 3)}×" + (f" {other}" if other else "")
    return f"{fmt(mc.value, 4)} {unit}"


def _without(ladder: Ladder, set_aside: dict[str, str]) -> Ladder:
    groups = [g.model_copy(update={"rows": [r for r in g.rows if r.variant not in set_aside]}) for g in ladder.groups]
    return ladder.model_copy(update={"groups": groups})


def headline_groups(ladder: Ladder, wanted: list[dict[str, Scalar]]) -> list[ShapeGroup]:
    """The ladder's groups at the shapes the page's claims select (all of them when no claim selects one)."""
    picked = [g for g in ladder.groups if any(w and matches(g.params, w) for w in wanted)]
    return picked or ladder_groups(ladder)  # a sweep's sizes are the curve's, never the headline


def unhelpful(group: ShapeGroup) -> list[tuple[Rung, Rung]]:
    """(rung, the fastest rung below it) for each numbered rung slower than some rung below it on this shape (a
    ladder's rungs need not be a chain: rung 7 may be rung 4 walked another way, so the fastest one below
    is the bar). The baseline and every other rung 0 (a library: cuBLAS beside cuBLASLt's best) are no rungs of
    ours to build on: how far from them a rung is, its 'vs baseline' says."""
    rungs = sorted((r for r in group.rows if r.rung is not None and not r.library and r.role is None
                    and r.status == "measured" and r.rate is not None), key=lambda r: r.rung or 0)
    out = []
    for i, r in enumerate(rungs):
        below = [b for b in rungs[:i] if b.rate_unit == r.rate_unit and (b.rung or 0) < (r.rung or 0)]
        if below:
            best = max(below, key=lambda b: b.rate or 0.0)
            if (r.rate or 0.0) < (best.rate or 0.0):
                out.append((r, best))
    return out


def _best_line(ladder: Ladder, group: ShapeGroup, best: Rung) -> str:
    parts = [f"<strong class=\"kw-fig\">{html_text(fmt(best.rate, 3))} {html_text(best.rate_unit)}</strong>"
             if best.rate is not None and best.rate_unit else
             f"<strong class=\"kw-fig\">{html_text(fmt(best.time_us, 3))} µs</strong>"]
    if best.vs_baseline is not None and best.role != "baseline" and ladder.baseline:
        parts.append(f"<strong class=\"kw-fig\">{html_text(fmt(best.vs_baseline, 3))}×</strong> "
                     f"<code>{html_text(ladder.baseline)}</code>")
    if best.of_speed_of_light is not None:
        parts.append(f"{best.of_speed_of_light:.0%} of the speed of light")
    if best.sm_mhz is not None:
        low, high = best.sm_mhz
        parts.append(f"SM {low:.0f} MHz" if low == high else f"SM {low:.0f}–{high:.0f} MHz")
    return (f"<li><span class=\"kw-shape\">{html_text(group.label)}</span>: best <code>{html_text(best.variant)}"
            f"</code> " + ", ".join(parts) + "</li>")


def _ladder_lines(ladder: Ladder, wanted: list[dict[str, Scalar]], set_aside: dict[str, str]) -> list[str]:
    shown = _without(ladder, set_aside)
    keep = {id(g) for g in headline_groups(shown, wanted)[:MAX_SHAPES]}
    best = [(g, r) for g, r in best_per_shape(shown) if id(g) in keep]
    if not best:
        return []
    where = ", ".join(x for x in (ladder.gpu or "", (ladder.date or "")[:10], ladder.target or "",
                                  "burst regime (duty-cycled samples)") if x)
    lines = [f"<p class=\"kw-answer-where\"><code>{html_text(ladder.artifact)}</code> · {html_text(where)}</p>",
             "<ul>", *[_best_line(ladder, g, r) for g, r in best], "</ul>"]
    worse = list({(r.variant, b.variant): (r, b) for g, _ in best for r, b in unhelpful(g)}.values())[:MAX_UNHELPFUL]
    if worse:
        text = "; ".join(f"rung {r.rung} <code>{html_text(r.variant)}</code> "
                         f"{html_text(fmt((r.rate or 0.0) / (b.rate or 1.0), 3))}× of rung {b.rung}" for r, b in worse)
        lines.append(f"<p class=\"kw-answer-not\">Did not help: {text}.</p>")
    return lines


def answer_box(meta: PageMeta, st: Standing | None, ladders: list[tuple[Ladder, list[dict[str, Scalar]]]]) -> str:
    """The page's answer box (HTML, no links), '' when it has neither a measured headline nor a ladder;
    `ladders` pairs each ladder with the parameter sets the page's claims select from its artifact."""
    out: list[str] = []
    head = headline_claim(meta, st)
    if head is not None:
        claim, mc = head
        figure = figure_text(claim, mc)
        if figure is not None and mc is not None:
            word, kind = claim_word(claim, mc)  # the claim's state in words (kwiki.results.states)
            badge = f'<span class="kw-badge kw-verdict kw-v-{kind}">{html_text(word)}</span>'
            out.append(f'<p class="kw-answer-head"><strong class="kw-fig">{html_text(figure)}</strong> '
                       f"{badge} {html_text(claim.statement)}</p>")
    for ladder, wanted in ladders:
        out += _ladder_lines(ladder, wanted, meta.set_aside)
    if not out:
        return ""
    aside = ", ".join(f"{v} ({why})" for v, why in sorted(meta.set_aside.items()))
    if aside and ladders:
        out.append(f'<p class="kw-answer-not">Never counted as best: {html_text(aside)}.</p>')
    return ('<div class="kw-answer" role="note" aria-label="What the measurements say" data-search-exclude>'
            + "".join(out) + "</div>\n")
