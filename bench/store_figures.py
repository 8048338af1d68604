"""A figure of the results store, or the ratio of two figures of the same record, over the runs of a series.

    python3 bench/store_figures.py gemm_bf16_sm90a tflop_per_s sustained_tflop_per_s
    python3 bench/store_figures.py gemm_bf16_sm90a sm_mhz_effective/sm_mhz --shape 8192x8192x8192
    python3 bench/store_figures.py wgmma_sm90a sm_mhz_effective/ncu_sm_mhz_effective --json

For each variant and shape of the artifact's records, each FIGURE (a name a record carries, as `kwiki show` and the
claims read them: `tflop_per_s`, `sm_mhz`, `ncu_dram_bytes`, ...; `A/B` is A over B of one record) as its median
[lowest, highest] over the runs that hold it, and how many. The series is the artifact's latest on the GPU model
(`--gpu`, default the H200), or the one `--series` names; sweep points and summary rows are left out. No GPU and
no build: what a closing note quotes from the store, for anyone with the checkout to read again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kwiki.results.store import RecordRow, read_store, store_path  # noqa: E402


def shape_of(params: dict) -> str:
    """A record's shape as the pages name it: its `shape` param, else its params as k=v."""
    if "shape" in params:
        return str(params["shape"])
    return ",".join(f"{k}={v}" for k, v in sorted(params.items())) or "-"


def value(figures: dict[str, float], name: str) -> float | None:
    """`name` of one record's figures; `A/B` is A over B (None where either is missing or B is 0)."""
    if "/" not in name:
        return figures.get(name)
    a, b = (figures.get(part) for part in name.split("/", 1))
    return None if a is None or not b else a / b


def table(rows: list[RecordRow], artifact: str, names: list[str], series: str | None = None,
          shape: str | None = None) -> tuple[str | None, list[dict]]:
    """(the series read, one entry per variant, shape and figure: median, low, high, runs)."""
    mine = [r for r in rows if r.artifact == artifact and r.summary_of is None and not r.sweep]
    if series is None:  # the latest run's series
        dated = sorted((r.date, r.run_id, r.series) for r in mine if r.series)
        series = dated[-1][2] if dated else None
    mine = [r for r in mine if r.series == series and (shape is None or shape in shape_of(r.params))]
    values: dict[tuple[str, str, str], list[float]] = {}
    for r in sorted(mine, key=lambda r: (r.date, r.run_id)):
        for name in names:
            v = value(r.figures, name)
            if v is not None:
                values.setdefault((r.variant, shape_of(r.params), name), []).append(v)
    out = [{"variant": v, "shape": s, "figure": f, "median": statistics.median(xs), "low": min(xs), "high": max(xs),
            "runs": len(xs)} for (v, s, f), xs in sorted(values.items())]
    return series, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact", help="the artifact's name (its directory under artifacts/)")
    parser.add_argument("figures", nargs="+", metavar="FIGURE", help="a figure name, or A/B for a ratio")
    parser.add_argument("--gpu", default="NVIDIA H200", help="the GPU model whose store is read")
    parser.add_argument("--series", help="this series key instead of the latest run's")
    parser.add_argument("--shape", help="only records whose shape, as printed, contains this text (M=8192)")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of text")
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    path = store_path(args.root, args.gpu)
    if not path.is_file():
        print(f"store_figures: no results store for {args.gpu} ({path})", file=sys.stderr)
        return 2
    rows = [r for r in read_store(path, warn=False)[0] if isinstance(r, RecordRow)]
    series, out = table(rows, args.artifact, args.figures, args.series, args.shape)
    if series is None or not out:
        print(f"store_figures: no record of {args.artifact} in {path.name} holds "
              f"{', '.join(args.figures)}" + (f" in series {series}" if series else ""), file=sys.stderr)
        return 1
    if args.json:
        for entry in out:
            print(json.dumps({"series": series, **entry}, sort_keys=True))
        return 0
    print(f"{args.artifact}, series {series}:")
    for e in out:
        print(f"  {e['variant']} {e['shape']} {e['figure']}: {e['median']:.4g} "
              f"[{e['low']:.4g}, {e['high']:.4g}] ({e['runs']} run{'s' * (e['runs'] != 1)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
