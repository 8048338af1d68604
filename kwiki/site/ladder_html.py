"""A ladder on the site: one table per shape group, the decision columns first (kwiki.results.ladders' data).

Each group is a table whose caption is its shape (`8192x8192, bf16`, `4 GiB, u8`); its first column,
the variant and what its rung adds, stays in view when the table scrolls sideways (sticky); the
columns after it are the ones a reader decides on: rate against the baseline, share of the speed
of light, then the rate, the time, the mechanism beside it, registers and the SM clock. The mechanism
cell says whether the variant's SASS check matched and whether its kernels spill, and, where the run
was profiled, Nsight Compute's bytes against the declared ones on that shape, in short; the line above
the tables says once how to read them. The list of variants above the tables gives each variant's
evidence once (one binary runs every shape): per kernel its registers and spills and the instructions
each pattern matched, with their counts. The scroll region
is reachable by keyboard (tabindex, role and label), and on a phone every row becomes a card
(kwiki.css). All text is escaped here: the HTML carries no link and no author markup.
"""

from __future__ import annotations

import re

from kwiki.core.numbers import NONE, fmt, fmt_spread
from kwiki.results.ladders import Ladder, Mechanism, Profiled, Rung, ShapeGroup, ladder_groups, sweep_note
from kwiki.results.mechanism import KernelRow
from kwiki.site.render import html_text

COLUMNS = ("variant", "vs baseline", "of speed of light", "rate", "time (µs)", "mechanism", "registers", "SM MHz")
STATUS_TEXT = {"refused": "refused", "profiled": "profiled (no timing)", "check-failed": "check failed",
               "run-failed": "run failed", "not-applicable": "not applicable"}
PLAIN_COLUMNS = tuple(c for c in COLUMNS if c != "mechanism")  # a ladder with no SASS check and no profile
MISMATCH_CHARS = 300  # of each mismatch the variants list shows (the manifest line and the gate say it all)
SASS_TEXT = {"passed": "matched", "failed": "mismatch", "not-checked": "not checked",
             "no-expectations": "no expectations"}


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
    """What each rung adds and the evidence of its mechanism, once for the whole ladder (the tables name
    the variants only: one binary runs every shape, so its SASS check is the same in each); a variant whose
    evidence is word for word a rung's above (the same kernel, the same matches) points to that rung."""
    seen: dict[str, Rung] = {}
    for g in ladder.groups:
        for r in g.rows:
            seen.setdefault(r.variant, r)
    items = []
    shown: dict[str, str] = {}  # evidence already listed -> the variant it was listed under
    for r in seen.values():
        about = html_text(r.adds or r.description or "")
        m = ladder.mechanisms.get(r.variant)
        text = mechanism_html(m) if m is not None else ""
        if text and text in shown:  # the same kernels and the same matches as a rung above: say so, once
            text = f"SASS as <code>{html_text(shown[text])}</code>'s"
        elif text:
            shown[text] = r.variant
        evidence = f'<span class="kw-mech">{text}</span>' if text else ""
        if about or evidence:
            items.append(f"<li>{_name(r)}{': ' + about if about else ''}{evidence}</li>")
    return f'<ul class="kw-ladder-variants">{"".join(items)}</ul>' if items else ""


# ---------------------------------------------------------------- the mechanism


def kernel_name(name: str) -> str:
    """A demangled kernel name as a reader names it: no return type, template arguments or parameters
    ('void gemm_serial<Config<...>>(CUtensorMap_st, ...)' -> 'gemm_serial')."""
    short = re.sub(r"^(?:(?:static|__global__|void)\s+)+", "", name.strip()).replace("(anonymous namespace)::", "")
    return re.split(r"[<(]", short, maxsplit=1)[0].strip() or name


