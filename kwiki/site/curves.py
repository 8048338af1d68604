"""Curves across sizes: the best rung and the baseline of a ladder over its shapes, as a fraction of the roof.

A curve needs at least `MIN_SIZES` shapes of one dtype on which the baseline and some other rung were measured
in the ladder's run. The y axis is the share of the speed of light (the ladder's ceiling variant on the same
shape, memory-bound ladders); a ladder without a ceiling is drawn against the highest rate any of its rows
reached in that dtype in any of the runs drawn, and says so in its title. The best rung at each shape is
kwiki.results.ladders' `best_per_shape` over the ladder's own rungs: the page's set-aside variants, the baseline
and every rung 0 (a library: cuBLAS's default beside cuBLASLt's best) left out, so that where a library wins the
curve shows by how much instead of dropping the size. Sizes of the manifest's `shapes.sweep` are points like any
other (the ladder tables fold them; kwiki.results.ladders.sweep_note). Each point is the median over the last runs
of the ladder's series (kwiki.results.ladders.store_runs: the runs its verdicts stand on), with the range of those
runs drawn as a band; the latest run alone where the store holds no other. Where the rows drawn move different
bytes (an int4 kernel beside a bf16 library), each is drawn as the time of the fewest bytes at the roof over its
own time (kwiki.results.comparisons.problem_roof_time), so that the faster is always the higher. A page's
`compare` (kwiki.results.comparisons.compare_spec) is drawn by `draw_compare`, one line per variant. The spec is
plain data; `draw_curve` writes SVG with the chart conventions of kwiki.site.charts (text of 14 units on a 400-unit
drawing: 11 px or more on a 390 px phone; the dark scheme inverts the chart's white card).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from kwiki.core.numbers import fmt
from kwiki.core.strict import Scalar
from kwiki.results.comparisons import MIN_SIZES, problem_roof_time, runs_of, size_of
from kwiki.results.ladders import Ladder, best_per_shape, median_ladder, shape_label
from kwiki.site.charts import (
    BAR,
    BASE,
    BEST,
    GRID,
    INK,
    MUTED,
    TEXT,
    WIDTH,
    _lines,
    _n,
    _svg,
    _text,
    _ticks,
    _title,
    _wrap,
)

SIZE_KEYS = frozenset({"M", "N", "K", "m", "n", "k", "rows", "cols", "shape", "bytes"})  # a size's own dimensions


def _label(params: dict[str, Scalar], same: set[str], dtype: str) -> str:
    """A point's size as a reader writes it, without what every point shares; the dtype, said in the title, still
    tells a byte count ('64 MiB') from a count of elements."""
    kept = {k: v for k, v in params.items() if k not in same}
    if dtype and "dtype" not in kept:
        parts = shape_label({**kept, "dtype": dtype}).split(", ")
        parts.remove(dtype)
        return ", ".join(parts) or "—"
    return shape_label(kept) or "—"


def curve_specs(ladder: Ladder, set_aside: dict[str, str] | None = None,
                runs: Sequence[Ladder] = ()) -> list[dict[str, Any]]:
    """One curve spec per dtype of the ladder with `MIN_SIZES` or more shapes (none when it has fewer). `runs`: the
    ladders of the last runs of its series, oldest first, `ladder` the last (kwiki.results.ladders.store_runs):
    each point is their median (`median_ladder`) and its band their lowest and highest share; without them, the
    ladder's own run."""
    series = list(runs) or [ladder]
    ladder = median_ladder(series)
    aside = set_aside or {}
    groups = [g.model_copy(update={"rows": [r for r in g.rows if r.variant not in aside]}) for g in ladder.groups]
    rungs = [g.model_copy(update={"rows": [r for r in g.rows if not r.library]})
             for g in groups]
    best: dict[int, Any] = {}
    for g, own in zip(groups, rungs, strict=True):
        found = best_per_shape(ladder.model_copy(update={"groups": [own]}))
        if found:
            best[id(g)] = found[0][1]
    by_dtype: dict[str, list[dict[str, Any]]] = {}
    for g in groups:
        base = next((r for r in g.rows if r.role == "baseline" and r.status == "measured"), None)
        ours = best.get(id(g))
        if base is None or ours is None or ours.variant == base.variant:
            continue
        dtype = str(g.params.get("dtype", ""))
        by_dtype.setdefault(dtype, []).append({"params": g.params, "best": ours, "base": base})
    specs = []
    for dtype, points in sorted(by_dtype.items()):
        if len(points) < MIN_SIZES:
            continue
        points.sort(key=lambda p: size_of(p["params"]))
        same = {k for k, v in points[0]["params"].items() if all(p["params"].get(k) == v for p in points)
                and k not in SIZE_KEYS}
        for p in points:  # a size is what varies: the parameters every point shares say nothing
            p["label"] = _label(p["params"], same, dtype)
        sol = all(p["best"].of_speed_of_light is not None and p["base"].of_speed_of_light is not None for p in points)
        top = max((r.rate or 0.0) for run in series for g in run.groups if str(g.params.get("dtype", "")) == dtype
                  for r in g.rows if r.status == "measured" and r.variant not in aside)  # any run's: bands stay below

        def share(r: Any, sol: bool = sol, top: float = top) -> float:
            return float(r.of_speed_of_light) if sol else (r.rate or 0.0) / top if top else 0.0

        def band(p: dict[str, Any], key: str, share: Any = share, sol: bool = sol) -> dict[str, Any]:
            shares = [share(r) for r in runs_of(series, p["params"], p[key].variant)
                      if not sol or r.of_speed_of_light is not None] or [share(p[key])]
            return {key: share(p[key]), f"{key}_low": min(shares), f"{key}_high": max(shares),
                    f"{key}_runs": len(shares)}

        def rescaled(p: dict[str, Any], sol: bool = sol) -> dict[str, Any]:
            """Where the best rung and the baseline move different bytes (an int4 kernel beside a bf16 library), each
            one's own share of the roof could draw the slower one higher: both are drawn against the fewer bytes
            (kwiki.results.comparisons.problem_roof_time). {} where their bytes agree within 2%."""
            t_sol = problem_roof_time([p["best"], p["base"]], p["base"]) if sol else None
            if t_sol is None:
                return {}
            out: dict[str, Any] = {"rescaled": True}
            for key, r in (("best", p["best"]), ("base", p["base"])):
                times = [x.time_us for x in runs_of(series, p["params"], r.variant) if x.time_us] or [r.time_us]
                out.update({key: t_sol / r.time_us, f"{key}_low": t_sol / max(times), f"{key}_high": t_sol / min(times),
                            f"{key}_runs": len(times)})
            return out

        unit = points[0]["best"].rate_unit or ""
        roof = "the speed of light" if sol else f"the highest {unit} of the ladder" + (
            f"'s {len(series)} runs" if len(series) > 1 else "")
        drawn: list[dict[str, Any]] = [{"label": p["label"], "best_variant": p["best"].variant, **band(p, "best"),
                                        **band(p, "base"), **rescaled(p)} for p in points]
        specs.append({
            "kind": "curve", "artifact": ladder.artifact, "gpu": ladder.gpu or "", "date": (ladder.date or "")[:10],
            "dtype": dtype, "roof": roof, "baseline": ladder.baseline or "baseline", "runs": len(series),
            "points": drawn, "rescaled": any(p.get("rescaled") for p in drawn)})
    return specs


