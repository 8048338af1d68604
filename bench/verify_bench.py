"""Wall time of a cold and a cached `kwiki verify --compile-only` of the whole wiki (issue 3).

    python3 bench/verify_bench.py [--root DIR]

Cold: the build cache (.kwiki/build) is moved aside first; cached: run again with nothing changed.
Prints both, the number of builds, and how many the cached run compiled (goal: none).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(root: Path) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kwiki.cli", "verify", "--compile-only", "--json", "--quiet",
                           "--root", str(root)], capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    try:
        return seconds, json.loads(proc.stdout)
    except ValueError:
        sys.exit(f"verify printed no JSON (exit {proc.returncode}): {proc.stderr[-500:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=ROOT)
    root = parser.parse_args().root.resolve()
    cache = root / ".kwiki" / "build"
    with tempfile.TemporaryDirectory() as aside:
        if cache.exists():
            shutil.move(str(cache), aside)
        try:
            cold, cold_report = run(root)
            warm, warm_report = run(root)
        finally:
            if cache.exists() and Path(aside, "build").exists():
                shutil.rmtree(cache)
                shutil.move(str(Path(aside, "build")), str(cache))
    builds = len(cold_report["builds"])
    failed = [f"{b['artifact']}[{b['target']}]" for b in cold_report["builds"] if not b["ok"]]
    recompiled = sum(1 for b in warm_report["builds"] if not b["cached"])
    print(f"builds: {builds} ({len(failed)} failed{': ' + ', '.join(failed) if failed else ''})")
    print(f"cold  verify --compile-only: {cold:7.2f} s")
    print(f"cached verify --compile-only: {warm:7.2f} s  (compiled {recompiled} of {builds}; goal: 0)")
    return 0 if recompiled == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
