"""The roofline chart: points at their arithmetic intensity under the measured bandwidth roof."""

from __future__ import annotations

from kwiki.results.store import RecordRow
from kwiki.site.charts import draw, roofline_specs


def row(artifact: str, variant: str, shape: str, tflops: float, gbs: float,
        date: str = "2026-11-29T10:00:00") -> RecordRow:
    figures = {"gb_per_s": gbs, "time_us": 10.0}
    if tflops:
        figures["tflop_per_s"] = tflops
    return RecordRow(run_id="r", date=date, gpu="NVIDIA H200", artifact=artifact, target="sm_90a", variant=variant,
                     params={"shape": shape}, figures=figures, passed=True)


def test_roofline_takes_the_best_variant_its_baseline_and_the_measured_roof():
    rows = [
        row("gemv_sm90a", "slow", "64x64", 2.0, 2000.0),
        row("gemv_sm90a", "fast", "64x64", 4.0, 4000.0),
        row("gemv_sm90a", "cublas", "64x64", 3.0, 3000.0),
        row("gemv_sm90a", "ceiling", "64x64", 0.0, 4500.0),
        row("gemv_sm90a", "fast", "64x64", 9.0, 9000.0, date="2026-01-01T00:00:00"),  # an older run: ignored
        row("other_sm90a", "x", "1", 5.0, 5000.0),  # no ceiling named: not on the chart
    ]
    (spec,) = roofline_specs(rows, {"gemv_sm90a": ("ceiling", "cublas")})
    assert spec["roof_gb_per_s"] == 4500.0
    assert [(p["variant"], p["baseline"]) for p in spec["points"]] == [("fast", False), ("cublas", True)]
    assert spec["points"][0]["intensity"] == 1.0 and spec["points"][0]["label"] == "gemv 64x64"
    svg = draw(spec)
    assert svg == draw(spec) and svg.count(b"<circle") == 2 and b"gemv 64x64: fast" in svg


def test_no_roof_no_chart():
    assert roofline_specs([row("gemv_sm90a", "fast", "1", 4.0, 4000.0)], {"gemv_sm90a": ("ceiling", None)}) == []
