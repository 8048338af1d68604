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


TABLE_RUNS = 3  # runs per claim in the table beside the history chart (a verdict's): a page must not grow with its runs


def history_table(spec: dict[str, Any]) -> list[list[str]]:
    """The history chart's values as rows, one per claim (its measured / claimed at each of its last `TABLE_RUNS`
    runs, oldest first, with the run's commit or date; the chart has them all), for a table beside the chart: what
    a tooltip would show, readable without a pointer, two columns wide however many claims and runs there are, and
    no longer however many runs a page has had."""
    rows = [["claim", f"measured / claimed, run by run (oldest first; the last {TABLE_RUNS})"]]
    for s in spec["series"]:
        points = sorted(s["points"])
        values = [f"{fmt(v, 3)} ({c or d[:10]})" for d, c, v in points[-TABLE_RUNS:]]
        earlier = len(points) - TABLE_RUNS
        rows.append([s["label"], (f"{earlier} earlier in the chart, then " if earlier > 0 else "") + ", ".join(values)])
    return rows


def dtype_name(dtype: object) -> str:
    """One spelling per dtype ('bfloat16' and 'bf16' are one roof, not two): kwiki.results.peaks' names."""
    from kwiki.results.peaks import dtype_name as peaks_name

    return peaks_name(dtype) or str(dtype or "")


def _shape_key(params: dict[str, Any]) -> str:
    """A GEMM's parameters as one shape, however the artifact spells them: 'MxNxK' (M, N, K in either case)."""
    dims = {k.upper(): v for k, v in params.items() if k.upper() in ("M", "N", "K")}
    rest = {k: v for k, v in params.items() if k.upper() not in ("M", "N", "K") and k != "dtype"}
    shape = "x".join(str(dims[k]) for k in ("M", "N", "K") if k in dims)
    return ", ".join(x for x in (shape, params_text(rest)) if x)


def compute_roofline_specs(records: list[RecordRow], artifacts: list[str], dram_tb_per_s: dict[str, float],
                           set_aside: frozenset[str] | set[str] = frozenset()) -> list[dict[str, Any]]:
    """A roofline for compute-bound artifacts (GEMM): the best variant per shape and dtype at its arithmetic
    intensity, under the memory roof (`dram_tb_per_s`: the datasheet bandwidth per GPU model) and a compute
    roof per dtype: the highest TFLOP/s any record of that dtype reached in the run (measured, not a datasheet
    figure). Dtypes are compared under one spelling (`dtype_name`); the variants the page sets aside (all-zero
    inputs) are never a point nor a roof."""
    by_gpu: dict[str, list[RecordRow]] = {}
    for row in records:
        if (row.passed and row.artifact in artifacts and row.variant not in set_aside
                and {"tflop_per_s", "gb_per_s"} <= set(row.figures)):
            by_gpu.setdefault(row.gpu, []).append(row)
    specs = []
    for gpu in sorted(by_gpu):
        if gpu not in dram_tb_per_s:
            continue
        latest = {a: max(r.date for r in by_gpu[gpu] if r.artifact == a) for a in {r.artifact for r in by_gpu[gpu]}}
        run = [r for r in by_gpu[gpu] if r.date == latest[r.artifact]]
        best: dict[tuple[str, str], RecordRow] = {}
        roofs: dict[str, float] = {}
        for r in run:
            dtype = dtype_name(r.params.get("dtype"))
            key = (dtype, _shape_key(dict(r.params)))
            if key not in best or r.figures["tflop_per_s"] > best[key].figures["tflop_per_s"]:
                best[key] = r
            roofs[dtype] = max(roofs.get(dtype, 0.0), r.figures["tflop_per_s"])
        points = [{"label": f"{shape} {dtype}".strip(), "variant": r.variant, "baseline": False,
                   "tflop_per_s": r.figures["tflop_per_s"],
                   "intensity": r.figures["tflop_per_s"] * 1e3 / r.figures["gb_per_s"]}
                  for (dtype, shape), r in sorted(best.items(), key=lambda kv: (kv[0][0], _natural_shape(kv[0][1])))]
        date = max(latest.values())[:10]
        specs.append({"kind": "roofline", "gpu": gpu, "date": date,
                      "roof_gb_per_s": dram_tb_per_s[gpu] * 1e3, "points": points,
                      "compute_roofs": [{"label": d or "all", "tflop_per_s": v} for d, v in sorted(roofs.items())],
                      "title": f"GEMM roofline, {gpu}, {date}",
                      "about": f"solid: datasheet memory roof {dram_tb_per_s[gpu]:.3g} TB/s; dashed: the best "
                               "measured TFLOP/s of each dtype"
                               + (f"; never counted as best: {', '.join(sorted(set_aside))}" if set_aside else "")})
    return specs


