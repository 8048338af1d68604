"""Measured timelines: what each warpgroup of a kernel did when, drawn from `%globaltimer` stamps.

The record shape (`Timeline`, `Span`) and its storage live in kwiki.results.timelines (the verify pipeline's
trace pass writes them; the site only reads them). `timeline_spec` turns a Timeline into chart data (lanes of the
first `MAX_BLOCKS` CTAs, times from the earliest stamp, spans past `MAX_SPANS` per lane dropped and counted),
`draw_timeline` into SVG in the conventions of kwiki.site.charts, and `caption` into one line of words. Below the
whole run, a close-up: the first CTA's lanes over ZOOM_SPANS consecutive spans of its first consumer from the
middle of its run, where a schedule's steps (a few hundred nanoseconds each) are wide enough to read. Nothing
here invents a span: a lane shows what its stamps say (the close-up clips them to its window).
"""

from __future__ import annotations

import html
from typing import Any

from kwiki.core.numbers import fmt
from kwiki.results.timelines import Span, Timeline
from kwiki.site.charts import GRID, INK, MUTED, TEXT, WIDTH, _lines, _n, _svg, _text, _ticks, _title, _wrap

PHASE_COLORS: dict[str, str] = {"producer-wait": "#bdbdbd", "tma-issue": "#1f77b4", "consumer-wait": "#e0e0e0",
                                "wgmma": "#2e7d32", "softmax": "#7b3294", "epilogue": "#d95f02"}
MAX_BLOCKS = 2
MAX_SPANS = 400
ZOOM_SPANS = 12  # the close-up's window: this many consecutive spans of the first CTA's first consumer lane
__all__ = ["MAX_BLOCKS", "MAX_SPANS", "PHASE_COLORS", "ZOOM_SPANS", "Span", "Timeline", "caption",
           "draw_timeline", "timeline_spec"]  # Span and Timeline: kept importable from here


def timeline_spec(t: Timeline) -> dict[str, Any] | None:
    """Chart data of a timeline: one lane per (CTA, warpgroup) of its first MAX_BLOCKS CTAs; None without spans."""
    if not t.spans:
        return None
    origin = min(s.start_ns for s in t.spans)
    blocks = sorted({s.block for s in t.spans})[:MAX_BLOCKS]
    lanes: dict[tuple[int, int], list[Span]] = {}
    for s in sorted(t.spans, key=lambda s: (s.block, s.warpgroup, s.start_ns)):
        if s.block in blocks:
            lanes.setdefault((s.block, s.warpgroup), []).append(s)
    dropped = sum(max(0, len(v) - MAX_SPANS) for v in lanes.values())
    drawn = [{"label": f"CTA {b} WG {w}", "block": b, "warpgroup": w,
              "spans": [{"phase": s.phase, "start": (s.start_ns - origin) / 1e3,
                         "end": (max(s.end_ns, s.start_ns) - origin) / 1e3, "tile": s.tile}
                        for s in spans[:MAX_SPANS]]} for (b, w), spans in sorted(lanes.items())]
    return {"kind": "timeline", "artifact": t.artifact, "variant": t.variant, "gpu": t.gpu or "",
            "params": ", ".join(f"{k}={v}" for k, v in sorted(t.params.items())),
            "lanes": drawn, "close_up": close_up(drawn),
            "dropped": dropped, "blocks_left_out": len({s.block for s in t.spans}) - len(blocks)}


