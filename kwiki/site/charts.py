"""Charts of measured figures as self-contained SVG: a ladder's variants as bars, a claim's history as lines.

A chart is first a `spec` (plain JSON-able data: title, unit, bars or series), then an SVG written
here directly: rectangles, lines and text in the reader's own sans-serif font, no script, no link,
nothing fetched, coordinates rounded so the same spec always gives the same bytes. (matplotlib
took a quarter to half a second a chart, which a wiki of a thousand pages cannot afford; these
take a millisecond, so nothing is cached.)
"""

from __future__ import annotations

import html
import math
from typing import Any

from kwiki.core.numbers import fmt, params_text
from kwiki.results.store import ClaimRow, RecordRow
from kwiki.wiki.model import FIGURE_UNITS, Claim

MAX_BARS = 48
MAX_LADDERS = 6  # charts per artifact and GPU, one per parameter set
# throughput first: it compares variants that move different amounts of work
PREFERRED_FIGURES = ("tflop_per_s", "tb_per_s", "gb_per_s", "gflop_per_s", "time_us", "time_ms")
LOWER_IS_BETTER = frozenset({"time_us", "time_ms", "registers", "spill_bytes", "local_bytes"})


# ---------------------------------------------------------------- specs from the results store


def _figure(rows: list[RecordRow], wanted: list[str]) -> str | None:
    """The figure to chart: the first the page's claims measure, else the first preferred one, that most rows have."""
    counts: dict[str, int] = {}
    for r in rows:
        for name in r.figures:
            counts[name] = counts.get(name, 0) + 1
    common = [name for name in [*wanted, *PREFERRED_FIGURES] if counts.get(name, 0) * 2 >= len(rows)]
    return common[0] if common else None


def ladder_specs(records: list[RecordRow], variant_order: list[str], baseline: str | None = None,
                 wanted: list[str] | None = None) -> list[dict[str, Any]]:
    """Bar-chart specs of an artifact's latest passing run on each GPU model: one per parameter set.

    `wanted` names the figures the page's claims measure (charted first when the run has them).
    """
    specs = []
    by_gpu: dict[str, list[RecordRow]] = {}
    for row in records:
        if row.passed:
            by_gpu.setdefault(row.gpu, []).append(row)
    rank = {name: i for i, name in enumerate(variant_order)}
    for gpu in sorted(by_gpu):
        latest = max(r.date for r in by_gpu[gpu])
        run = [r for r in by_gpu[gpu] if r.date == latest]
        figure = _figure(run, wanted or [])
        if figure is None:
            continue
        groups: dict[str, list[RecordRow]] = {}
        for r in run:
            groups.setdefault(params_text(r.params), []).append(r)
        for params in sorted(groups)[:MAX_LADDERS]:
            rows = sorted((r for r in groups[params] if figure in r.figures),
                          key=lambda r: (rank.get(r.variant, len(rank)), r.variant))
            if not rows:
                continue
            bars = [{"label": r.variant + (" (baseline)" if r.variant == baseline else ""),
                     "value": r.figures[figure], "spread": r.spread or 0.0, "baseline": r.variant == baseline}
                    for r in rows[:MAX_BARS]]
            specs.append({
                "kind": "ladder", "artifact": run[0].artifact, "gpu": gpu, "date": latest[:10], "params": params,
                "figure": figure, "unit": FIGURE_UNITS.get(figure, figure),
                "better": "lower" if figure in LOWER_IS_BETTER else "higher",
                "bars": bars, "left_out": len(groups[params]) - len(bars),
            })
    return specs


