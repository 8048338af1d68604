"""Replay every stored run of `results/*.jsonl` through the claim judge; print the verdicts as JSON.

No GPU needed. Each run's record rows become records again (the timing's median and spread, the
check, every figure), and every claim of the current pages is judged against them exactly as
`kwiki verify` judges a fresh run. Run it in two trees and compare the outputs to show that a
change to the judge (or to the package's layout) left every verdict alone:

    python bench/replay_claims.py > new.json
    git worktree add /tmp/old <rev> && (cd /tmp/old && python /path/to/bench/replay_claims.py --root /tmp/old) > old.json
    cmp old.json new.json

With --root, the pages and the store are read from that tree, and kwiki is imported from it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _import(root: Path):  # the stage-folder layout, or the flat one that came before it
    sys.path.insert(0, str(root))
    try:
        from kwiki.verify import claims, env, history, plan, record, run
        from kwiki.verify.build import BuildResult
        from kwiki.wiki.catalog import load_wiki
    except ImportError:
        from kwiki import claims, env, history, plan, record, run  # type: ignore[no-redef]
        from kwiki.build import BuildResult  # type: ignore[no-redef]
        from kwiki.catalog import load_wiki  # type: ignore[no-redef]
    return claims, env, history, plan, record, run, BuildResult, load_wiki


def _record(record_mod, row):
    """A record equivalent to a stored row: every figure it had is a figure it has again."""
    figures = dict(row.figures)
    timing = None
    t = figures.pop("time_us", None)
    figures.pop("time_ms", None)
    if t is not None:
        half = (row.spread or 0.0) * t
        timing = record_mod.Timing(median_us=t, q1_us=t - half, q3_us=t + half, min_us=t - half,
                                   samples=row.samples or 1)
    return record_mod.Record(kwiki_record=record_mod.RECORD_VERSION, variant=row.variant, params=row.params,
                             timing=timing, check=record_mod.Check(passed=row.passed), extra=figures)


def replay(root: Path) -> list[dict]:
    claims, env, history, plan_mod, record_mod, run_mod, BuildResult, load_wiki = _import(root)
    wiki = load_wiki(root)
    pages = [p for p in wiki.pages if p.meta is not None]
    gpu = env.Gpu(index=0, name="NVIDIA H200", uuid=None, cc=90, sm_count=132)
    environment = env.Environment(gpus=[gpu], driver=None, cuda=None, nvcc=None, nvcc_path=None, cxx_path=None,
                                  commit=None, dirty=None)
    the_plan = plan_mod.plan(wiki, pages, environment, compile_only=False)
    builds = [BuildResult(job.artifact, job.target, ok=True, cached=True, key="replay") for job in the_plan.builds]
    by_name = {a.name: a for a in the_plan.artifacts.values()}
    runs: dict[str, list] = {}
    for row in history.read_all(root):
        if isinstance(row, history.RecordRow) and row.artifact in by_name:
            runs.setdefault(row.run_id, []).append(row)
    out = []
    for run_id in sorted(runs):
        outcomes: dict[str, list] = {}
        for row in runs[run_id]:
            planned = by_name[row.artifact]
            if planned.path not in outcomes:
                variants = planned.run_variants + planned.isolated
                outcomes[planned.path] = [run_mod.RunOutcome(planned.name, row.target, variants, "ok")]
            outcomes[planned.path][0].records.append(_record(record_mod, row))
        for c in claims.evaluate(the_plan, builds, outcomes):
            if c.artifact is None or c.artifact not in outcomes:
                continue
            out.append({"run": run_id, "page": c.page, "claim": c.claim, "verdict": c.verdict.value,
                        "value": c.value, "spread": c.spread, "detail": c.detail})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    for row in replay(args.root.resolve()):
        print(json.dumps(row, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
