"""Generate a synthetic KernelWiki of N pages for benchmarks (deterministic for a seed).

    python3 bench/gen_wiki.py DIR N [--seed S]

or, from another benchmark in bench/::

    from gen_wiki import generate
    pages = generate(Path(tmp), 10_000, seed=0)

The pages look like real ones: the replaced wiki's vocabulary (architectures spelled
``sm90``/``sm_90a``, tags, sources, source_refs, related ids), a quarter of them with
claims measured from artifact directories that exist (with a manifest and the variants
the claims select), Markdown bodies with sections, a code fence,
links to other pages by relative path and to the web. Every reference resolves and every
link leads to a page, so `kwiki check` finds no errors: the benchmark times the clean path.

With ``store=True`` (``--store``) the measured pages look like measured ones: each owns an
artifact whose manifest declares a ladder (rungs, what each adds, a baseline), the results store
(``results/nvidia-h200.jsonl``, appended to) holds three runs of every variant and shape and the
claims' rows, and each page's measurements block is the one those runs make (median, band,
range, verdict, run ids, series), written through kwiki's own write-back so that it traces to
the store. ``measured`` sets the share of pages with claims (a quarter by default).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VENDORS = ("nvidia", "amd")
CATEGORIES = ("techniques", "algorithms", "kernels", "patterns", "hardware", "apis", "concepts")
TYPES = ("technique", "algorithm", "kernel", "pattern", "hardware", "api", "concept", "skill", "guide")
ARCHS = ("sm80", "sm_86", "sm89", "sm90", "sm90a", "sm_90a", "sm100", "sm_100a", "sm120")
TAGS = (
    "gemm", "gemv", "attention", "softmax", "layernorm", "reduction", "scan", "transpose",
    "tma", "wgmma", "mbarrier", "cluster", "warp-specialization", "persistent-kernel",
    "pipeline-stages", "shared-memory-optimization", "vectorized-loads", "cache-policy",
    "register-budgeting", "cuda-cpp", "ptx", "cute-dsl", "triton", "fp8", "bf16", "tf32",
    "nvfp4", "occupancy", "bank-conflicts", "async-copy", "split-k", "stream-k",
)
WORDS = (
    "tile", "warp", "stage", "barrier", "latency", "bandwidth", "register", "shared", "memory",
    "pipeline", "producer", "consumer", "epilogue", "mainloop", "swizzle", "vector", "cache",
    "occupancy", "throughput", "kernel", "launch", "block", "grid", "thread", "load", "store",
)
VARIANTS = 6
ARTIFACT_PREFIX = "syn_"  # one artifact per 100 pages, shared by the pages that measure with it
FIGURES = (("time_us", "us", "time"), ("gb_per_s", "GB/s", "bandwidth"), ("tflop_per_s", "TFLOP/s", "throughput"))


@dataclass
class _Page:
    index: int
    id: str
    type: str
    rel: Path  # relative to root/wiki
    related: list[int] = field(default_factory=list)
    links: list[int] = field(default_factory=list)


def _slug_words(rng: random.Random, k: int) -> str:
    return "-".join(rng.choice(WORDS) for _ in range(k))


def _plan(n: int, rng: random.Random) -> list[_Page]:
    pages = []
    for i in range(n):
        kind = rng.choice(TYPES)
        vendor = VENDORS[0] if rng.random() < 0.85 else VENDORS[1]
        folder = Path(vendor) / rng.choice(CATEGORIES)
        if rng.random() < 0.3:
            folder = folder / _slug_words(rng, 1)
        page_id = f"{kind}-{_slug_words(rng, 2)}-{i}"
        pages.append(_Page(i, page_id, kind, folder / f"{page_id}.md"))
    for page in pages:
        page.related = sorted(rng.sample(range(n), min(n, rng.randint(0, 4))))
        page.links = sorted(rng.sample(range(n), min(n, rng.randint(1, 5))))
    return pages


def _relative_link(src: _Page, dst: _Page) -> str:
    return Path(os.path.relpath(dst.rel, src.rel.parent)).as_posix()


def _manifest(name: str) -> str:
    variants = "".join(f"- name: v{k}\n  description: variant {k}\n" for k in range(VARIANTS))
    return (f"name: {name}\ntitle: Synthetic artifact {name}\ntargets: [sm_90a]\n"
            f"build:\n  sources: [main.cu]\nvariants:\n{variants}baseline: v0\n")


def _claims(page: _Page, rng: random.Random, n_artifacts: int) -> tuple[list[str], str]:
    """(front-matter lines for artifacts and claims, the artifact directory they measure)."""
    artifact = f"artifacts/{ARTIFACT_PREFIX}{rng.randrange(n_artifacts):03d}"
    lines = ["artifacts:", f"  code: {artifact}", "headline: claim-0", "claims:"]
    for k in range(rng.randint(1, 4)):
        figure, unit, metric = rng.choice(FIGURES)
        lines += [
            f"- id: claim-{k}",
            f"  statement: The {rng.choice(WORDS)} variant reaches this figure at the stated shape.",
            f"  metric: {metric}",
            f"  unit: {unit}",
            f"  value: {rng.uniform(1, 5000):.1f}",
            "  tolerance: 0.1",
            "  evidence: source-reported",
            "  source: blog-example",
            "  conditions:",
            f"    arch: {rng.choice(('sm_90a', 'sm90', 'sm_100a'))}",
            "    gpu: H200-SXM",
            f"    shape: {rng.choice((1024, 2048, 4096))}x{rng.choice((1024, 4096))}",
            "    dtype: bf16",
            "  measure:",
            "    artifact: code",
            "    of:",
            f"      variant: v{rng.randrange(VARIANTS)}",
            "      params:",
            f"        m: {rng.choice((1024, 2048, 4096))}",
            f"      figure: {figure}",
        ]
    return lines, artifact


def _front_matter(page: _Page, pages: list[_Page], rng: random.Random, measured: float = 0.25,
                  store: bool = False) -> tuple[list[str], str | None]:
    title = " ".join(w.capitalize() for w in _slug_words(rng, rng.randint(2, 6)).split("-"))
    lines = [
        "---",
        f"id: {page.id}",
        f"title: {title}",
        f"type: {page.type}",
        f"vendor: {'nvidia' if page.rel.parts[0] == 'nvidia' else 'amd'}",
        "architectures:",
        *(f"- {a}" for a in sorted(set(rng.sample(ARCHS, rng.randint(1, 3))))),
        "languages:",
        "- cuda-cpp",
        "tags:",
        *(f"- {t}" for t in rng.sample(TAGS, rng.randint(2, 8))),
        f"evidence_level: {rng.choice(('spec', 'source-reported'))}",
        f"confidence: {rng.choice(('spec', 'source-reported', 'experimental'))}",
        f"status: {rng.choice(('experimental', 'review', 'stable'))}",  # a draft would be left out of the site
        f"summary: \"{_slug_words(rng, 8).replace('-', ' ')}.\"",
    ]
    if page.related:
        lines += ["related:", *(f"- {pages[j].id}" for j in page.related)]
    else:
        lines.append("related: []")
    lines += [
        "sources:",
        "- {id: blog-example, title: An example blog post, url: \"https://example.org/blog-example\"}",
        f"- {{id: blog-{(word := rng.choice(WORDS))}, url: \"https://example.org/{word}\"}}",
        "- {id: cuda-toolkit-docs-13-2, title: CUDA Toolkit documentation 13.2, url: \"https://docs.nvidia.com/cuda/\"}",
        "source_refs:",
        "- source_id: cuda-toolkit-docs-13-2",
        "  path: CUDA Programming Guides/cuda-programming-guide/index.html.md",
        f"  anchor: L{rng.randint(1, 20000)}-L{rng.randint(20001, 40000)}",
        "hardware_features:",
        *(f"- {t}" for t in rng.sample(("tma", "wgmma", "mbarrier", "cluster", "ldmatrix"), 2)),
        f"scope: \"{_slug_words(rng, 12).replace('-', ' ')}\"",
    ]
    artifact = None
    if rng.random() < measured:
        more, artifact = _ladder_claims(page, rng) if store else _claims(page, rng, max(1, len(pages) // 100))
        lines += more
    lines.append("---")
    return lines, artifact


def _body(page: _Page, pages: list[_Page], rng: random.Random) -> list[str]:
    def sentence() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))).capitalize() + "."

    out = [f"# {page.id}", ""]
    for section in ("Overview", "How it works", "When to use it", "Pitfalls"):
        out += [f"## {section}", "", " ".join(sentence() for _ in range(rng.randint(2, 6))), ""]
    out += ["```cuda", "__global__ void k(float* x) {", "  x[threadIdx.x] *= 2.0f;  // [not](a-link.md)", "}", "```",
            ""]
    out += ["## See also", ""]
    for j in page.links:
        out.append(f"- [{pages[j].id}]({_relative_link(page, pages[j])}) and `inline [x](y.md)` code")
    out += ["- [CUDA guide](https://docs.nvidia.com/cuda/) for the details", ""]
    return out


def generate(root: Path, n: int, seed: int = 0, *, measured: float = 0.25, store: bool = False) -> list[Path]:
    """Write an N-page wiki (and the artifacts its claims measure) under `root`; return the page files.
    `measured`: the share of pages with claims; `store`: measured pages own a ladder artifact, and the
    results store holds its runs and the pages their measurements blocks (see the module's docstring)."""
    root = Path(root)
    rng = random.Random(seed)
    pages = _plan(n, rng)
    written = []
    rows: list[dict[str, Any]] = []
    for page in pages:
        front, artifact = _front_matter(page, pages, rng, measured, store)
        text = "\n".join(front + _body(page, pages, rng))
        path = root / "wiki" / page.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
        if artifact is not None and not (root / artifact).is_dir():
            directory = root / artifact
            directory.mkdir(parents=True)
            manifest = _ladder_manifest(directory.name) if store else _manifest(directory.name)
            (directory / "artifact.yaml").write_text(manifest, encoding="utf-8")
            (directory / "main.cu").write_text("// synthetic artifact\n", encoding="utf-8")
        if store and artifact is not None:
            rows += _measure(path, page, Path(artifact).name, random.Random(f"{seed}-{page.index}"))
    if rows:
        results = root / "results" / STORE_FILE
        results.parent.mkdir(parents=True, exist_ok=True)
        with results.open("a", encoding="utf-8") as f:
            f.writelines(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    return written


# ---------------------------------------------------------------- measured pages: ladders, runs, blocks

GPU = "NVIDIA H200"
STORE_FILE = "nvidia-h200.jsonl"
RUNS = (("20261130T090000Z-5e5e5e01-000000000001", "2026-11-30T09:00:00+00:00"),
        ("20261130T100000Z-5e5e5e02-000000000001", "2026-11-30T10:00:00+00:00"),
        ("20261130T110000Z-5e5e5e03-000000000001", "2026-11-30T11:00:00+00:00"))
SHAPES = (1024, 2048, 4096)
RUNG_WORDS = ("coalesced loads", "16-byte vectors", "shared-memory tiles", "a cp.async pipeline",
              "warp-shuffle reduction", "two stages in flight", "a persistent grid", "cache hints")


def _ladder_manifest(name: str) -> str:
    """A manifest with a ladder: the library baseline at rung 0, then one rung per variant."""
    rows = ["- {name: v0, description: the library baseline, rung: 0, adds: 'the baseline: a library call'}"]
    for k in range(1, VARIANTS):
        words = RUNG_WORDS[(len(name) + k) % len(RUNG_WORDS)]
        rows.append(f"- {{name: v{k}, description: 'rung {k}: {words}', rung: {k}, adds: '{words}'}}")
    return (f"name: {name}\ntitle: Synthetic ladder {name}\ntargets: [sm_90a]\n"
            "build:\n  sources: [main.cu]\nvariants:\n" + "\n".join(rows) + "\nbaseline: v0\n")


def _ladder_claims(page: _Page, rng: random.Random) -> tuple[list[str], str]:
    """Front-matter lines of a measured page's own artifact and claims: speed-ups over the baseline
    (bounds) and bandwidths (values), as real pages state them."""
    artifact = f"artifacts/{ARTIFACT_PREFIX}{page.index:04d}"
    lines = ["artifacts:", f"  code: {artifact}", "headline: speedup-0", "claims:"]
    for k in range(rng.randint(1, 4)):
        variant, m = rng.randrange(1, VARIANTS), rng.choice(SHAPES)
        shape = [f"  conditions: {{gpu: H200, arch: sm_90a, dtype: bf16, shape: {m}x{m}}}", "  measure:",
                 "    artifact: code"]
        if k % 2 == 0:
            lines += [f"- id: speedup-{k}",
                      f"  statement: At {m} x {m} rung v{variant} is at least this much faster than the baseline.",
                      "  metric: ratio", "  unit: x", "  at_least: BOUND", *shape,
                      f"    of: {{variant: v0, params: {{m: {m}}}, figure: time_us}}",
                      f"    per: {{variant: v{variant}, params: {{m: {m}}}, figure: time_us}}"]
        else:
            lines += [f"- id: bandwidth-{k}",
                      f"  statement: At {m} x {m} rung v{variant} reads at this bandwidth.",
                      "  metric: bandwidth", "  unit: GB/s", "  value: VALUE", "  tolerance: 0.1", *shape,
                      f"    of: {{variant: v{variant}, params: {{m: {m}}}, figure: gb_per_s}}"]
    return lines, artifact


def _records(artifact: str, rng: random.Random) -> list[dict[str, Any]]:
    """Three runs of every variant and shape: each rung faster than the one below, 1% run-to-run noise."""
    speed = [1.0]
    for _ in range(1, VARIANTS):
        speed.append(speed[-1] * rng.uniform(1.05, 1.6))
    rows = []
    for run_id, date in RUNS:
        for k in range(VARIANTS):
            for m in SHAPES:
                us = m * m * 2 / 4.0e6 / speed[k] * rng.uniform(0.99, 1.01)
                rows.append({"kind": "record", "store_version": 1, "run_id": run_id, "date": date, "gpu": GPU,
                             "arch": "sm_90", "series": f"nvidia-h200/synthetic/{artifact}", "artifact": artifact,
                             "target": "sm_90a", "variant": f"v{k}", "params": {"m": m},
                             "figures": {"time_us": round(us, 4), "gb_per_s": round(m * m * 2 / us / 1e3, 2)},
                             "spread": 0.005, "samples": 20, "passed": True})
    return rows


def _figure(rows: list[dict[str, Any]], run_id: str, sel: dict[str, Any]) -> float:
    return next(float(r["figures"][sel["figure"]]) for r in rows
                if r["run_id"] == run_id and r["variant"] == sel["variant"] and r["params"] == sel["params"])


def _measure(path: Path, page: _Page, artifact: str, rng: random.Random) -> list[dict[str, Any]]:
    """The store rows of a measured page's runs; its claims' bounds set from them (mostly reproduced, one
    in eight too optimistic) and its measurements block written through kwiki's write-back."""
    import yaml

    from kwiki.results.judge import judge
    from kwiki.results.series import stats
    from kwiki.verify.writeback import apply, measurements_yaml
    from kwiki.wiki.model import Claim, MeasuredClaim, Measurements, Provenance

    rows = _records(artifact, rng)
    text = path.read_text(encoding="utf-8")
    front = yaml.safe_load(text.split("---\n")[1].replace("BOUND", "1.0").replace("VALUE", "1.0"))
    block: dict[str, MeasuredClaim] = {}
    last_id, last_date = RUNS[-1]
    for raw in front["claims"]:
        of, per = raw["measure"]["of"], raw["measure"].get("per")
        values = [_figure(rows, r, of) / (_figure(rows, r, per) if per else 1.0) for r, _ in RUNS]
        st = stats(values)
        optimistic = rng.random() < 0.125
        key, marker = ("at_least", "BOUND") if per else ("value", "VALUE")
        target = f"{st.median * (1.3 if optimistic else 0.9 if per else rng.uniform(0.97, 1.03)):.4g}"
        text = text.replace(f"  {key}: {marker}", f"  {key}: {target}", 1)
        claim = Claim.model_validate({**raw, key: float(target)})
        verdict = judge(claim, st.median, st.band)
        series = rows[0]["series"]
        block[raw["id"]] = MeasuredClaim(
            verdict=verdict, value=st.median, unit=raw["unit"], spread=st.band, change="same",
            provenance=Provenance(gpu=GPU, arch="sm_90", date=last_date[:10]), runs=len(values),
            range=(st.low, st.high), run_ids=[r for r, _ in RUNS], series=series)
        rows.append({"kind": "claim", "store_version": 1, "run_id": last_id, "date": last_date, "gpu": GPU,
                     "arch": "sm_90", "series": series, "artifact": artifact, "page": page.id, "claim": raw["id"],
                     "value": values[-1], "median": st.median, "runs": len(values), "unit": raw["unit"],
                     "spread": st.band, "verdict": verdict.value, "change": "same"})
    m = Measurements(evidence_level="measured", verified_on=GPU, date=last_date[:10], claims=block)
    path.write_bytes(apply(text.encode("utf-8"), measurements_yaml(m), {}))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("n", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measured", type=float, default=0.25, help="the share of pages with claims")
    parser.add_argument("--store", action="store_true",
                        help="measured pages own a ladder; write their runs and measurements blocks")
    args = parser.parse_args(argv)
    pages = generate(args.root, args.n, args.seed, measured=args.measured, store=args.store)
    sys.stdout.write(f"wrote {len(pages)} pages under {args.root / 'wiki'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