def roofline_specs(records: list[RecordRow], ceilings: dict[str, tuple[str, str | None]]) -> list[dict[str, Any]]:
    """One roofline per GPU model: each configuration's best variant (and its baseline) at its arithmetic
    intensity, under the bandwidth roof measured by the artifacts' ceiling variants in the same runs.

    `ceilings` maps an artifact to (its ceiling variant, its baseline variant or None).
    """
    by_gpu: dict[str, list[RecordRow]] = {}
    for row in records:
        if row.passed and row.artifact in ceilings:
            by_gpu.setdefault(row.gpu, []).append(row)
    specs = []
    for gpu in sorted(by_gpu):
        latest = {a: max(r.date for r in by_gpu[gpu] if r.artifact == a) for a in {r.artifact for r in by_gpu[gpu]}}
        run = [r for r in by_gpu[gpu] if r.date == latest[r.artifact]]
        roofs = [r.figures["gb_per_s"] for r in run
                 if r.variant == ceilings[r.artifact][0] and "gb_per_s" in r.figures]
        groups: dict[tuple[str, str], list[RecordRow]] = {}
        for r in run:
            if r.variant != ceilings[r.artifact][0] and {"tflop_per_s", "gb_per_s"} <= set(r.figures):
                groups.setdefault((r.artifact, params_text(r.params)), []).append(r)
        points = []
        for (artifact, params), rows in sorted(groups.items()):
            baseline = ceilings[artifact][1]
            ours = [r for r in rows if r.variant != baseline]
            picks = ([max(ours, key=lambda r: r.figures["tflop_per_s"])] if ours else []) + [
                r for r in rows if r.variant == baseline]
            short = artifact.rsplit("_sm", 1)[0]
            for r in picks:
                shape = r.params.get("shape")
                points.append({"label": f"{short} {shape if shape is not None else params}".strip(),
                               "variant": r.variant,
                               "baseline": r.variant == baseline, "tflop_per_s": r.figures["tflop_per_s"],
                               "intensity": r.figures["tflop_per_s"] * 1e3 / r.figures["gb_per_s"]})
        if roofs and points:
            specs.append({"kind": "roofline", "gpu": gpu, "date": max(latest.values())[:10],
                          "roof_gb_per_s": max(roofs), "points": points})
    return specs


def history_spec(claims: list[Claim], rows: list[ClaimRow]) -> dict[str, Any] | None:
    """A line-chart spec: each claim's measured figure over time, as a multiple of the claimed one."""
    refs = {c.id: c.reference for c in claims}
    series: dict[str, list[tuple[str, str, float]]] = {}
    gpus = {r.gpu for r in rows}
    for row in sorted(rows, key=lambda r: (r.date, r.claim)):
        ref = refs.get(row.claim)
        if row.value is None or not ref:
            continue
        label = row.claim if len(gpus) == 1 else f"{row.claim} ({row.gpu})"
        series.setdefault(label, []).append((row.date, (row.commit or "")[:7], row.value / ref))
    if not series:
        return None
    return {"kind": "history", "series": [{"label": k, "points": v} for k, v in sorted(series.items())]}


def history_table(spec: dict[str, Any]) -> list[list[str]]:
    """The history chart's values as rows (run date, commit, then each claim's measured / claimed), for a
    table beside the chart: what a tooltip would show, readable without a pointer."""
    runs = sorted({(d, c) for s in spec["series"] for d, c, _ in s["points"]})
    cells = {(s["label"], d, c): v for s in spec["series"] for d, c, v in s["points"]}
    head = ["run", "commit", *[s["label"] for s in spec["series"]]]
    return [head, *[[d[:16].replace("T", " "), c or "—",
                     *[fmt(cells[(s["label"], d, c)], 3) if (s["label"], d, c) in cells else "—"
                       for s in spec["series"]]] for d, c in runs]]