def close_up(lanes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first CTA's lanes over a window of ZOOM_SPANS consecutive spans of its first consumer (its first lane
    past warpgroup 0, else its first), from the middle of that lane; each span clipped to the window, those
    outside it left out. None when that lane has fewer than 2 x ZOOM_SPANS spans (the whole run is readable)."""
    if not lanes:
        return None
    first = [lane for lane in lanes if lane["block"] == lanes[0]["block"]]
    ref = next((lane for lane in first if lane["warpgroup"] > 0), first[0])["spans"]
    if len(ref) < 2 * ZOOM_SPANS:
        return None
    mid = len(ref) // 2
    start, end = ref[mid]["start"], ref[mid + ZOOM_SPANS - 1]["end"]
    if end <= start:
        return None
    clipped = [{"label": lane["label"],
                "spans": [{**s, "start": max(s["start"], start), "end": min(s["end"], end)}
                          for s in lane["spans"] if s["end"] > start and s["start"] < end]} for lane in first]
    return {"start": start, "end": end, "lanes": clipped}


def draw_timeline(spec: dict[str, Any]) -> bytes:
    """Lanes of spans against microseconds since the first stamp, each span coloured by its phase, with its phase,
    tile and times as a tooltip; the close-up under them, on its own axis; the legend of the phases below."""
    lanes = spec["lanes"]
    title = f"{spec['artifact']} {spec['variant']}" + (f" on {spec['gpu']}" if spec["gpu"] else "") + \
        ": what each warpgroup did when"  # the shape is the caption's (all its params wrapped to five title lines)
    body, top = _title(title)
    end = max((s["end"] for lane in lanes for s in lane["spans"]), default=1.0) or 1.0
    bottom = _panel(body, lanes, top + 10, 0.0, end)
    zoom = spec.get("close_up")
    if zoom:
        label = f"Close-up of CTA {lanes[0]['block']}, {fmt(zoom['start'], 4, trim=True)}–" \
            f"{fmt(zoom['end'], 4, trim=True)} µs"
        body.append(_text(10, bottom + 22, label))
        bottom = _panel(body, zoom["lanes"], bottom + 40, zoom["start"], zoom["end"])
    legend_y = bottom + 24
    seen = {s["phase"] for lane in lanes for s in lane["spans"]}
    for phase, color in PHASE_COLORS.items():
        if phase not in seen:
            continue  # the phases this kernel has (a GEMM has no softmax), in the legend's order
        body.append(f'<rect x="10" y="{_n(legend_y - 12)}" width="18" height="12" fill="{color}"/>')
        body.append(_text(34, legend_y, phase))
        legend_y += TEXT + 6
    notes = []
    if spec.get("dropped"):
        notes.append(f"{spec['dropped']} later spans not drawn")
    if spec.get("blocks_left_out"):
        notes.append(f"{spec['blocks_left_out']} more CTAs not drawn")
    if notes:
        lines = _wrap("; ".join(notes), WIDTH - 20)
        body += _lines(10, legend_y + 4, lines, fill=MUTED)
        legend_y += len(lines) * (TEXT + 4) + 4
    return _svg(WIDTH, legend_y, title, body)


def _panel(body: list[str], lanes: list[dict[str, Any]], top: float, t0: float, t1: float) -> float:
    """One panel of lanes from t0 to t1 µs (an axis of its own, labelled); returns the y below its axis label."""
    left, right, lane_h = 92, WIDTH - 12, 22
    ticks = [t for t in _ticks(t0, t1, 4) if t0 <= t <= t1 * (1 + 1e-9)] or [t0, t1]
    low, high = t0, max(t1, ticks[-1])
    scale = (right - left) / ((high - low) or 1.0)
    bottom = top + lane_h * len(lanes)
    for t in ticks:
        x = left + (t - low) * scale
        body.append(f'<line x1="{_n(x)}" y1="{top - 4}" x2="{_n(x)}" y2="{_n(bottom + 4)}" stroke="{GRID}"/>')
        body.append(_text(x, bottom + 20, fmt(t, 4, trim=True), anchor="middle", fill=MUTED))
    for i, lane in enumerate(lanes):
        y = top + i * lane_h
        body.append(_text(left - 6, y + lane_h / 2 + 5, lane["label"], anchor="end"))
        for s in lane["spans"]:
            w = max(0.6, (s["end"] - s["start"]) * scale)
            tip = f"{lane['label']}: {s['phase']}" + (f", tile {s['tile']}" if s["tile"] is not None else "") + \
                f", {fmt(s['start'], 4, trim=True)}–{fmt(s['end'], 4, trim=True)} µs"
            body.append(f'<rect x="{_n(left + (s["start"] - low) * scale)}" y="{_n(y + 3)}" width="{_n(w)}" '
                        f'height="{lane_h - 6}" fill="{PHASE_COLORS[s["phase"]]}"><title>{html.escape(tip)}</title>'
                        "</rect>")
    body.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{_n(bottom + 4)}" stroke="{INK}"/>')
    body.append(_text((left + right) / 2, bottom + 38, "µs since the first stamp", anchor="middle", fill=MUTED))
    return bottom + 38


def caption(spec: dict[str, Any], run_id: str | None) -> str:
    """One line in words of what a timeline chart shows: its lanes, the phases seen, the time it spans, the shape
    and the run whose untimed trace pass stamped it."""
    lanes = spec["lanes"]
    blocks = len({lane["block"] for lane in lanes})
    seen = {s["phase"] for lane in lanes for s in lane["spans"]}
    phases = [p for p in PHASE_COLORS if p in seen]  # in the order of the legend
    end = max((s["end"] for lane in lanes for s in lane["spans"]), default=0.0)
    more = f" ({spec['blocks_left_out']} more CTAs not drawn)" if spec.get("blocks_left_out") else ""
    zoom = spec.get("close_up")
    close = (f"; a close-up of the first CTA from {fmt(zoom['start'], 4, trim=True)} to "
             f"{fmt(zoom['end'], 4, trim=True)} µs") if zoom else ""
    return (f"{len(lanes)} lanes (each warpgroup of {blocks} CTA{'s' * (blocks != 1)}{more}); phases "
            f"{', '.join(phases)}; {fmt(end, 4, trim=True)} µs from the first stamp to the last{close}"
            + (f"; shape {spec['params']}" if spec["params"] else "")
            + (f"; {spec['gpu']}" if spec["gpu"] else "")
            + (f"; untimed trace pass of run {run_id}" if run_id else "; untimed trace pass")
            + ". The schedule, not the speed: the timed runs give the figures.")