def size_bytes(n: float) -> str:
    """A byte count in decimal units, three significant digits: '1.07 GB', '512 B'."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{fmt(n / scale, 3)} {unit}"
    return f"{n:.0f} B"


def spills(kernels: list[KernelRow], short: bool = False) -> str | None:
    """'no spills', 'spills 16 B stored, 8 B loaded' (bytes of the kernels' spill code, ptxas -v), 'spills'
    when `short`; None when ptxas's counts are unknown (a cached build of old)."""
    if not kernels or any(k.spill_stores is None or k.spill_loads is None for k in kernels):
        return None
    stores = sum(k.spill_stores or 0 for k in kernels)
    loads = sum(k.spill_loads or 0 for k in kernels)
    if stores == loads == 0:
        return "no spills"
    return "spills" if short else f"spills {stores} B stored, {loads} B loaded"


def _pattern(pattern: str, count: str, most: int, forbidden: bool) -> str:
    """One matched pattern and its count (a range over kernels): '<code>LDG.E.128</code> ×8 (≥ 2)'; 'no
    <code>LDG.64</code>' for a forbidden one none of the kernels has."""
    spelled, _, wanted = pattern.partition(" ")
    code = f"<code>{html_text(spelled)}</code>"
    if forbidden:
        return f"no {code}" if most == 0 else f"{code} ×{count} (forbidden)"
    wanted = wanted.replace(">=", "≥").replace("==", "=").strip()
    return f"{code} ×{count}" + (f" ({html_text(wanted)})" if wanted else "")


def _span(values: list[int]) -> str:
    """'8' for one value, '3–13' for several."""
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}–{high}"


def _kernels(name: str, kernels: list[KernelRow], forbid: set[str]) -> str:
    """The evidence of the kernels of one name (one kernel, or a template's instantiations, their figures as
    ranges): registers, spills and local memory, then each pattern's count (the required ones first)."""
    regs = [k.registers for k in kernels if k.registers is not None]
    local = [k.local_bytes for k in kernels if k.local_bytes]
    facts = [f"{_span(regs)} registers" if regs else None, spills(kernels),
             f"{_span(local)} B local" if local else None]
    about = ", ".join(f for f in facts if f)
    patterns = sorted({p for k in kernels for p in k.matched}, key=lambda p: (p in forbid, p))
    counts = [(p, [k.matched[p] for k in kernels if p in k.matched]) for p in patterns]
    matched = ", ".join(_pattern(p, _span(n), max(n), p in forbid) for p, n in counts)
    head = f"<code>{html_text(name)}</code>" + (f" ×{len(kernels)}" if len(kernels) > 1 else "")
    return head + (f": {html_text(about)}" if about else "") + (f"; {matched}" if matched else "")


def mechanism_html(m: Mechanism) -> str:
    """A variant's SASS check in a line: 'SASS matched: <kernel>: 154 registers, no spills; <pattern> ×8, ...',
    each kernel after the other, then what did not match and why nothing was checked."""
    status = SASS_TEXT.get(m.status, m.status)
    head = f"<strong>SASS {html_text(status)}</strong>" if m.status == "failed" else f"SASS {html_text(status)}"
    forbid = set(m.forbid)
    named: dict[str, list[KernelRow]] = {}
    for k in m.kernels:
        named.setdefault(kernel_name(k.name), []).append(k)
    parts = [_kernels(name, kernels, forbid) for name, kernels in named.items()]
    parts += [html_text(x if len(x) <= MISMATCH_CHARS else x[:MISMATCH_CHARS - 1] + "…")
              for x in (*m.mismatches, m.note) if x]
    return head + (": " + " · ".join(parts) if parts else "")


def profiled_text(p: Profiled) -> str:
    """Nsight Compute's count against the record's, short (the ladder's legend says how to read it):
    '×1.00 of 1.07 GB DRAM, FLOPs ×0.99'; '†' when an earlier run of the same code was profiled."""
    parts = []
    if p.bytes_ratio is not None:
        parts.append(f"×{p.bytes_ratio:.2f}" + (" of" if p.bytes is not None else ""))
    if p.bytes is not None:
        parts.append(f"{size_bytes(p.bytes)} {p.level.upper()}")
    text = " ".join(parts)
    if p.flops_ratio is not None:
        text += (", " if text else "") + f"FLOPs ×{p.flops_ratio:.2f}"
    return text + ("†" if p.run_id is not None else "")


def profile_legend(ladder: Ladder) -> str:
    """How to read the mechanism cells' profile, once per ladder ('' when no row was profiled)."""
    profiles = [r.profiled for g in ladder.groups for r in g.rows if r.profiled is not None]
    if not profiles:
        return ""
    text = "mechanism ×r of N: declared bytes (FLOPs) over what Nsight Compute counted"
    earlier = sorted({p.run_id for p in profiles if p.run_id is not None})
    if earlier:
        text += "; † profiled in run " + ", ".join(earlier) + " (same code)"
    return text


