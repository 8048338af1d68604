"""Benchmark `kwiki build`: kwiki's generation step beside the plain MkDocs build of the same pages.

    python3 bench/site_bench.py [--pages 1000] [--seed 0] [--no-results] [--json]

For the repository's own wiki and for a generated wiki of N pages (bench/gen_wiki.py), it times

- plain:    MkDocs + Material (search, tags) building the raw `wiki/` pages, nothing generated;
- generate: kwiki's generation step (read pages and results, header, claims, charts, artifact
            sources, indexes; staged into .kwiki/site/docs);
- mkdocs:   MkDocs building the staged pages (strict);
- export:   llms.txt, index.json, the Markdown copies, and the check for remote resources;
- rebuild:  the whole `kwiki build` again with nothing changed (charts come from the cache).

The goal is generate + export <= 30% of plain; `total` puts the whole kwiki build beside plain
(its MkDocs step builds more: headers, claims tables, artifact sources, index pages). By default the
generated wiki also gets a results store (two runs of every artifact its claims measure, and the
claims' verdicts), so that charts are
drawn as they will be once `kwiki verify` has run; --no-results times the pages alone.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

from kwiki.site.stage import BASE_CONFIG, base_config, build_site, config_overrides, run_mkdocs  # noqa: E402
from kwiki.wiki.catalog import load_wiki  # noqa: E402


def _generate(root: Path, n: int, seed: int) -> None:
    try:
        from gen_wiki import generate
    except ImportError:  # the shared generator is absent: a small one of our own
        generate = _small_wiki
    generate(root, n, seed=seed)


def _small_wiki(root: Path, n: int, seed: int = 0) -> list[Path]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        path = root / "wiki" / f"section-{i % 10}" / f"page-{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        tags = sorted(rng.sample(["gemm", "gemv", "tma", "wgmma", "reduction", "softmax", "fp8", "bf16"], 3))
        link = f"../section-{(i + 1) % n % 10}/page-{(i + 1) % n}.md"
        path.write_text(f"---\nid: page-{i}\ntitle: Page {i}\ntype: technique\narchitectures: [sm_90a]\n"
                        f"tags: [{', '.join(tags)}]\n---\n# Page {i}\n\nSee [the next page]({link}).\n\n"
                        + "Some text about tiles and warps. " * 40 + "\n")
        out.append(path)
    return out


def _results(root: Path, seed: int) -> int:
    """A results store for every claim of the generated wiki: two runs, records and verdicts."""
    rng = random.Random(seed)
    rows = []
    for page in load_wiki(root).pages:
        meta = page.meta
        if meta is None or not meta.claims:
            continue
        for rel in meta.artifacts.values():
            artifact = Path(rel).name
            for run, date in enumerate(("2025-06-01T09:00:00Z", "2025-06-08T09:00:00Z")):
                run_id = f"{date[:10]}T090000Z-bench{run}"
                for v in range(6):
                    for m in (1024, 2048, 4096):
                        us = rng.uniform(10, 1000)
                        rows.append({"kind": "record", "run_id": run_id, "date": date, "gpu": "NVIDIA H200",
                                     "artifact": artifact, "target": "sm_90a", "variant": f"v{v}", "params": {"m": m},
                                     "figures": {"time_us": us, "gb_per_s": 1e6 / us}, "spread": 0.004, "passed": True})
                for claim in meta.claims:
                    value = (claim.value or 1.0) * rng.uniform(0.9, 1.1)
                    rows.append({"kind": "claim", "run_id": run_id, "date": date, "gpu": "NVIDIA H200",
                                 "artifact": artifact, "page": meta.id, "claim": claim.id, "value": value,
                                 "unit": claim.unit, "spread": 0.004, "verdict": "reproduced"})
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / "nvidia-h200.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def _plain(root: Path, out: Path) -> float:
    overrides = config_overrides(base_config(root), root / "wiki", out, [], strict=False)
    del overrides["nav"]
    overrides["extra_css"] = []
    config = root / BASE_CONFIG
    if not config.is_file():
        config.write_text("site_name: KernelWiki\n")
    start = time.perf_counter()
    run_mkdocs(overrides, config)
    return time.perf_counter() - start


def measure(root: Path, name: str) -> dict:
    plain = _plain(root, root / "plain-site")
    report = build_site(root, root / "site", strict=False)
    start = time.perf_counter()
    build_site(root, root / "site", strict=False)
    rebuild = time.perf_counter() - start
    s = report.seconds
    added = s["generate"] + s["export"]
    return {"wiki": name, "pages": report.pages, "charts": report.charts, "plain_s": round(plain, 2),
            "generate_s": round(s["generate"], 2), "mkdocs_s": round(s["mkdocs"], 2), "export_s": round(s["export"], 2),
            "rebuild_s": round(rebuild, 2), "added_pct": round(100 * added / plain, 1),
            "total_pct": round(100 * sum(s.values()) / plain, 1),
            "warnings": len(report.warnings)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-results", action="store_true", help="no results store for the generated wiki")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kwiki-site-bench-") as tmp:
        repo = Path(tmp) / "repo"
        for part in ("wiki", "artifacts", "results"):
            if (REPO / part).is_dir():
                shutil.copytree(REPO / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
        if (REPO / BASE_CONFIG).is_file():
            shutil.copy(REPO / BASE_CONFIG, repo / BASE_CONFIG)
        rows.append(measure(repo, "repository"))
        gen = Path(tmp) / "generated"
        _generate(gen, args.pages, args.seed)
        shutil.copy(REPO / BASE_CONFIG, gen / BASE_CONFIG)
        results = 0 if args.no_results else _results(gen, args.seed)
        rows.append({**measure(gen, f"generated ({args.pages})"), "result_rows": results})
    if args.json:
        print(json.dumps({"benchmark": "site", "goal_added_pct": 30, "rows": rows}, indent=1))
        return 0
    print(f"{'wiki':<18}{'pages':>6}{'charts':>7}{'plain s':>9}{'generate s':>11}{'mkdocs s':>10}"
          f"{'export s':>10}{'rebuild s':>10}{'added':>8}{'total':>8}")
    for r in rows:
        print(f"{r['wiki']:<18}{r['pages']:>6}{r['charts']:>7}{r['plain_s']:>9}{r['generate_s']:>11}{r['mkdocs_s']:>10}"
              f"{r['export_s']:>10}{r['rebuild_s']:>10}{r['added_pct']:>7}%{r['total_pct']:>7}%")
    print("added = (generate + export) / plain, goal <= 30%; total = the whole kwiki build / plain")
    return 0


if __name__ == "__main__":
    sys.exit(main())