PALETTE = (BEST, BAR, "#e65100", "#00838f", BASE)  # a line's colour and its dash: told apart without colour too
DASHES = ("", "6,3", "2,3", "9,3,2,3", "4,4")


def draw_curve(spec: dict[str, Any]) -> bytes:
    """Two lines over the sizes (smallest first): the best rung, green, and the baseline, grey and dashed, each point
    the median of the runs with their range shaded around its line and both in its tooltip."""
    title = (f"{spec['artifact']} across sizes{', ' + spec['dtype'] if spec['dtype'] else ''}: share of "
             f"{spec['roof']} on {spec['gpu']}, {spec['date']}")
    pts = spec["points"]
    lines = []
    base_name = f"baseline {spec['baseline']}" + (
        " (where it moves other bytes than the rung, both are drawn as the time of the fewer bytes at the roof over "
        "their own time)" if spec.get("rescaled") else "")
    for key, color, dash, name in (("base", BASE, "6,3", base_name),
                                   ("best", BEST, "", "best rung at each size (hover: which)")):
        lines.append({"name": name, "color": color, "dash": dash, "values": [
            {"share": p[key], "low": p[f"{key}_low"], "high": p[f"{key}_high"], "runs": p[f"{key}_runs"],
             "who": p["best_variant"] if key == "best" else spec["baseline"]} for p in pts]})
    return _draw_lines(title, [p["label"] for p in pts], lines, spec["roof"], spec.get("runs", 1), legend=[1, 0])


def draw_compare(spec: dict[str, Any]) -> bytes:
    """One line per variant of a page's comparison over `over`, in the page's order, each in its own colour and dash,
    medians with their range shaded as `draw_curve`; a point where a variant was not measured is left out of its
    line."""
    title = (f"{spec['artifact']} over {spec['over']}" + (f" at {spec['at']}" if spec["at"] else "") +
             f": share of {spec['roof']} on {spec['gpu']}, {spec['date']}")
    lines = []
    for n, v in enumerate(spec["variants"]):
        lines.append({"name": v, "color": PALETTE[n % len(PALETTE)], "dash": DASHES[n % len(DASHES)],
                      "values": [({**p["values"][v], "who": v} if v in p["values"] else None)
                                 for p in spec["points"]]})
    return _draw_lines(title, [p["label"] for p in spec["points"]], lines, spec["roof"], spec["runs"],
                       legend=list(range(len(lines))))