def _natural_shape(shape: str) -> tuple[int, ...]:
    head = shape.split(",")[0]
    return tuple(int(x) for x in head.split("x") if x.isdigit())


# ---------------------------------------------------------------- drawing
# Drawn for a phone: 400 units wide with text of at least 14 units, so text stays at 11 px or more when a
# 390 px screen shows the chart in a ~330 px column (14 x 330 / 400 = 11.6); a desktop shows it up
# to 600 px wide (kwiki.css). Titles wrap instead of being cut; legends are complete, one entry a line.

WIDTH = 400
TEXT = 14  # the smallest text of any chart
TITLE = 15
CHAR = 0.56  # average glyph width of the sans-serif font, in ems (for wrapping and label widths)
BOLD_CHAR = 0.64  # the same of its bold (titles)
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
    lines = _wrap(title, (WIDTH - 16) * CHAR / BOLD_CHAR, TITLE)
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
    widest = max(_width(label) for label in labels) + 10  # a label and the gap to the next: none collide
    per_run = (right - left - 24) / (len(runs) - 1) if len(runs) > 1 else widest  # x(i + 1) - x(i)
    step = max(1, math.ceil(widest / per_run))
    for i in range(0, len(runs), step):
        half = _width(labels[i]) / 2  # kept inside the drawing at both ends
        body.append(_text(min(max(x(i), half + 2), WIDTH - half - 2), bottom + 20, labels[i], anchor="middle",
                          fill=MUTED))
    pos = {r: i for i, r in enumerate(runs)}
    legend_y = bottom + 48
    for k, s in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        dash = "" if k < len(PALETTE) else ' stroke-dasharray="6,3"'  # past the palette: the colour, dashed
        pts = [(x(pos[(d, c)]), y(v), d, c, v) for d, c, v in s["points"]]
        body.append(f'<polyline points="{" ".join(f"{_n(a)},{_n(b)}" for a, b, *_ in pts)}" fill="none" '
                    f'stroke="{color}" stroke-width="2"{dash}/>')
        for a, b, d, c, v in pts:
            body.append(f'<circle cx="{_n(a)}" cy="{_n(b)}" r="3.5" fill="{color}"><title>'
                        f'{html.escape(s["label"])}: {fmt(v, 3)}x the claim, {html.escape(c or "")} {d[:10]}'
                        f"</title></circle>")
        lines = _wrap(s["label"], WIDTH - 40)
        body.append(f'<line x1="10" y1="{_n(legend_y - 5)}" x2="28" y2="{_n(legend_y - 5)}" stroke="{color}" '
                    f'stroke-width="3"{dash}/>')
        body += _lines(34, legend_y, lines)
        legend_y += len(lines) * (TEXT + 4) + 4
    body.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{bottom}" stroke="{INK}"/>')
    body.append(_text(WIDTH / 2, bottom + 36, "runs, by commit (oldest first)", anchor="middle", fill=MUTED))
    return _svg(WIDTH, legend_y, title, body)


