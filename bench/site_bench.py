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

    python3 bench/site_bench.py --first-view [--pages 288]

weighs first views instead (headless Chromium, as tests/test_browser.py does): the bytes of HTML, CSS,
JS and what a page fetches before the reader types in the search box, for the home, GEMV, GEMM, tags,
evidence and architectures pages of the repository's wiki alone and beside N generated pages measured
like real ones (bench/gen_wiki.py --store). The goal: within 2% of the smaller wiki's and 400 KB.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
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


VIEWS = {"home": "", "gemv": "nvidia/kernels/gemv-bf16/", "gemm": "nvidia/kernels/gemm-aligned/",
         "tags": "indexes/tags/", "evidence": "indexes/evidence/", "architectures": "indexes/architectures/"}
FIRST_VIEW_TYPES = frozenset({"document", "stylesheet", "script", "xhr", "fetch"})


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _served(directory: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def first_views(site_dir: Path) -> dict[str, int]:
    """Each view's first-view bytes: every request a fresh page makes until the network is idle, by
    Content-Length, of the types that count (HTML, CSS, JS, XHR and fetch)."""
    from playwright import sync_api as playwright

    out = {}
    with _served(site_dir) as url, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or None, args=["--no-sandbox"])
        for name, path in VIEWS.items():
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            requests: list = []
            page.on("request", lambda r, seen=requests: seen.append(r))
            page.goto(url + path, wait_until="networkidle")
            page.wait_for_timeout(300)
            page.wait_for_load_state("networkidle")
            total = 0
            for r in requests:
                response = None if r.url.startswith(("data:", "blob:")) else r.response()
                if response is not None and r.resource_type in FIRST_VIEW_TYPES:
                    total += int(response.headers.get("content-length") or 0)
            out[name] = total
            context.close()
        browser.close()
    return out


def _first_view_main(pages: int, seed: int, as_json: bool) -> int:
    from gen_wiki import generate

    weights = {}
    with tempfile.TemporaryDirectory(prefix="kwiki-first-view-") as tmp:
        for n in (0, pages):
            root = Path(tmp) / str(n)
            for part in ("wiki", "artifacts", "results"):
                shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__", "*.o", "build"))
            shutil.copy(REPO / BASE_CONFIG, root / BASE_CONFIG)
            if n:
                generate(root, n, seed=seed, measured=0.75, store=True)
            report = build_site(root, root / "site", strict=False)
            weights[report.pages] = first_views(root / "site")
    (small, a), (large, b) = sorted(weights.items())
    if as_json:
        print(json.dumps({"benchmark": "first-view", "goal_growth_pct": 2, "goal_bytes": 400_000,
                          "views": {v: {str(small): a[v], str(large): b[v]} for v in VIEWS}}, indent=1))
        return 0
    print(f"{'view':<15}{f'{small} pages':>12}{f'{large} pages':>12}{'growth':>9}")
    for v in VIEWS:
        print(f"{v:<15}{a[v]:>12}{b[v]:>12}{100 * (b[v] - a[v]) / a[v]:>8.2f}%")
    print("bytes of HTML, CSS, JS and fetches before the reader types; goal: growth <= 2%, each <= 400000")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-results", action="store_true", help="no results store for the generated wiki")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--first-view", action="store_true",
                        help="weigh first views of the repository's wiki alone and beside --pages generated ones")
    args = parser.parse_args(argv)
    if args.first_view:
        return _first_view_main(args.pages, args.seed, args.json)
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
