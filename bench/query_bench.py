"""Time `kwiki query` on a generated wiki: warm queries against grep, the cold build, a refresh.

    python3 bench/query_bench.py [--pages 10000] [--repeat 15] [--trials 5] [--tag tma] [--keep DIR]

Every figure is a whole process, started the way the `kwiki` console script starts
(``python -c "from kwiki.cli import main; sys.exit(main())" ...``), and printed beside its
baseline and the ratio. Goals (issue 7):

* warm query, ``kwiki query --tag T --json`` with the index up to date: median at most 2x
  ``grep -rl -- "- T" wiki`` over the same pages (medians of interleaved runs), and under
  150 ms;
* cold build, the same query with no index (10,000 pages): at most 10 s; the baseline is a
  bare loop that reads every page and loads its front matter with yaml's C loader;
* one page changed, then the same query: at most 100 ms over the warm median (median over
  --trials pages), for three kinds of edit: of the body; of a simple front-matter field (a
  tag added: the index patches it in without pydantic, see kwiki/wiki/fields.py); and of any
  other front-matter field (an architecture added: the page model reads the page, which
  imports pydantic).

kwiki's modules are byte-compiled first (`compileall`), as `pip install` does for an
installed package: with PYTHONDONTWRITEBYTECODE set, as on our CI machines, an editable
checkout would otherwise recompile every changed module on every run.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from gen_wiki import generate  # noqa: E402

GOAL_WARM_MS = 150.0
GOAL_WARM_RATIO = 2.0
GOAL_COLD_S = 10.0
GOAL_EXTRA_MS = 100.0

ENTRY = "import sys\nfrom kwiki.cli import main\nsys.exit(main())\n"  # what pip's console script runs

YAML_LOOP = r"""
import os, sys, yaml
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
n = 0
for dirpath, dirnames, filenames in os.walk(os.path.join(sys.argv[1], "wiki")):
    for name in filenames:
        if name.endswith(".md"):
            with open(os.path.join(dirpath, name), encoding="utf-8") as fh:
                text = fh.read()
            n += len(yaml.load(text.split("\n---\n", 1)[0][4:], Loader=Loader))
"""


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


CPU: list[tuple[list[str], float]] = []  # (command, user + sys seconds) of every run, for `cpu_median`


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    """Wall-clock seconds of one run of `cmd`, and its stdout; its CPU time goes to CPU."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append((cmd, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
    if proc.returncode not in (0, 1):  # grep exits 1 when nothing matched
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return elapsed, proc.stdout


def cpu_median(cmd: list[str]) -> float:
    return statistics.median(t for c, t in CPU if c == cmd)


def kwiki(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", ENTRY, *args, "--root", str(root)]


def interleaved(a: list[str], b: list[str], cwd: Path, repeat: int) -> tuple[list[float], list[float], str, str]:
    ta, tb = [], []
    out_a = out_b = ""
    for _ in range(repeat):
        t, out_a = timed(a, cwd)
        ta.append(t)
        t, out_b = timed(b, cwd)
        tb.append(t)
    return ta, tb, out_a, out_b


def edit_body(page: Path, i: int) -> None:
    page.write_text(page.read_text(encoding="utf-8") + f"\nEdited for the benchmark, trial {i}.\n", encoding="utf-8")


def edit_front_matter(page: Path, i: int) -> None:
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("\ntags:\n", f"\ntags:\n- bench-edit-{i}\n", 1), encoding="utf-8")


def edit_structure(page: Path, i: int) -> None:
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("\narchitectures:\n", "\narchitectures:\n- sm_100a\n", 1), encoding="utf-8")


