"""Replay every stored run of `results/*.jsonl` through the claim judge; print the verdicts as JSON.

No GPU needed. Each run's record rows become records again (the timing's median and spread, the
check, every figure), and every claim of the current pages is judged against them exactly as
`kwiki verify` judges a fresh run. Run it in two trees and compare the outputs to show that a
change to the judge (or to the package's layout) left every verdict alone:

    python bench/replay_claims.py > new.json
    git worktree add /tmp/old <rev>
    (cd /tmp/old && python /path/to/bench/replay_claims.py --root /tmp/old) > old.json
    cmp old.json new.json

With --root, the pages and the store are read from that tree, and kwiki is imported from it.

Where the tree has them (kwiki.verify.gates and kwiki.verify.series), each run also goes through the
gates (the physical peaks of the GPU the run was stored for, the measured roofs) and each claim is
judged over the runs of its series, as `kwiki verify` judges a fresh run: the median of its last 3
runs up to and including this one. Rows stored before series keys existed carry none; with
`--series artifact` (the default) every stored run of an artifact on one GPU model counts as one
series (an approximation: the artifact's sources changed between some of them), with
`--series run` each run is judged alone (the gates still apply).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _import(root: Path):  # results/ below verify/, the stage-folder layout before it, or the flat one before that
    sys.path.insert(0, str(root))
    try:  # results/ below the pipeline: the store's rows and the record format read from kwiki.results
        from kwiki.results import record
        from kwiki.results import store as history
        from kwiki.verify import claims, env, plan, run
        from kwiki.verify.build import BuildResult  # defined in kwiki.verify.types, exported by build
        from kwiki.wiki.catalog import load_wiki
    except ImportError:
        try:
            from kwiki.verify import claims, env, history, plan, record, run  # type: ignore[no-redef]
            from kwiki.verify.build import BuildResult  # type: ignore[no-redef]
            from kwiki.wiki.catalog import load_wiki  # type: ignore[no-redef]
        except ImportError:
            from kwiki import claims, env, history, plan, record, run  # type: ignore[no-redef]
            from kwiki.build import BuildResult  # type: ignore[no-redef]
            from kwiki.catalog import load_wiki  # type: ignore[no-redef]
    try:  # the gates and verdicts over runs (issue 11)
        from kwiki.verify import gates, series
    except ImportError:
        gates = series = None
    return claims, env, history, plan, record, run, BuildResult, load_wiki, gates, series


def _record(record_mod, row):
    """A record equivalent to a stored row: every figure it had is a figure it has again; its declared
    bytes and FLOPs, bytes level and SM clock come back from the figures they made."""
    figures = dict(row.figures)
    timing = None
    t = figures.pop("time_us", None)
    figures.pop("time_ms", None)
    extra: dict = {}
    if t is not None:
        half = (row.spread or 0.0) * t
        timing = record_mod.Timing(median_us=t, q1_us=t - half, q3_us=t + half, min_us=t - half,
                                   samples=row.samples or 1)
        if "gb_per_s" in figures and hasattr(record_mod, "PROTOCOL_VERSION"):
            extra["bytes"] = figures.pop("gb_per_s") * t * 1e3
            figures.pop("tb_per_s", None)
            extra["bytes_level"] = getattr(row, "bytes_level", None) or "dram"
        if "gflop_per_s" in figures and hasattr(record_mod, "PROTOCOL_VERSION"):
            extra["flops"] = figures.pop("gflop_per_s") * t * 1e3
            figures.pop("tflop_per_s", None)
        if "roof_points" not in figures:  # the store keeps numbers: a roof's points (a string) are not in it,
            for k in [k for k in figures if k.startswith("roof_") and k != "roof_us"]:  # so neither is its fit
                figures.pop(k)
        if "sm_mhz" in figures:
            extra["clocks"] = record_mod.Clocks(sm_mhz_after=figures.pop("sm_mhz"))
    return record_mod.Record(kwiki_record=record_mod.RECORD_VERSION, variant=row.variant, params=row.params,
                             timing=timing, check=record_mod.Check(passed=row.passed), extra=figures, **extra)


def replay(root: Path, series_mode: str = "artifact") -> list[dict]:
    claims, env, history, plan_mod, record_mod, run_mod, BuildResult, load_wiki, gates, series = _import(root)
    wiki = load_wiki(root)
    pages = [p for p in wiki.pages if p.meta is not None]
    gpu = env.Gpu(index=0, name="NVIDIA H200", uuid=None, cc=90, sm_count=132)
    if gates is not None:
        gpu.sm_mhz_max = 1980  # NVML's maximum SM clock of the H200 the store was measured on
    environment = env.Environment(gpus=[gpu], driver=None, cuda=None, nvcc=None, nvcc_path=None, cxx_path=None,
                                  commit=None, dirty=None)
    the_plan = plan_mod.plan(wiki, pages, environment, compile_only=False)
    builds = [BuildResult(job.artifact, job.target, ok=True, cached=True, key="replay") for job in the_plan.builds]
    by_name = {a.name: a for a in the_plan.artifacts.values()}
    runs: dict[str, list] = {}
    for row in history.read_all(root):
        if isinstance(row, history.RecordRow) and row.artifact in by_name:
            runs.setdefault(row.run_id, []).append(row)
    keys = {a.path: f"replay/{a.name}" for a in the_plan.artifacts.values()}
    earlier: list = []  # the record rows of the runs before this one, each with its replayed series
    out = []
    for run_id in sorted(runs, key=lambda rid: (max(r.date for r in runs[rid]), rid)):
        outcomes: dict[str, list] = {}
        for row in runs[run_id]:
            planned = by_name[row.artifact]
            if planned.path not in outcomes:
                variants = planned.run_variants + planned.isolated
                outcomes[planned.path] = [run_mod.RunOutcome(planned.name, row.target, variants, "ok")]
            outcomes[planned.path][0].records.append(_record(record_mod, row))
        if gates is None:
            results = claims.evaluate(the_plan, builds, outcomes)
        else:
            gating = gates.check(the_plan, outcomes)
            results = claims.evaluate(the_plan, builds, outcomes, gating)
            if series_mode == "artifact":
                series.judge_over_runs(the_plan, results, earlier, keys, run_id)
                failed = {id(r): [f.as_gate() for f in gating.failed(r)]
                          for o in outcomes.values() for r in o[0].records}
                earlier += _replayed_rows(runs[run_id], outcomes, by_name, keys, failed)
        for c in results:
            if c.artifact is None or c.artifact not in outcomes:
                continue
            row = {"run": run_id, "page": c.page, "claim": c.claim, "verdict": c.verdict.value,
                   "value": c.value, "spread": c.spread, "detail": c.detail}
            if gates is not None:
                row.update({"gates": [g.name for g in c.gates], "warnings": [w.reason for w in c.warnings],
                            "runs": c.runs, "median": c.median, "band": c.band, "drift": c.drift})
            out.append(row)
    return out


def _replayed_rows(rows: list, outcomes: dict, by_name: dict, keys: dict, failed: dict) -> list:
    """This run's stored rows as the next runs read them: with the replayed series and failed gates."""
    records = {}
    for path, outs in outcomes.items():
        for n, r in enumerate(outs[0].records):
            records[(path, n)] = r
    out, position = [], {}
    for row in rows:
        path = by_name[row.artifact].path
        n = position.get(path, 0)
        position[path] = n + 1
        record = records[(path, n)]
        out.append(row.model_copy(update={"series": keys[path], "gates": failed.get(id(record)) or None}))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--series", choices=("artifact", "run"), default="artifact",
                        help="what a series is for stored rows without a series key (default: artifact)")
    args = parser.parse_args()
    for row in replay(args.root.resolve(), args.series):
        print(json.dumps(row, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
