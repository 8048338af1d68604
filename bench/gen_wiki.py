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
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

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
    lines = ["artifacts:", f"  code: {artifact}", "claims:"]
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


def _front_matter(page: _Page, pages: list[_Page], rng: random.Random) -> tuple[list[str], str | None]:
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
        f"status: {rng.choice(('draft', 'review', 'stable'))}",
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
    if rng.random() < 0.25:
        more, artifact = _claims(page, rng, max(1, len(pages) // 100))
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


def generate(root: Path, n: int, seed: int = 0) -> list[Path]:
    """Write an N-page wiki (and the artifacts its claims measure) under `root`; return the page files."""
    root = Path(root)
    rng = random.Random(seed)
    pages = _plan(n, rng)
    written = []
    for page in pages:
        front, artifact = _front_matter(page, pages, rng)
        text = "\n".join(front + _body(page, pages, rng))
        path = root / "wiki" / page.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
        if artifact is not None and not (root / artifact).is_dir():
            directory = root / artifact
            directory.mkdir(parents=True)
            (directory / "artifact.yaml").write_text(_manifest(directory.name), encoding="utf-8")
            (directory / "main.cu").write_text("// synthetic artifact\n", encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("n", type=int)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    pages = generate(args.root, args.n, args.seed)
    sys.stdout.write(f"wrote {len(pages)} pages under {args.root / 'wiki'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