def compute_roofline_specs(records: list[RecordRow], artifacts: list[str], dram_tb_per_s: dict[str, float]
                           ) -> list[dict[str, Any]]:
    """A roofline for compute-bound artifacts (GEMM): each variant's best point per shape and dtype at its
    arithmetic intensity, under the memory roof (`dram_tb_per_s`: the datasheet bandwidth per GPU model) and a
    compute roof per dtype: the highest TFLOP/s any record of that dtype reached in the run (measured, not
    a datasheet figure)."""
    by_gpu: dict[str, list[RecordRow]] = {}
    for row in records:
        if row.passed and row.artifact in artifacts and {"tflop_per_s", "gb_per_s"} <= set(row.figures):
            by_gpu.setdefault(row.gpu, []).append(row)
    specs = []
    for gpu in sorted(by_gpu):
        if gpu not in dram_tb_per_s:
            continue
        latest = {a: max(r.date for r in by_gpu[gpu] if r.artifact == a) for a in {r.artifact for r in by_gpu[gpu]}}
        run = [r for r in by_gpu[gpu] if r.date == latest[r.artifact]]
        best: dict[str, RecordRow] = {}
        roofs: dict[str, float] = {}
        for r in run:
            dtype = str(r.params.get("dtype", ""))
            key = f"{params_text({k: v for k, v in r.params.items() if k != 'dtype'})} {dtype}".strip()
            if key not in best or r.figures["tflop_per_s"] > best[key].figures["tflop_per_s"]:
                best[key] = r
            roofs[dtype] = max(roofs.get(dtype, 0.0), r.figures["tflop_per_s"])
        points = [{"label": k, "variant": r.variant, "baseline": False, "tflop_per_s": r.figures["tflop_per_s"],
                   "intensity": r.figures["tflop_per_s"] * 1e3 / r.figures["gb_per_s"]}
                  for k, r in sorted(best.items())]
        specs.append({"kind": "roofline", "gpu": gpu, "date": max(latest.values())[:10],
                      "roof_gb_per_s": dram_tb_per_s[gpu] * 1e3, "points": points,
                      "compute_roofs": [{"label": f"{d or 'all'}: best measured {fmt(v, 3)} TFLOP/s", "tflop_per_s": v}
                                        for d, v in sorted(roofs.items())],
                      "title": f"compute roofline on {gpu}, {max(latest.values())[:10]}: datasheet memory roof "
                               f"{dram_tb_per_s[gpu]:.3g} TB/s, best measured TFLOP/s per dtype"})
    return specs


# ---------------------------------------------------------------- drawing
# Drawn for a phone: 400 units wide with text of at least 14 units, so text stays at 11 px or more when a
# 390 px screen shows the chart in a ~330 px column (14 x 330 / 400 = 11.6); a desktop shows it up
# to 600 px wide (kwiki.css). Titles wrap instead of being cut; legends are complete, one entry a line.

WIDTH = 400
TEXT = 14  # the smallest text of any chart
TITLE = 15
CHAR = 0.56  # average glyph width of the sans-serif font, in ems (for wrapping and label widths)
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
INK, MUTED, GRID = "#212121", "#595959", "#e0e0e0"
BAR, BEST, BASE = "#5c6bc0", "#2e7d32", "#8a8a8a"
PALETTE = ("#1f77b4", "#d95f02", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#9a9a1a",
           "#17becf")


def _n(x: float) -> str:
    """A coordinate: one decimal, no '-0.0', so the same chart is always the same bytes."""
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def _text(x: float, y: float, text: str, *, size: int = TEXT, anchor: str = "start", fill: str = INK,
          weight: str = "normal") -> str:
    return (f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
            f'font-weight="{weight}">{html.escape(text)}</text>')


def _width(text: str, size: int = TEXT) -> float:
    return len(text) * size * CHAR


def _wrap(text: str, width: float, size: int = TEXT) -> list[str]:
    """`text` in lines no wider than `width` (a word longer than a line gets a line of its own)."""
    lines: list[str] = []
    for word in text.split():
        if lines and _width(lines[-1] + " " + word, size) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _lines(x: float, y: float, lines: list[str], size: int = TEXT, **kw: Any) -> list[str]:
    return [_text(x, y + i * (size + 4), line, size=size, **kw) for i, line in enumerate(lines)]


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (steps of 1, 2 or 5 times a power of ten)."""
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    out, value = [], first
    while value <= high + step * 1e-9:
        out.append(round(value, 12))
        value += step
    if out[-1] < high:
        out.append(round(out[-1] + step, 12))
    return out


def _svg(width: float, height: float, title: str, body: list[str]) -> bytes:
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(width)}" height="{_n(height)}" '
            f'viewBox="0 0 {_n(width)} {_n(height)}" role="img" aria-label="{html.escape(title)}" '
            f'font-family="{html.escape(FONT)}">')
    parts = [head, f"<title>{html.escape(title)}</title>",
             f'<rect width="{_n(width)}" height="{_n(height)}" fill="#ffffff"/>', *body, "</svg>"]
    return ("\n".join(parts) + "\n").encode()


def _title(title: str) -> tuple[list[str], float]:
    """The title's lines and the y below them."""
    lines = _wrap(title, WIDTH - 16, TITLE)
    return _lines(8, 20, lines, TITLE, weight="bold"), 20 + (len(lines) - 1) * (TITLE + 4) + 10