def tick_text(value: float) -> str:
    """An axis label a phone has room for: 100, 1k, 10k, 100k, 1M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return fmt(value / scale, trim=True) + suffix
    return fmt(value, trim=True)


Box = tuple[float, float, float, float]  # x0, y0, x1, y1


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(anchors: list[tuple[float, float, str]], taken: list[Box], bounds: Box) -> list[tuple[float, float]]:
    """A spot for each label (its text's start x and baseline y) next to its anchor point (x, y, text), where it
    overlaps no label placed before, no point and nothing in `taken`, and stays inside `bounds`: the first free
    of twelve spots around the point, further out each ring; the last resort (all taken) is the first spot."""
    dots = [(x - 4.5, y - 4.5, x + 4.5, y + 4.5) for x, y, _ in anchors]
    placed: list[Box] = []
    out = []
    for x, y, text in anchors:
        w, h = _width(text), TEXT
        spots = []
        for ring in (1.0, 2.0, 3.2):
            dx, dy = 7 * ring, 9 * ring
            spots += [(x - dx - w, y + 5), (x + dx, y + 5), (x - w / 2, y - dy), (x - w / 2, y + dy + h - 2),
                      (x - dx - w, y - dy), (x + dx, y - dy), (x - dx - w, y + dy + h - 2), (x + dx, y + dy + h - 2)]
        chosen = None
        for sx, sy in spots:
            box = (sx - 1, sy - h + 2, sx + w + 1, sy + 3)
            inside = bounds[0] <= box[0] and box[2] <= bounds[2] and bounds[1] <= box[1] and box[3] <= bounds[3]
            if inside and not any(_overlaps(box, b) for b in [*placed, *dots, *taken]):
                chosen = (sx, sy, box)
                break
        if chosen is None:
            sx, sy = spots[0]
            chosen = (sx, sy, (sx - 1, sy - h + 2, sx + w + 1, sy + 3))
        placed.append(chosen[2])
        out.append((chosen[0], chosen[1]))
    return out


def draw_roofline(spec: dict[str, Any]) -> bytes:
    """Log-log: FLOP/s against FLOP per byte, the bandwidth roof as a line, any compute roofs as flat dashed
    lines named at their right end, one dot per kernel, numbered beside it where no other label is, and the
    legend below. Every label is kept inside the drawing: tick labels are short (1k, 10k), the margins are
    measured from them, and the title wraps."""
    pts = spec["points"]
    roofs = sorted(spec.get("compute_roofs", []), key=lambda r: -r["tflop_per_s"])  # [{"label", "tflop_per_s"}]
    title = spec.get("title") or (f"roofline on {spec['gpu']}, {spec['date']}: measured read ceiling "
                                  f"{spec['roof_gb_per_s'] / 1e3:.3g} TB/s")
    body, top = _title(title)
    if spec.get("about"):
        about = _wrap(spec["about"], WIDTH - 16)
        body += _lines(8, top + 8, about, fill=MUTED)
        top += len(about) * (TEXT + 4)
    top += 14
    xs = [p["intensity"] for p in pts]
    ys = [p["tflop_per_s"] for p in pts] + [r["tflop_per_s"] for r in roofs]
    roof = spec["roof_gb_per_s"] / 1e3  # TFLOP/s per (FLOP/byte)
    x_lo, x_hi = 10 ** math.floor(math.log10(min(xs) / 2)), 10 ** math.ceil(math.log10(max(xs) * 2))
    y_lo = 10 ** math.floor(math.log10(min(ys) / 2))
    y_hi = 10 ** math.ceil(math.log10(max(max(ys) * 1.05, min(roof * x_hi, max(ys) * 10))))
    y_decades = range(round(math.log10(y_lo)), round(math.log10(y_hi)) + 1)
    left = 26 + max(_width(tick_text(10 ** e)) for e in y_decades)  # the rotated axis name, then the labels
    right = WIDTH - 8 - _width(tick_text(x_hi)) / 2
    bottom = top + 230

    def x(v: float) -> float:
        return left + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * (right - left)

    def y(v: float) -> float:
        return bottom - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * (bottom - top)

    decades = range(round(math.log10(x_lo)), round(math.log10(x_hi)) + 1)
    every = max(1, math.ceil(len(decades) / 5))
    for n, e in enumerate(decades):
        body.append(f'<line x1="{_n(x(10 ** e))}" y1="{top}" x2="{_n(x(10 ** e))}" y2="{bottom}" stroke="{GRID}"/>')
        if n % every == 0:
            body.append(_text(x(10 ** e), bottom + 18, tick_text(10 ** e), anchor="middle", fill=MUTED))
    for e in y_decades:
        body.append(f'<line x1="{_n(left)}" y1="{_n(y(10 ** e))}" x2="{_n(right)}" y2="{_n(y(10 ** e))}" '
                    f'stroke="{GRID}"/>')
        body.append(_text(left - 5, y(10 ** e) + 5, tick_text(10 ** e), anchor="end", fill=MUTED))
    x0, x1 = x_lo, min(x_hi, y_hi / roof)
    body.append(f'<line x1="{_n(x(x0))}" y1="{_n(y(max(roof * x0, y_lo)))}" x2="{_n(x(x1))}" '
                f'y2="{_n(y(roof * x1))}" stroke="{INK}" stroke-width="1.5"/>')
    taken: list[Box] = []
    label_y = -math.inf
    for r in roofs:  # highest first; a name that would touch the one above moves below its line
        start = max(x_lo, r["tflop_per_s"] / roof)
        line_y = y(r["tflop_per_s"])
        body.append(f'<line x1="{_n(x(start))}" y1="{_n(line_y)}" x2="{_n(right)}" y2="{_n(line_y)}" '
                    f'stroke="{MUTED}" stroke-width="1.5" stroke-dasharray="6,3"/>')
        ty = max(line_y - 4, label_y + TEXT + 2)
        label_y = ty
        w = _width(r["label"])
        taken.append((right - 2 - w, ty - TEXT + 2, right, ty + 3))
        body.append(_text(right - 2, ty, r["label"], anchor="end", fill=MUTED))
    ours = [p for p in pts if not p["baseline"]]
    for p in sorted(pts, key=lambda p: p["baseline"], reverse=True):  # baselines first, ours drawn on top
        color = BASE if p["baseline"] else BEST
        fill = "#ffffff" if p["baseline"] else color
        body.append(f'<circle cx="{_n(x(p["intensity"]))}" cy="{_n(y(p["tflop_per_s"]))}" r="4.5" fill="{fill}" '
                    f'stroke="{color}" stroke-width="1.5"><title>{html.escape(p["label"])}: '
                    f'{html.escape(p["variant"])}, {fmt(p["tflop_per_s"], 3)} TFLOP/s at '
                    f'{fmt(p["intensity"], 3)} FLOP/B</title></circle>')
    body.append(_text((left + right) / 2, bottom + 36, "FLOP per byte moved (log)", anchor="middle", fill=MUTED))
    body.append(_text(12, (top + bottom) / 2, "TFLOP/s", anchor="middle", fill=MUTED)
                .replace("<text ", f'<text transform="rotate(-90 12 {_n((top + bottom) / 2)})" ', 1))
    anchors = [(x(p["intensity"]), y(p["tflop_per_s"]), str(k)) for k, p in enumerate(ours, 1)]
    for (_, _, text), (tx, ty) in zip(anchors, place_labels(anchors, taken, (left, top, right, bottom)), strict=True):
        body.append(_text(tx, ty, text, fill=INK))
    legend_y = bottom + 58
    body += _lines(10, legend_y, _wrap("filled: best variant; hollow: baseline; numbers: the legend", WIDTH - 20),
                   fill=MUTED)
    legend_y += 2 * (TEXT + 4)
    for k, p in enumerate(ours, 1):  # numbers beside the dots, names in the legend below
        lines = _wrap(f"{k}  {p['label']}: {p['variant']} ({fmt(p['tflop_per_s'], 3, trim=True)} TFLOP/s)", WIDTH - 20)
        body += _lines(10, legend_y, lines)
        legend_y += len(lines) * (TEXT + 4)
    return _svg(WIDTH, legend_y + 4, title, body)


def draw(spec: dict[str, Any]) -> bytes:
    """The SVG of a chart spec."""
    return {"ladder": draw_ladder, "history": draw_history, "roofline": draw_roofline}[spec["kind"]](spec)
