"""The measured read roof: the speed of light of memory-bound records, and what it says about them.

An artifact with a `ceiling` variant sweeps read kernels over buffer sizes from twice the L2 to a few
GiB in the same run as its kernels (artifacts/common/kwiki_ceiling.cuh) and fits

    time = t0 + bytes / BW

to the fastest kernel's median time at each size, by least squares weighted by 1/time^2 (every size
counts by its relative error). The roof for a record of `bytes` is bytes / BW: t0, the fixed cost of a
launch, is fitted and reported but never added, so no kernel can beat the roof by paying less fixed
cost, and a record's fraction of the speed of light, (bytes / BW) / time = its GB/s / BW, cannot pass
100% beyond noise unless the roof is wrong (then kwiki warns: kwiki.verify.gates.roof).

`fit` is the same fit as the C++ `fit_roof`; kwiki fits a ceiling record's points again and refuses a
roof its own points do not give (`problems`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kwiki.core.numbers import fmt
from kwiki.results.record import Record, Roof

AGREE = 0.005  # a roof whose BW or t0 (relative to the smallest point's time) its points refit beyond this: refused
MAX_RESIDUAL = 0.03  # a fit whose worst point is off by more than this: the roof is suspect (a warning)
NOISE_FLOOR = 0.01  # a record this far above the roof (or its and the roof's noise, if more) is flagged


@dataclass(frozen=True)
class Fit:
    """time = t0_us + bytes / (gb_per_s * 1e3) and how well it fits."""

    gb_per_s: float
    t0_us: float
    r2: float
    max_residual: float
    bw_rse: float


def fit(points: Sequence[tuple[float, float]]) -> Fit | None:
    """Least squares of time (us) over bytes, weights 1/time^2; None when no roof follows (fewer than
    three points, sizes that do not differ, a time that does not grow with size)."""
    if len(points) < 3 or any(not (b > 0 and t > 0) for b, t in points):
        return None
    w = [1.0 / (t * t) for _, t in points]
    W = sum(w)
    Sb = sum(wi * b for wi, (b, _) in zip(w, points, strict=True))
    St = sum(wi * t for wi, (_, t) in zip(w, points, strict=True))
    Sbb = sum(wi * b * b for wi, (b, _) in zip(w, points, strict=True))
    Sbt = sum(wi * b * t for wi, (b, t) in zip(w, points, strict=True))
    det = W * Sbb - Sb * Sb
    if not det > 0:
        return None
    slope = (W * Sbt - Sb * St) / det  # us per byte
    if not slope > 0:
        return None
    t0 = (St - slope * Sb) / W
    mean = St / W
    res = [t - (t0 + slope * b) for b, t in points]
    ss_res = sum(wi * r * r for wi, r in zip(w, res, strict=True))
    ss_tot = sum(wi * (t - mean) ** 2 for wi, (_, t) in zip(w, points, strict=True))
    rse = math.sqrt(ss_res / (len(points) - 2) * W / det) / slope
    return Fit(gb_per_s=1e-3 / slope, t0_us=t0, r2=1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0,
               max_residual=max(abs(r) / t for r, (_, t) in zip(res, points, strict=True)), bw_rse=rse)


def problems(roof: Roof) -> tuple[list[str], list[str]]:
    """(failures, warnings) of a roof: failures when its points do not give its BW and t0 (the record
    says something its own measurements do not), warnings when the fit is poor."""
    refit = fit([(b, t) for b, t, _ in roof.points])
    if refit is None:
        return [f"its {len(roof.points)} points give no roof (sizes or times that do not fit a line)"], []
    fails = []
    smallest = min(t for _, t, _ in roof.points)
    if abs(refit.gb_per_s / roof.gb_per_s - 1) > AGREE or abs(refit.t0_us - roof.t0_us) / smallest > AGREE:
        fails.append(f"the record says BW {fmt(roof.gb_per_s)} GB/s, t0 {fmt(roof.t0_us)} us; its points give "
                     f"BW {fmt(refit.gb_per_s)} GB/s, t0 {fmt(refit.t0_us)} us")
    warns = []
    if refit.max_residual > MAX_RESIDUAL:
        worst = max(roof.points, key=lambda p: abs(p[1] - refit.t0_us - p[0] / refit.gb_per_s / 1e3) / p[1])
        warns.append(f"the fit misses a point by {refit.max_residual:.1%} (more than {MAX_RESIDUAL:.0%}; "
                     f"{fmt(worst[0] / 2**20)} MiB by {worst[2]}): time is not t0 + bytes / BW there")
    return fails, warns


def fraction(record: Record, roof: Roof) -> float | None:
    """The record's share of the speed of light: (bytes / BW) / time = its GB/s over the roof's BW."""
    gbs = record.figures().get("gb_per_s") if record.timing is not None else None
    return gbs / roof.gb_per_s if gbs else None


def above(record: Record, roof: Roof) -> float | None:
    """How far above the roof the record's bandwidth is, beyond noise (its run's spread and the roof's
    standard error, at least NOISE_FLOOR); None when it is not."""
    share = fraction(record, roof)
    if share is None or record.timing is None:
        return None
    noise = max(math.hypot(record.timing.spread, roof.bw_rse), NOISE_FLOOR)
    return share - 1 if share > 1 + noise else None


def describe(roof: Roof) -> str:
    """How the roof was obtained, in one sentence (under a ladder, in the JSON of a run)."""
    sizes = sorted(b for b, _, _ in roof.points)
    kernels = f"the best of {len(roof.kernels)} read kernels" if roof.kernels else "the best read kernel"
    return (f"speed of light = bytes / {fmt(roof.gb_per_s / 1e3)} TB/s, the read bandwidth fitted in the same run "
            f"over {len(roof.points)} sizes from {_size(sizes[0])} to {_size(sizes[-1])} ({kernels} at each; "
            f"time = t0 + bytes / BW, least squares weighted by 1/time²); the fixed cost t0 = {fmt(roof.t0_us)} us "
            f"is reported, not added; R² {roof.r2:.6f}, largest residual {roof.max_residual:.2%}, "
            f"BW standard error {roof.bw_rse:.2%}")


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{fmt(n / scale, trim=True)} {unit}"
    return f"{n:.0f} B"


def of_run(records: Sequence[Record], ceiling: str | None) -> Roof | None:
    """The roof of one artifact run: the one its ceiling records carry (a run sweeps once)."""
    for r in records:
        if ceiling and r.variant == ceiling and r.check.passed and r.roof is not None:
            return r.roof
    return None