def draw_ladder(spec: dict[str, Any]) -> bytes:
    """Horizontal bars, one per variant, the best one green, with the run's spread as error bars."""
    bars = spec["bars"]
    title = f"{spec['artifact']} on {spec['gpu']}, {spec['date']}" + (f" ({spec['params']})" if spec["params"] else "")
    body, top = _title(title)
    row, bottom = 24, 50
    top += 10
    label_w = min(WIDTH * 0.45, max(60.0, max(_width(b["label"]) for b in bars) + 12))
    left, right = label_w, WIDTH - 52
    height = top + row * len(bars) + bottom
    ticks = _ticks(0, max(b["value"] * (1 + b["spread"]) for b in bars), 4)
    scale = (right - left) / (ticks[-1] or 1.0)
    best = (min if spec["better"] == "lower" else max)(b["value"] for b in bars)
    for t in ticks:
        x = left + t * scale
        body.append(f'<line x1="{_n(x)}" y1="{top - 4}" x2="{_n(x)}" y2="{_n(height - bottom + 4)}" stroke="{GRID}"/>')
        body.append(_text(x, height - bottom + 20, fmt(t, trim=True), anchor="middle", fill=MUTED))
    for i, b in enumerate(bars):
        y = top + i * row
        w = b["value"] * scale
        label = b["label"]
        while _width(label) > label_w - 8 and len(label) > 4:
            label = label[:-2] + "…"
        body.append(f"<g><title>{html.escape(b['label'])}: {fmt(b['value'])} {html.escape(spec['unit'])}</title>")
        body.append(_text(left - 6, y + row / 2 + 5, label, anchor="end"))
        body.append(f'<rect x="{_n(left)}" y="{_n(y + 3)}" width="{_n(w)}" height="{row - 6}" '
                    f'fill="{BASE if b["baseline"] else BEST if b["value"] == best else BAR}"/>')
        if b["spread"]:
            e = b["value"] * b["spread"] * scale
            body.append(f'<line x1="{_n(left + w - e)}" y1="{_n(y + row / 2)}" x2="{_n(left + w + e)}" '
                        f'y2="{_n(y + row / 2)}" stroke="{INK}"/>')
        body.append(_text(left + w + 4, y + row / 2 + 5, fmt(b["value"], 3, trim=True), fill=MUTED))
        body.append("</g>")
    body.append(f'<line x1="{_n(left)}" y1="{top - 4}" x2="{_n(left)}" y2="{_n(height - bottom + 4)}" stroke="{INK}"/>')
    axis = f"{spec['unit']} ({spec['better']} is better)"
    if spec.get("left_out"):
        axis += f"; {spec['left_out']} more not shown"
    body.append(_text(WIDTH / 2, height - 8, axis, anchor="middle", fill=MUTED))
    return _svg(WIDTH, height, title, body)


