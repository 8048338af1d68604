"""Time `kwiki check` on a generated wiki against a bare YAML loop over the same front matter.

    python3 bench/check_bench.py [--pages 10000] [--repeat 3] [--seed 0] [--keep DIR]

Goals (issue 2): `kwiki check --root` on 10,000 pages takes at most 10 s on a 2-core
machine, and at most 3x a bare `yaml.safe_load` loop over the same front matter.

Both sides are timed as whole processes (wall time, with the CPU time beside it because
other work on the machine stretches wall time) (interpreter start, imports, reading the files),
median of `--repeat` runs:

* check:    ``python3 -m kwiki.cli check --root DIR``
* baseline: ``python3 -c LOOP`` where LOOP walks wiki/, reads each page, cuts the text
  between the first two '---' lines and loads it with ``yaml.load(..., Loader=L)``, L being
  ``yaml.CSafeLoader`` when PyYAML has libyaml (what ``yaml.safe_load`` would use if it
  could; it always uses the pure-Python SafeLoader) and ``yaml.SafeLoader`` otherwise.

The loop's own yaml-only time (files already read) is printed too, for information.
"""

from __future__ import annotations

import argparse
import os
import resource
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

GOAL_SECONDS = 10.0
GOAL_RATIO = 3.0

LOOP = r"""
import os, sys, time, yaml
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
texts = []
for dirpath, dirnames, filenames in os.walk(os.path.join(sys.argv[1], "wiki")):
    for name in filenames:
        if name.endswith(".md"):
            with open(os.path.join(dirpath, name), encoding="utf-8") as fh:
                text = fh.read()
            texts.append(text.split("\n---\n", 1)[0][4:])
t0 = time.perf_counter()
n = 0
for fm in texts:
    n += len(yaml.load(fm, Loader=Loader))
sys.stdout.write(f"{len(texts)} {time.perf_counter() - t0:.6f} {Loader.__name__}\n")
"""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(cmd: list[str], repeat: int) -> tuple[float, float, list[str]]:
    """Median wall and CPU seconds of `repeat` runs of `cmd`, and its outputs."""
    times, cpus, outputs = [], [], []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(repeat):
        c0, t0 = _cpu(), time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
        outputs.append(proc.stdout)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return statistics.median(times), statistics.median(cpus), outputs


def run(root: Path, repeat: int) -> dict:
    check_s, check_cpu, check_out = _time([sys.executable, "-m", "kwiki.cli", "check", "--root", str(root)], repeat)
    base_s, base_cpu, base_out = _time([sys.executable, "-c", LOOP, str(root)], repeat)
    pages, load_s, loader = base_out[-1].split()
    summary = check_out[-1].strip().splitlines()[-1] if check_out[-1].strip() else "(no output)"
    return {
        "pages": int(pages),
        "check_s": check_s,
        "check_cpu": check_cpu,
        "baseline_s": base_s,
        "baseline_cpu": base_cpu,
        "yaml_only_s": float(load_s),
        "loader": loader,
        "summary": summary,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="generate into this directory and keep it")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="kwiki-bench-") as tmp:
        root = args.keep or Path(tmp)
        t0 = time.perf_counter()
        generate(root, args.pages, args.seed)
        gen_s = time.perf_counter() - t0
        r = run(root, args.repeat)

    ratio = r["check_s"] / r["baseline_s"]
    ok_time, ok_ratio = r["check_s"] <= GOAL_SECONDS, ratio <= GOAL_RATIO
    rows = [
        ("pages", f"{r['pages']}", ""),
        ("generate", f"{gen_s:.2f} s", ""),
        ("kwiki check --root (process)", f"{r['check_s']:.2f} s",
         f"goal <= {GOAL_SECONDS:.0f} s: {'met' if ok_time else 'MISSED'}; CPU {r['check_cpu']:.2f} s"),
        (f"yaml loop, {r['loader']} (process)", f"{r['baseline_s']:.2f} s",
         f"read + cut + load every page's front matter; CPU {r['baseline_cpu']:.2f} s"),
        ("  of which yaml.load only", f"{r['yaml_only_s']:.2f} s", ""),
        ("ratio check / yaml loop", f"{ratio:.2f}x", f"goal <= {GOAL_RATIO:.0f}x: {'met' if ok_ratio else 'MISSED'}"),
        ("ratio check / yaml.load only", f"{r['check_s'] / r['yaml_only_s']:.2f}x", "for information"),
    ]
    width = max(len(name) for name, _, _ in rows)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    sys.stdout.write(f"median of {args.repeat} runs, {os.cpu_count()} CPUs, load average {load}, "
                     f"python {sys.version.split()[0]}\n")
    for name, value, note in rows:
        sys.stdout.write(f"{name:<{width}}  {value:>9}  {note}\n")
    sys.stdout.write(f"check said: {r['summary']}\n")
    return 0 if ok_time and ok_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
