"""Comparisons across sizes, as data: variants of one ladder side by side over one size parameter (a page's
`compare`, kwiki.wiki.model.Comparison), each point the median of the series' last runs with their range, the
fastest variant at each size by time, and where the rows move different bytes for the same work, every share of
the roof taken against the fewest bytes (`problem_roof_time`). The site draws it (kwiki.site.curves); agents read
it with a page's ladders (kwiki.agents.show)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kwiki.core.numbers import params_text
from kwiki.core.strict import Scalar
from kwiki.results.ladders import Ladder, Rung, median_ladder
from kwiki.wiki.model import MIN_SIZES
from kwiki.wiki.owners import matches

__all__ = ["MIN_SIZES", "compare_spec", "fastest", "leader_text", "problem_roof_time", "runs_of", "size_of"]


def size_of(params: dict[str, Scalar]) -> int:
    """The product of a shape's whole-number parameters (its elements, bytes or FLOP count up to a factor): the
    order of a curve's sizes."""
    out = 1
    for value in params.values():
        text = str(value)
        for part in text.split("x") if not isinstance(value, bool) else []:
            if part.isdigit():
                out *= int(part)
    return out


def runs_of(runs: Sequence[Ladder], params: dict[str, Scalar], variant: str) -> list[Rung]:
    """The measured rows of `variant` on one shape in each of `runs` that has one."""
    key = params_text(params)
    return [r for ladder in runs for g in ladder.groups if params_text(g.params) == key for r in g.rows
            if r.variant == variant and r.status == "measured"]


def problem_roof_time(rows: Sequence[Rung], base: Rung | None) -> float | None:
    """The time of the fewest bytes any of `rows` (one shape's measured rows) moves, at the roof: min over rows of
    share of the speed of light x time (each one's own bytes over the roof's bandwidth). Against it, a row's share is
    that time over its own: a bf16 library beside an int4 kernel is drawn against the int4 bytes, the fewest that
    solve the problem, not against its own. None (each row keeps its own share) when every row moves the same bytes
    within 2%, when a share or a time is missing, or when the rows do not do the same work (within 3%): the ladder's
    speed against its baseline `base` (kwiki.results.ladders.rate_vs) is then a ratio of bandwidths, not of times (a
    read beside a copy that moves each byte twice), and so is the curve's."""
    if not rows or any(r.of_speed_of_light is None or not r.time_us for r in rows):
        return None
    if base is None or not base.time_us or any(
            r.vs_baseline is None or abs(r.vs_baseline * float(r.time_us or 0.0) / base.time_us - 1) > 0.03
            for r in rows if r is not base):
        return None
    own = [float(r.of_speed_of_light or 0.0) * float(r.time_us or 0.0) for r in rows]
    if max(own) <= min(own) * 1.02:
        return None
    return min(own)


def compare_spec(runs: Sequence[Ladder], artifact: str, over: str, at: dict[str, Scalar],
                 variants: Sequence[str]) -> dict[str, Any] | None:
    """A page's comparison (kwiki.wiki.model.Comparison): `variants` of the ladder over the values of the parameter
    `over` on the shapes that hold every parameter of `at`, each point the median of `runs` (as `curve_specs`) with
    their range as its band; None with fewer than `MIN_SIZES` such shapes on which two of the variants were
    measured. `leaders`: the fastest variant at each point (`fastest`: by time), so a reader is told where the order
    changes."""
    series = list(runs)
    if not series:
        return None
    ladder = median_ladder(series)
    groups = sorted((g for g in ladder.groups if over in g.params and matches(g.params, at)),
                    key=lambda g: (size_of({over: g.params[over]}), str(g.params[over])))
    if len({str(g.params[over]) for g in groups}) < len(groups):
        return None  # two shapes at one size: `at` holds too little (kwiki check says so, located)
    rows = [{v: next((r for r in g.rows if r.variant == v and r.status == "measured"), None) for v in variants}
            for g in groups]
    kept = [(g, found) for g, found in zip(groups, rows, strict=True)
            if sum(r is not None for r in found.values()) >= 2]
    if len(kept) < MIN_SIZES:
        return None
    measured = [r for _, found in kept for r in found.values() if r is not None]
    sol = all(r.of_speed_of_light is not None for r in measured)
    top = max((r.rate or 0.0) for g, _ in kept for v in variants for r in runs_of(series, g.params, v))

    def share(r: Rung, t_sol: float | None = None) -> float:
        if t_sol is not None and r.time_us:
            return t_sol / r.time_us
        return float(r.of_speed_of_light) if sol and r.of_speed_of_light is not None else (
            (r.rate or 0.0) / top if top else 0.0)

    points = []
    rescaled = False
    for g, found in kept:
        point: dict[str, Any] = {"label": f"{over}={g.params[over]}", "values": {}}
        base = next((r for r in g.rows if r.role == "baseline" and r.status == "measured"), None)
        t_sol = problem_roof_time([r for r in found.values() if r is not None], base) if sol else None
        rescaled |= t_sol is not None
        for v, r in found.items():
            if r is None:
                continue
            shares = [share(x, t_sol) for x in runs_of(series, g.params, v)] or [share(r, t_sol)]
            point["values"][v] = {"share": share(r, t_sol), "low": min(shares), "high": max(shares),
                                  "runs": len(shares), "rate": r.rate, "unit": r.rate_unit or "", "time_us": r.time_us}
        points.append(point)
    leaders = [fastest(p["values"]) for p in points]
    held = ", ".join(f"{k}={v}" for k, v in at.items())
    fewest = "the speed of light of the fewest bytes a variant moves"
    roof = (fewest if rescaled else "the speed of light") if sol else "the highest rate of these variants" + (
        f" in the series' {len(series)} runs" if len(series) > 1 else "")
    return {"kind": "compare", "artifact": artifact, "gpu": ladder.gpu or "", "date": (ladder.date or "")[:10],
            "over": over, "at": held, "roof": roof, "runs": len(series), "variants": list(variants),
            "points": points, "leaders": leaders, "rescaled": rescaled}


def fastest(values: dict[str, dict[str, Any]]) -> str:
    """The variant of one point with the shortest median time; by share of the roof only where a time is missing.
    Variants may move different bytes (an int4 kernel beside a bf16 library): the lower share can be the faster."""
    if all(v["time_us"] for v in values.values()):
        return min(values, key=lambda v: values[v]["time_us"])
    return max(values, key=lambda v: values[v]["share"])


def leader_text(spec: dict[str, Any]) -> str:
    """Which variant is fastest where, in words: 'fma_rows at M=1; mma_tuned from M=4 to M=64'."""
    spans: list[list[Any]] = []
    for point, who in zip(spec["points"], spec["leaders"], strict=True):
        if spans and spans[-1][0] == who:
            spans[-1][2] = point["label"]
        else:
            spans.append([who, point["label"], point["label"]])
    return "; ".join(f"{who} at {a}" if a == b else f"{who} from {a} to {b}" for who, a, b in spans)