def draw_history(spec: dict[str, Any]) -> bytes:
    """One line per claim over the runs (labelled by commit): its measured figure as a multiple of the claimed
    one; every point carries its value as a tooltip, and the legend below names every claim in full."""
    series = spec["series"]
    runs = sorted({tuple(p[:2]) for s in series for p in s["points"]})  # (date, commit)
    values = [p[2] for s in series for p in s["points"]] + [1.0]
    title = "each claim's measured figure over the runs (1.0 = the claimed figure)"
    body, top = _title(title)
    top += 8
    left, right, plot = 52, WIDTH - 36, 180
    bottom = top + plot
    pad = (max(values) - min(values)) * 0.1 or 0.05
    ticks = _ticks(min(values) - pad, max(values) + pad, 4)
    lo, hi = ticks[0], ticks[-1]

    def y(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    def x(i: int) -> float:
        return (left + right) / 2 if len(runs) == 1 else left + 12 + i * (right - left - 24) / (len(runs) - 1)

    for t in ticks:
        body.append(f'<line x1="{left}" y1="{_n(y(t))}" x2="{right}" y2="{_n(y(t))}" stroke="{GRID}"/>')
        body.append(_text(left - 6, y(t) + 5, fmt(t, trim=True), anchor="end", fill=MUTED))
    body.append(f'<line x1="{left}" y1="{_n(y(1.0))}" x2="{right}" y2="{_n(y(1.0))}" stroke="{MUTED}" '
                f'stroke-dasharray="5,4"/>')
    labels = [(c or d[:10]) for d, c in runs]
    step = max(1, math.ceil(len(runs) * _width("0000000 ") / (right - left)))
    for i in range(0, len(runs), step):
        body.append(_text(x(i), bottom + 20, labels[i], anchor="middle", fill=MUTED))
    pos = {r: i for i, r in enumerate(runs)}
    legend_y = bottom + 48
    for k, s in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        pts = [(x(pos[(d, c)]), y(v), d, c, v) for d, c, v in s["points"]]
        body.append(f'<polyline points="{" ".join(f"{_n(a)},{_n(b)}" for a, b, *_ in pts)}" fill="none" '
                    f'stroke="{color}" stroke-width="2"/>')
        for a, b, d, c, v in pts:
            body.append(f'<circle cx="{_n(a)}" cy="{_n(b)}" r="3.5" fill="{color}"><title>'
                        f'{html.escape(s["label"])}: {fmt(v, 3)}x the claim, {html.escape(c or "")} {d[:10]}'
                        f"</title></circle>")
        lines = _wrap(s["label"], WIDTH - 40)
        body.append(f'<line x1="10" y1="{_n(legend_y - 5)}" x2="28" y2="{_n(legend_y - 5)}" stroke="{color}" '
                    f'stroke-width="3"/>')
        body += _lines(34, legend_y, lines)
        legend_y += len(lines) * (TEXT + 4) + 4
    body.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{bottom}" stroke="{INK}"/>')
    body.append(_text(WIDTH / 2, bottom + 36, "runs, by commit (oldest first)", anchor="middle", fill=MUTED))
    return _svg(WIDTH, legend_y, title, body)


def draw_roofline(spec: dict[str, Any]) -> bytes:
    """Log-log: FLOP/s against FLOP per byte, the bandwidth roof as a line, any compute roofs as flat lines,
    one dot per kernel, numbered, with the legend below."""
    pts = spec["points"]
    roofs = spec.get("compute_roofs", [])  # [{"label", "tflop_per_s"}]
    title = spec.get("title") or (f"roofline on {spec['gpu']}, {spec['date']}: measured read ceiling "
                                  f"{spec['roof_gb_per_s'] / 1e3:.3g} TB/s")
    body, top = _title(title)
    top += 8
    left, right = 50, WIDTH - 12
    bottom = top + 230
    xs = [p["intensity"] for p in pts]
    ys = [p["tflop_per_s"] for p in pts] + [r["tflop_per_s"] for r in roofs]
    roof = spec["roof_gb_per_s"] / 1e3  # TFLOP/s per (FLOP/byte)
    x_lo, x_hi = 10 ** math.floor(math.log10(min(xs) / 2)), 10 ** math.ceil(math.log10(max(xs) * 2))
    y_lo = 10 ** math.floor(math.log10(min(ys) / 2))
    y_hi = 10 ** math.ceil(math.log10(max(max(ys) * 1.05, min(roof * x_hi, max(ys) * 10))))

    def x(v: float) -> float:
        return left + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * (right - left)

    def y(v: float) -> float:
        return bottom - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * (bottom - top)

    decades = range(round(math.log10(x_lo)), round(math.log10(x_hi)) + 1)
    every = max(1, math.ceil(len(decades) / 5))
    for n, e in enumerate(decades):
        body.append(f'<line x1="{_n(x(10 ** e))}" y1="{top}" x2="{_n(x(10 ** e))}" y2="{bottom}" stroke="{GRID}"/>')
        if n % every == 0:
            body.append(_text(x(10 ** e), bottom + 18, fmt(10 ** e, trim=True), anchor="middle", fill=MUTED))
    for e in range(round(math.log10(y_lo)), round(math.log10(y_hi)) + 1):
        body.append(f'<line x1="{left}" y1="{_n(y(10 ** e))}" x2="{right}" y2="{_n(y(10 ** e))}" stroke="{GRID}"/>')
        body.append(_text(left - 5, y(10 ** e) + 5, fmt(10 ** e, trim=True), anchor="end", fill=MUTED))
    x0, x1 = x_lo, min(x_hi, y_hi / roof)
    body.append(f'<line x1="{_n(x(x0))}" y1="{_n(y(max(roof * x0, y_lo)))}" x2="{_n(x(x1))}" '
                f'y2="{_n(y(roof * x1))}" stroke="{INK}" stroke-width="1.5"/>')
    for r in roofs:
        start = max(x_lo, r["tflop_per_s"] / roof)
        body.append(f'<line x1="{_n(x(start))}" y1="{_n(y(r["tflop_per_s"]))}" x2="{right}" '
                    f'y2="{_n(y(r["tflop_per_s"]))}" stroke="{MUTED}" stroke-width="1.5" stroke-dasharray="6,3"/>')
        body.append(_text(right - 2, y(r["tflop_per_s"]) - 4, r["label"], anchor="end", fill=MUTED))
    ours = [p for p in pts if not p["baseline"]]
    for p in sorted(pts, key=lambda p: p["baseline"], reverse=True):  # baselines first, ours drawn on top
        color = BASE if p["baseline"] else BEST
        fill = "#ffffff" if p["baseline"] else color
        body.append(f'<circle cx="{_n(x(p["intensity"]))}" cy="{_n(y(p["tflop_per_s"]))}" r="4.5" fill="{fill}" '
                    f'stroke="{color}" stroke-width="1.5"><title>{html.escape(p["label"])}: '
                    f'{html.escape(p["variant"])}, {fmt(p["tflop_per_s"], 3)} TFLOP/s at '
                    f'{fmt(p["intensity"], 3)} FLOP/B</title></circle>')
    body.append(_text(WIDTH / 2, bottom + 36, "FLOP per byte moved (log)", anchor="middle", fill=MUTED))
    body.append(_text(12, (top + bottom) / 2, "TFLOP/s", anchor="middle", fill=MUTED)
                .replace("<text ", f'<text transform="rotate(-90 12 {_n((top + bottom) / 2)})" ', 1))
    legend_y = bottom + 58
    body += _lines(10, legend_y, _wrap("filled: best variant; hollow: baseline; numbers: the legend", WIDTH - 20),
                   fill=MUTED)
    legend_y += 2 * (TEXT + 4)
    for k, p in enumerate(ours, 1):  # numbers beside the dots, names in the legend below
        body.append(_text(x(p["intensity"]) - 7, y(p["tflop_per_s"]) + 5, str(k), anchor="end", fill=INK))
        lines = _wrap(f"{k}  {p['label']}: {p['variant']} ({fmt(p['tflop_per_s'], 3, trim=True)} TFLOP/s)", WIDTH - 20)
        body += _lines(10, legend_y, lines)
        legend_y += len(lines) * (TEXT + 4)
    return _svg(WIDTH, legend_y + 4, title, body)


def draw(spec: dict[str, Any]) -> bytes:
    """The SVG of a chart spec."""
    return {"ladder": draw_ladder, "history": draw_history, "roofline": draw_roofline}[spec["kind"]](spec)
