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
from kwiki.verify.history import ClaimRow, RecordRow
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
    series: dict[str, list[tuple[str, float]]] = {}
    gpus = {r.gpu for r in rows}
    for row in sorted(rows, key=lambda r: (r.date, r.claim)):
        ref = refs.get(row.claim)
        if row.value is None or not ref:
            continue
        label = row.claim if len(gpus) == 1 else f"{row.claim} ({row.gpu})"
        series.setdefault(label, []).append((row.date, row.value / ref))
    if not series:
        return None
    return {"kind": "history", "series": [{"label": k, "points": v} for k, v in sorted(series.items())]}


# ---------------------------------------------------------------- drawing

WIDTH = 680
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
INK, MUTED, GRID = "#212121", "#616161", "#e0e0e0"
BAR, BEST, BASE = "#5c6bc0", "#2e7d32", "#9e9e9e"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")


def _n(x: float) -> str:
    """A coordinate: one decimal, no '-0.0', so the same chart is always the same bytes."""
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def _text(x: float, y: float, text: str, *, size: int = 11, anchor: str = "start", fill: str = INK,
          weight: str = "normal") -> str:
    return (f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
            f'font-weight="{weight}">{html.escape(text)}</text>')


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


def draw_ladder(spec: dict[str, Any]) -> bytes:
    """Horizontal bars, one per variant, the best one green, with the run's spread as error bars."""
    bars = spec["bars"]
    row, top, bottom = 22, 30, 42
    label_w = min(300, max(80, 6.8 * max(len(b["label"]) for b in bars) + 18))
    left, right = label_w, WIDTH - 64
    height = top + row * len(bars) + bottom
    ticks = _ticks(0, max(b["value"] * (1 + b["spread"]) for b in bars))
    scale = (right - left) / (ticks[-1] or 1.0)
    best = (min if spec["better"] == "lower" else max)(b["value"] for b in bars)
    title = f"{spec['artifact']} on {spec['gpu']}, {spec['date']}" + (f" ({spec['params']})" if spec["params"] else "")
    title = title if len(title) <= 96 else title[:95] + "…"
    body = [_text(8, 18, title, size=12, weight="bold")]
    for t in ticks:
        x = left + t * scale
        body.append(f'<line x1="{_n(x)}" y1="{top - 4}" x2="{_n(x)}" y2="{_n(height - bottom + 4)}" stroke="{GRID}"/>')
        body.append(_text(x, height - bottom + 18, fmt(t, trim=True), size=10, anchor="middle", fill=MUTED))
    for i, b in enumerate(bars):
        y = top + i * row
        w = b["value"] * scale
        body.append(_text(left - 6, y + row / 2 + 4, b["label"], anchor="end"))
        body.append(f'<rect x="{_n(left)}" y="{_n(y + 3)}" width="{_n(w)}" height="{row - 6}" '
                    f'fill="{BASE if b["baseline"] else BEST if b["value"] == best else BAR}"/>')
        if b["spread"]:
            e = b["value"] * b["spread"] * scale
            body.append(f'<line x1="{_n(left + w - e)}" y1="{_n(y + row / 2)}" x2="{_n(left + w + e)}" '
                        f'y2="{_n(y + row / 2)}" stroke="{INK}"/>')
        body.append(_text(left + w + 5, y + row / 2 + 4, fmt(b["value"], trim=True), size=10, fill=MUTED))
    body.append(f'<line x1="{_n(left)}" y1="{top - 4}" x2="{_n(left)}" y2="{_n(height - bottom + 4)}" stroke="{INK}"/>')
    axis = f"{spec['unit']} ({spec['better']} is better)"
    if spec.get("left_out"):
        axis += f"; {spec['left_out']} more not shown"
    body.append(_text((left + right) / 2, height - 6, axis, size=11, anchor="middle", fill=MUTED))
    return _svg(WIDTH, height, title, body)