def mechanism_cell(r: Rung, m: Mechanism | None) -> str:
    """The mechanism cell of row `r` (text, not yet escaped): its variant's SASS check `m` and whether its
    kernels spill ('matched, no spills'; the evidence is in the variants list), then what Nsight Compute
    counted of this shape where the run was profiled; NONE with neither."""
    words = [SASS_TEXT.get(m.status, m.status) if m is not None else None,
             spills(m.kernels, short=True) if m is not None else None]
    check = ", ".join(w for w in words if w)
    profile = profiled_text(r.profiled) if r.profiled is not None else ""
    return "; ".join(x for x in (check, profile) if x) or NONE


# ---------------------------------------------------------------- a row


def _cells(r: Rung, m: Mechanism | None) -> list[str]:
    """The cells after the variant, in COLUMNS order, as HTML (a mismatch in bold)."""
    regs = str(r.registers) if r.registers is not None else NONE
    time = fmt(r.time_us) + fmt_spread(r.spread) if r.time_us is not None else NONE
    if r.status != "measured":
        why = STATUS_TEXT.get(r.status, r.status)
        if r.gates:
            why += ": gate " + ", ".join(g.name for g in r.gates)
        texts = [why, NONE, NONE, time]
    else:
        texts = [f"{fmt(r.vs_baseline, 3)}×" if r.vs_baseline is not None else NONE,
                 f"{r.of_speed_of_light:.0%}" if r.of_speed_of_light is not None else NONE,
                 f"{fmt(r.rate)} {r.rate_unit}" if r.rate is not None and r.rate_unit else NONE, time]
    mech = html_text(mechanism_cell(r, m))
    if m is not None and m.status == "failed":
        mech = f"<strong>{mech}</strong>"
    return [*(html_text(t) for t in texts), mech, html_text(regs), html_text(_clock(r))]


def has_mechanism(ladder: Ladder) -> bool:
    """Whether the ladder's tables have a mechanism column: some variant has a SASS check, or some row a profile."""
    return bool(ladder.mechanisms) or any(r.profiled is not None for g in ladder.groups for r in g.rows)


def group_table(ladder: Ladder, group: ShapeGroup) -> str:
    best = _best(group)
    mech = has_mechanism(ladder)
    head = "".join(f"<th>{html_text(c)}</th>" for c in (COLUMNS if mech else PLAIN_COLUMNS))
    rows = []
    for r in group.rows:
        classes = (["kw-best"] if r.variant == best else []) + ([f"kw-{r.role}"] if r.role else [])
        shown = _cells(r, ladder.mechanisms.get(r.variant))
        if not mech:
            del shown[COLUMNS.index("mechanism") - 1]
        cells = "".join(f"<td>{c}</td>" for c in shown)
        tr = f'<tr class="{" ".join(classes)}">' if classes else "<tr>"
        rows.append(f"{tr}{_variant_cell(r)}{cells}</tr>")
    label = html_text(f"{ladder.artifact} ladder at {group.label}")
    table = "kw-ladder-table kw-mech-table" if mech else "kw-ladder-table"
    # each region also kept out of the search index: Material's parser ends an exclusion at the first
    # nested </div>, so the outer block's attribute alone let every table after the first through
    return (f'<div class="kw-scroll" tabindex="0" role="region" aria-label="{label}" data-search-exclude>'
            f'<table class="{table}"><caption>{html_text(group.label)}</caption>'
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
    if legend := profile_legend(ladder):
        about.append(html_text(legend))
    out = [f'<p class="kw-ladder-about">{" · ".join(about)}</p>', variants_list(ladder)]
    out += [group_table(ladder, g) for g in ladder_groups(ladder)]
    if folded := sweep_note(ladder):  # the sweep's sizes: one line here, every point on the curve
        out.append(f'<p class="kw-ladder-sweep">{html_text(folded[0].upper() + folded[1:])} below.</p>')
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
    return f'<div class="kw-ladder kw-wide" id="ladder" data-search-exclude>\n{body}\n</div>\n'
