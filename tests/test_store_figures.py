"""bench/store_figures.py: a figure, or a ratio of two, over the runs of an artifact's latest series in the store."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from kwiki.results.store import RecordRow, append_rows, store_path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("store_figures", ROOT / "bench" / "store_figures.py")
assert spec is not None and spec.loader is not None
store_figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(store_figures)


def row(run: int, series: str, variant: str, figures: dict[str, float], **extra) -> RecordRow:
    return RecordRow(run_id=f"2026120{run}T000000Z-r{run}", date=f"2026-12-0{run}T00:00:00+00:00", gpu="NVIDIA H200",
                     artifact="gemm", target="sm_90a", variant=variant, params={"M": 64, "N": 64}, figures=figures,
                     passed=True, series=series, **extra)


def store(root: Path) -> None:
    path = store_path(root, "NVIDIA H200")
    path.parent.mkdir(parents=True)
    append_rows(path, [row(1, "old", "ws", {"sm_mhz_effective": 1000.0, "sm_mhz": 2000.0})])  # an earlier series
    for run, (eff, nvml) in enumerate([(1400.0, 1600.0), (1500.0, 1600.0), (1440.0, 1800.0)], start=2):
        append_rows(path, [row(run, "new", "ws", {"sm_mhz_effective": eff, "sm_mhz": nvml, "tflop_per_s": 700.0 + run}),
                           row(run, "new", "ws", {"sm_mhz_effective": 1.0, "sm_mhz": 1.0}, sweep=True)])


def test_the_latest_series_median_and_range_of_a_figure_and_of_a_ratio(tmp_path, capsys):
    store(tmp_path)
    argv = ["gemm", "sm_mhz_effective/sm_mhz", "tflop_per_s", "--json", "--root", str(tmp_path)]
    assert store_figures.main(argv) == 0
    out = {e["figure"]: e for e in map(json.loads, capsys.readouterr().out.splitlines())}
    ratio = out["sm_mhz_effective/sm_mhz"]  # 0.875, 0.9375, 0.8: not the old series, not the sweep's point
    assert ratio["series"] == "new" and ratio["runs"] == 3 and ratio["shape"] == "M=64,N=64"
    assert (ratio["median"], ratio["low"], ratio["high"]) == (0.875, 0.8, 0.9375)
    assert (out["tflop_per_s"]["median"], out["tflop_per_s"]["runs"]) == (703.0, 3)


def test_another_series_by_its_key_and_a_figure_no_record_holds(tmp_path, capsys):
    store(tmp_path)
    assert store_figures.main(["gemm", "sm_mhz_effective/sm_mhz", "--series", "old", "--root", str(tmp_path)]) == 0
    assert "ws M=64,N=64 sm_mhz_effective/sm_mhz: 0.5 [0.5, 0.5] (1 run)" in capsys.readouterr().out
    assert store_figures.main(["gemm", "ncu_dram_bytes", "--root", str(tmp_path)]) == 1
    assert "no record of gemm" in capsys.readouterr().err
    assert store_figures.main(["gemm", "sm_mhz", "--gpu", "NVIDIA H100", "--root", str(tmp_path)]) == 2
    assert "no results store for NVIDIA H100" in capsys.readouterr().err