def draw_history(spec: dict[str, Any]) -> bytes:
    """One line per claim: its measured figure over the runs, as a multiple of the claimed figure."""
    series = spec["series"]
    dates = sorted({d for s in series for d, _ in s["points"]})
    values = [v for s in series for _, v in s["points"]] + [1.0]
    left, right, top, height = 56, WIDTH - 170, 38, 256
    bottom = height - 36
    pad = (max(values) - min(values)) * 0.1 or 0.05
    ticks = _ticks(min(values) - pad, max(values) + pad)
    lo, hi = ticks[0], ticks[-1]

    def y(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    def x(i: int) -> float:
        return (left + right) / 2 if len(dates) == 1 else left + 16 + i * (right - left - 32) / (len(dates) - 1)

    title = "each claim's measured figure over time (1.0 = the claimed figure)"
    body = [_text(8, 18, title, size=12, weight="bold")]
    for t in ticks:
        body.append(f'<line x1="{left}" y1="{_n(y(t))}" x2="{right}" y2="{_n(y(t))}" stroke="{GRID}"/>')
        body.append(_text(left - 6, y(t) + 4, fmt(t, trim=True), size=10, anchor="end", fill=MUTED))
    body.append(f'<line x1="{left}" y1="{_n(y(1.0))}" x2="{right}" y2="{_n(y(1.0))}" stroke="{MUTED}" '
                f'stroke-dasharray="5,4"/>')
    body.append(_text(right - 2, y(1.0) - 4, "claimed", size=9, anchor="end", fill=MUTED))
    days = [d[:10] for d in dates]
    ticks_text = days if len(set(days)) == len(days) else [d[5:16].replace("T", " ") for d in dates]
    step = max(1, math.ceil(len(dates) / 6))
    for i in range(0, len(dates), step):
        body.append(_text(x(i), bottom + 18, ticks_text[i], size=10, anchor="middle", fill=MUTED))
    pos = {d: i for i, d in enumerate(dates)}
    for k, s in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        points = " ".join(f"{_n(x(pos[d]))},{_n(y(v))}" for d, v in s["points"])
        body.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.8"/>')
        body += [f'<circle cx="{_n(x(pos[d]))}" cy="{_n(y(v))}" r="3" fill="{color}"/>' for d, v in s["points"]]
        ly = top + 8 + 18 * k
        if ly < bottom:
            label = s["label"] if len(s["label"]) <= 24 else s["label"][:23] + "…"
            body.append(f'<line x1="{right + 14}" y1="{_n(ly)}" x2="{right + 32}" y2="{_n(ly)}" stroke="{color}" '
                        f'stroke-width="2"/>')
            body.append(_text(right + 38, ly + 4, label, size=10))
    body.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{bottom}" stroke="{INK}"/>')
    body.append(_text(14, (top + bottom) / 2, "measured / claimed", size=10, anchor="middle", fill=MUTED)
                .replace("<text ", f'<text transform="rotate(-90 14 {_n((top + bottom) / 2)})" ', 1))
    return _svg(WIDTH, height, title, body)


def draw_roofline(spec: dict[str, Any]) -> bytes:
    """Log-log: FLOP/s against FLOP per byte, the measured bandwidth roof as a line, one dot per kernel."""
    pts = spec["points"]
    left, right, top, bottom = 64, WIDTH - 24, 36, 330
    xs = [p["intensity"] for p in pts]
    ys = [p["tflop_per_s"] for p in pts]
    roof = spec["roof_gb_per_s"] / 1e3  # TFLOP/s per (FLOP/byte)
    x_lo, x_hi = 10 ** math.floor(math.log10(min(xs) / 2)), 10 ** math.ceil(math.log10(max(xs) * 2))
    y_lo = 10 ** math.floor(math.log10(min(ys) / 2))
    y_hi = 10 ** math.ceil(math.log10(max(max(ys), roof * x_hi) * 1.05))

    def x(v: float) -> float:
        return left + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * (right - left)

    def y(v: float) -> float:
        return bottom - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * (bottom - top)

    title = f"roofline on {spec['gpu']}, {spec['date']}: measured read ceiling {spec['roof_gb_per_s'] / 1e3:.3g} TB/s"
    body = [_text(8, 18, title, size=12, weight="bold")]
    for e in range(round(math.log10(x_lo)), round(math.log10(x_hi)) + 1):
        body.append(f'<line x1="{_n(x(10 ** e))}" y1="{top}" x2="{_n(x(10 ** e))}" y2="{bottom}" stroke="{GRID}"/>')
        body.append(_text(x(10 ** e), bottom + 16, fmt(10 ** e, trim=True), size=10, anchor="middle", fill=MUTED))
    for e in range(round(math.log10(y_lo)), round(math.log10(y_hi)) + 1):
        body.append(f'<line x1="{left}" y1="{_n(y(10 ** e))}" x2="{right}" y2="{_n(y(10 ** e))}" stroke="{GRID}"/>')
        body.append(_text(left - 6, y(10 ** e) + 4, fmt(10 ** e, trim=True), size=10, anchor="end", fill=MUTED))
    x0, x1 = x_lo, min(x_hi, y_hi / roof)
    body.append(f'<line x1="{_n(x(x0))}" y1="{_n(y(max(roof * x0, y_lo)))}" x2="{_n(x(x1))}" '
                f'y2="{_n(y(roof * x1))}" stroke="{INK}" stroke-width="1.5"/>')
    ours = [p for p in pts if not p["baseline"]]
    for p in sorted(pts, key=lambda p: p["baseline"], reverse=True):  # baselines first, ours drawn on top
        color = BASE if p["baseline"] else BEST
        fill = "#ffffff" if p["baseline"] else color
        body.append(f'<circle cx="{_n(x(p["intensity"]))}" cy="{_n(y(p["tflop_per_s"]))}" r="4" fill="{fill}" '
                    f'stroke="{color}" stroke-width="1.5"/>')
    for k, p in enumerate(ours, 1):  # numbers beside the dots, names in the legend below
        body.append(_text(x(p["intensity"]) - 7, y(p["tflop_per_s"]) + 4, str(k), size=9, anchor="end", fill=INK))
        body.append(_text(left, bottom + 52 + 14 * (k - 1), f"{k}  {p['label']}: {p['variant']} "
                          f"({fmt(p['tflop_per_s'], trim=True)} TFLOP/s)", size=10, fill=MUTED))
    body.append(_text((left + right) / 2, bottom + 32, "arithmetic intensity (FLOP per byte moved)", size=11,
                      anchor="middle", fill=MUTED))
    body.append(_text(14, (top + bottom) / 2, "TFLOP/s", size=10, anchor="middle", fill=MUTED)
                .replace("<text ", f'<text transform="rotate(-90 14 {_n((top + bottom) / 2)})" ', 1))
    body.append(_text(right, bottom + 32, "filled: best variant, hollow: baseline", size=9, anchor="end", fill=MUTED))
    return _svg(WIDTH, bottom + 52 + 14 * len(ours), title, body)


def draw(spec: dict[str, Any]) -> bytes:
    """The SVG of a chart spec."""
    return {"ladder": draw_ladder, "history": draw_history, "roofline": draw_roofline}[spec["kind"]](spec)
