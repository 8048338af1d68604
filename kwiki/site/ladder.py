"""A ladder on the site: one table per shape group, the decision columns first (kwiki.verify.ladders' data).

Each group is a table whose caption is its shape (`8192x8192, bf16`, `4 GiB, u8`); its first column,
the variant and what its rung adds, stays in view when the table scrolls sideways (sticky); the
columns after it are the ones a reader decides on: rate against the baseline, share of the speed
of light, then the rate, the time, registers and the SM clock. The scroll region is reachable by
keyboard (tabindex, role and label), and on a phone every row becomes a card (kwiki.css). All text
is escaped here: the HTML carries no link and no author markup.
"""

from __future__ import annotations

from kwiki.core.numbers import NONE, fmt, fmt_spread
from kwiki.site.render import html_text
from kwiki.verify.ladders import Ladder, Rung, ShapeGroup

COLUMNS = ("variant", "vs baseline", "of speed of light", "rate", "time (µs)", "registers", "SM MHz")
STATUS_TEXT = {"refused": "refused", "profiled": "profiled (no timing)", "check-failed": "check failed",
               "run-failed": "run failed", "not-applicable": "not applicable"}


def _clock(r: Rung) -> str:
    if r.sm_mhz is None:
        return NONE
    low, high = r.sm_mhz
    text = f"{low:.0f}" if low == high else f"{low:.0f}–{high:.0f}"
    return text + (f", {r.power_capped:.0%} power-capped" if r.power_capped else "")


def _best(group: ShapeGroup) -> str | None:
    """The variant with the highest rate against the baseline (the ceiling and the baseline left out)."""
    ranked = [r for r in group.rows if r.role is None and r.vs_baseline is not None]
    return max(ranked, key=lambda r: r.vs_baseline or 0.0).variant if ranked else None


def _name(r: Rung) -> str:
    name = f"<code>{html_text(r.variant)}</code>"
    if r.rung is not None:
        name = f'<span class="kw-rung">{r.rung}</span> {name}'
    if r.role:
        name += f' <span class="kw-role">{html_text(r.role)}</span>'
    return name


def _variant_cell(r: Rung) -> str:
    return f'<th scope="row">{_name(r)}</th>'


def variants_list(ladder: Ladder) -> str:
    """What each rung adds, once for the whole ladder (the tables name the variants only)."""
    seen: dict[str, Rung] = {}
    for g in ladder.groups:
        for r in g.rows:
            seen.setdefault(r.variant, r)
    items = [f"<li>{_name(r)}: {html_text(r.adds or r.description)}</li>" for r in seen.values()
             if r.adds or r.description]
    return f'<ul class="kw-ladder-variants">{"".join(items)}</ul>' if items else ""


def _cells(r: Rung) -> list[str]:
    """The cells after the variant, in COLUMNS order."""
    if r.status != "measured":
        why = STATUS_TEXT.get(r.status, r.status)
        if r.gates:
            why += ": gate " + ", ".join(g.name for g in r.gates)
        time = fmt(r.time_us) + fmt_spread(r.spread) if r.time_us is not None else NONE
        return [why, NONE, NONE, time, str(r.registers) if r.registers is not None else NONE, _clock(r)]
    return [
        f"{fmt(r.vs_baseline, 3)}×" if r.vs_baseline is not None else NONE,
        f"{r.of_speed_of_light:.0%}" if r.of_speed_of_light is not None else NONE,
        f"{fmt(r.rate)} {r.rate_unit}" if r.rate is not None and r.rate_unit else NONE,
        fmt(r.time_us) + fmt_spread(r.spread) if r.time_us is not None else NONE,
        str(r.registers) if r.registers is not None else NONE,
        _clock(r),
    ]


def group_table(ladder: Ladder, group: ShapeGroup) -> str:
    best = _best(group)
    head = "".join(f"<th>{html_text(c)}</th>" for c in COLUMNS)
    rows = []
    for r in group.rows:
        classes = (["kw-best"] if r.variant == best else []) + ([f"kw-{r.role}"] if r.role else [])
        cells = "".join(f"<td>{html_text(c)}</td>" for c in _cells(r))
        tr = f'<tr class="{" ".join(classes)}">' if classes else "<tr>"
        rows.append(f"{tr}{_variant_cell(r)}{cells}</tr>")
    label = html_text(f"{ladder.artifact} ladder at {group.label}")
    return (f'<div class="kw-scroll" tabindex="0" role="region" aria-label="{label}">'
            f'<table class="kw-ladder-table"><caption>{html_text(group.label)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def ladder_html(ladder: Ladder) -> str:
    """One ladder: a line saying what ran where, then a table per shape group, then rows of no shape."""
    about = [f"<strong>{html_text(ladder.title)}</strong>"]
    if ladder.path:
        about.append(f"<code>{html_text(ladder.path)}</code>")
    where = " ".join(x for x in (f"on {ladder.gpu}" if ladder.gpu else "", (ladder.date or "")[:10]) if x)
    if ladder.target or where:
        about.append(html_text(", ".join(x for x in (ladder.target or "", where) if x)))
    if ladder.baseline:
        about.append(f"baseline <code>{html_text(ladder.baseline)}</code>")
    if ladder.ceiling:
        about.append(f"speed of light <code>{html_text(ladder.ceiling)}</code>")
    out = [f'<p class="kw-ladder-about">{" · ".join(about)}</p>', variants_list(ladder)]
    out += [group_table(ladder, g) for g in ladder.groups]
    if ladder.others:
        items = "".join(f"<li><code>{html_text(r.variant)}</code>: {html_text(r.note or r.status)}</li>"
                        for r in ladder.others)
        out.append(f'<ul class="kw-ladder-others">{items}</ul>')
    return "\n".join(out)


def ladders_block(ladders: list[Ladder]) -> str:
    """Every ladder of a page, in one block kwiki marks as its own; kept out of the search index."""
    if not ladders:
        return ""
    body = "\n".join(ladder_html(ladder) for ladder in ladders)
    return f'<div class="kw-ladder kw-wide" data-search-exclude>\n{body}\n</div>\n'