def _draw_lines(title: str, labels: list[str], lines: list[dict[str, Any]], roof: str, runs: int,
                legend: list[int]) -> bytes:
    """Lines over the sizes, drawn in the order given (the last on top): each point the median of the runs with their
    range shaded around its line and both in its tooltip; the sizes under the axis, turned when they do not fit;
    the legend below, in the order `legend` gives."""
    body, top = _title(title)
    top += 10
    right, plot = WIDTH - 14, 200
    widest = max(len(label) for label in labels) * TEXT * 0.56
    turned = widest + 6 > (right - 68) / max(1, len(labels) - 1)
    left = max(48.0, widest * 0.5 + 4) if turned else 48.0  # a label turned 60 degrees reaches half its width left
    bottom = top + plot
    values = [v[k] for line in lines for v in line["values"] if v is not None for k in ("share", "high")]
    ticks = _ticks(0.0, max(1.0, max(values)), 5)
    hi = ticks[-1] or 1.0

    def x(i: int) -> float:
        return left + 10 + i * (right - left - 20) / max(1, len(labels) - 1)

    def y(v: float) -> float:
        return bottom - v / hi * (bottom - top)

    for t in ticks:
        body.append(f'<line x1="{left}" y1="{_n(y(t))}" x2="{right}" y2="{_n(y(t))}" stroke="{GRID}"/>')
        body.append(_text(left - 6, y(t) + 5, f"{t:.0%}", anchor="end", fill=MUTED))
    body.append(f'<line x1="{left}" y1="{_n(y(1.0))}" x2="{right}" y2="{_n(y(1.0))}" stroke="{MUTED}" '
                f'stroke-dasharray="5,4"/>')
    label_h = widest if turned else TEXT
    for i, label in enumerate(labels):
        if turned:
            body.append(_text(x(i) + 4, bottom + 12, label, anchor="end", fill=MUTED)
                        .replace("<text ", f'<text transform="rotate(-60 {_n(x(i) + 4)} {_n(bottom + 12)})" ', 1))
        else:
            body.append(_text(x(i), bottom + 20, label, anchor="middle", fill=MUTED))
    drawn = [[(i, v) for i, v in enumerate(line["values"]) if v is not None] for line in lines]
    for line, pts in zip(lines, drawn, strict=True):  # the range of the runs, under every line
        if any(v["high"] > v["low"] for _, v in pts):
            edge = [(i, v["high"]) for i, v in pts] + [(i, v["low"]) for i, v in reversed(pts)]
            body.append(f'<polygon points="{" ".join(f"{_n(x(i))},{_n(y(v))}" for i, v in edge)}" '
                        f'fill="{line["color"]}" fill-opacity="0.22" stroke="none"/>')
    for line, pts in zip(lines, drawn, strict=True):
        dash = f' stroke-dasharray="{line["dash"]}"' if line["dash"] else ""
        path = " ".join(f"{_n(x(i))},{_n(y(v['share']))}" for i, v in pts)
        body.append(f'<polyline points="{path}" fill="none" stroke="{line["color"]}" stroke-width="2.5"{dash}/>')
        for i, v in pts:
            spread = (f" (median of {v['runs']} runs, {fmt(v['low'] * 100, 3)}–{fmt(v['high'] * 100, 3)}%)"
                      if v["runs"] > 1 else "")
            body.append(f'<circle cx="{_n(x(i))}" cy="{_n(y(v["share"]))}" r="4" fill="{line["color"]}"><title>'
                        f"{html.escape(labels[i])}: {html.escape(v['who'])} {fmt(v['share'] * 100, 3)}% of "
                        f"{html.escape(roof)}{spread}</title></circle>")
    body.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{bottom}" stroke="{INK}"/>')
    legend_y = bottom + (label_h * 0.87 + 12 if turned else 20) + 34
    items: list[tuple[str | None, str, str]] = [
        (lines[n]["color"], f' stroke-dasharray="{lines[n]["dash"]}"' if lines[n]["dash"] else "", lines[n]["name"])
        for n in legend]
    if runs > 1:
        items.append((None, "", f"shaded: the range over the series' last {runs} runs; each line is their median"))
    for swatch, dash, name in items:
        if swatch is None:  # the band
            body.append(f'<rect x="10" y="{_n(legend_y - 11)}" width="18" height="12" fill="{MUTED}" '
                        'fill-opacity="0.22"/>')
        else:
            body.append(f'<line x1="10" y1="{_n(legend_y - 5)}" x2="28" y2="{_n(legend_y - 5)}" stroke="{swatch}" '
                        f'stroke-width="3"{dash}/>')
        wrapped = _wrap(name, WIDTH - 40)
        body += _lines(34, legend_y, wrapped)
        legend_y += len(wrapped) * (TEXT + 4) + 4
    return _svg(WIDTH, legend_y, title, body)