def after_change(root: Path, pages: list[Path], edit, query: list[str]) -> tuple[list[float], list[float]]:
    """Time the query right after each edit, and the one after that (warm again)."""
    first, second = [], []
    for i, page in enumerate(pages):
        edit(page, i)
        time.sleep(0.05)  # an edit, then a query: not both inside one timestamp tick
        first.append(timed(query, root)[0])
        second.append(timed(query, root)[0])
    return first, second


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15, help="runs of each warm figure (median)")
    parser.add_argument("--cold", type=int, default=3, help="cold builds (median)")
    parser.add_argument("--trials", type=int, default=5, help="pages edited per kind of edit (median)")
    parser.add_argument("--tag", default="tma")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="generate into this directory and keep it")
    args = parser.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="kwiki-query-bench-")
    try:
        root = args.keep or Path(tmp)
        t0 = time.perf_counter()
        files = generate(root, args.pages, args.seed)
        gen_s = time.perf_counter() - t0
        return report(args, root, files, gen_s)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(args: argparse.Namespace, root: Path, files: list[Path], gen_s: float) -> int:
    compileall.compile_dir(str(REPO / "kwiki"), quiet=1)
    query = kwiki(root, "query", "--tag", args.tag, "--json")
    grep = ["grep", "-rl", "--", f"- {args.tag}", "wiki"]
    time.sleep(0.1)

    cold = []
    for _ in range(args.cold):
        shutil.rmtree(root / ".kwiki", ignore_errors=True)
        cold.append(timed(query, root)[0])
    cold_s = statistics.median(cold)
    yaml_s = statistics.median(timed([sys.executable, "-c", YAML_LOOP, str(root)], root)[0] for _ in range(args.cold))

    CPU.clear()
    warm, base, out, grep_out = interleaved(query, grep, root, args.repeat)
    warm_s, grep_s = statistics.median(warm), statistics.median(base)
    warm_cpu, grep_cpu = cpu_median(query), cpu_median(grep)
    everything = kwiki(root, "query", "--tag", args.tag, "--json", "--limit", "0")
    all_t, _, _, _ = interleaved(everything, grep, root, max(3, args.repeat // 3))
    text_query = kwiki(root, "query", "--text", "warp barrier", "--json")
    text_t, _, _, _ = interleaved(text_query, grep, root, max(3, args.repeat // 3))

    step = max(1, len(files) // (3 * args.trials + 1))
    picked = files[::step][: 3 * args.trials]
    body_first, body_next = after_change(root, picked[0::3], edit_body, query)
    fm_first, fm_next = after_change(root, picked[1::3], edit_front_matter, query)
    st_first, st_next = after_change(root, picked[2::3], edit_structure, query)
    body_extra = statistics.median(body_first) - warm_s
    fm_extra = statistics.median(fm_first) - warm_s
    st_extra = statistics.median(st_first) - warm_s

    import json

    doc = json.loads(out)
    size = (root / ".kwiki" / "index.sqlite").stat().st_size
    matched = len(grep_out.split())
    ok = {
        "warm": warm_s * 1e3 < GOAL_WARM_MS and warm_s / grep_s <= GOAL_WARM_RATIO,
        "cold": cold_s <= GOAL_COLD_S,
        "body": body_extra * 1e3 <= GOAL_EXTRA_MS,
        "fm": fm_extra * 1e3 <= GOAL_EXTRA_MS,
        "st": st_extra * 1e3 <= GOAL_EXTRA_MS,
    }

    def verdict(key: str) -> str:
        return "met" if ok[key] else "MISSED"

    rows = [
        ("pages / generate", f"{len(files)}", f"{gen_s:.1f} s", "", ""),
        (f"warm: query --tag {args.tag} --json", ms(warm_s), f"grep -rl {ms(grep_s)}", f"{warm_s / grep_s:.2f}x",
         f"<= {GOAL_WARM_RATIO:.0f}x and < {GOAL_WARM_MS:.0f} ms: {verdict('warm')}"),
        ("  min of the runs", ms(min(warm)), f"grep -rl {ms(min(base))}", f"{min(warm) / min(base):.2f}x", ""),
        ("  CPU time (user + sys), median", ms(warm_cpu), f"grep -rl {ms(grep_cpu)}",
         f"{warm_cpu / grep_cpu:.2f}x", "about what a machine without other work would take"),
        (f"warm: same, --limit 0 ({doc['total']} pages)", ms(statistics.median(all_t)), f"grep -rl {ms(grep_s)}",
         f"{statistics.median(all_t) / grep_s:.2f}x", f"grep lists {matched} files (substring match)"),
        ("warm: query --text 'warp barrier'", ms(statistics.median(text_t)), f"grep -rl {ms(grep_s)}",
         f"{statistics.median(text_t) / grep_s:.2f}x", "for information"),
        ("cold: first query, no index", f"{cold_s:.2f} s", f"yaml loop {yaml_s:.2f} s", f"{cold_s / yaml_s:.2f}x",
         f"<= {GOAL_COLD_S:.0f} s: {verdict('cold')}"),
        ("one body edit: next query", ms(statistics.median(body_first)), f"warm {ms(warm_s)}",
         f"+{body_extra * 1e3:.0f} ms", f"<= +{GOAL_EXTRA_MS:.0f} ms: {verdict('body')}"),
        ("  the query after that", ms(statistics.median(body_next)), f"warm {ms(warm_s)}",
         f"+{(statistics.median(body_next) - warm_s) * 1e3:.0f} ms", ""),
        ("a tag added: next query", ms(statistics.median(fm_first)), f"warm {ms(warm_s)}",
         f"+{fm_extra * 1e3:.0f} ms", f"<= +{GOAL_EXTRA_MS:.0f} ms: {verdict('fm')}"),
        ("  the query after that", ms(statistics.median(fm_next)), f"warm {ms(warm_s)}",
         f"+{(statistics.median(fm_next) - warm_s) * 1e3:.0f} ms", ""),
        ("an architecture added: next query", ms(statistics.median(st_first)), f"warm {ms(warm_s)}",
         f"+{st_extra * 1e3:.0f} ms", f"<= +{GOAL_EXTRA_MS:.0f} ms: {verdict('st')} (imports pydantic)"),
        ("  the query after that", ms(statistics.median(st_next)), f"warm {ms(warm_s)}",
         f"+{(statistics.median(st_next) - warm_s) * 1e3:.0f} ms", ""),
        ("index size", f"{size / 2**20:.1f} MiB", f"wiki {sum(f.stat().st_size for f in files) / 2**20:.1f} MiB",
         "", ""),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    sys.stdout.write(
        f"{args.pages} pages; warm figures: median of {args.repeat} interleaved runs; {os.cpu_count()} CPUs; "
        f"python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f} "
        "(other work on this machine slows every figure)\n"
    )
    for row in rows:
        cells = enumerate(zip(row, widths, strict=False))  # the fifth cell, unpadded, goes last
        sys.stdout.write("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in cells)
                         + f"  {row[4]}\n")
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
