"""Nsight Compute sections (stall reasons, throughputs) for the records of a `kwiki verify --profile`, for a person
looking for where a kernel's time goes, on the GPU machine.

    python3 bench/ncu_sections.py PAGE [--variants a,b] [--section WarpStateStats ...] [--out DIR]

kwiki's profile stage asks ncu for the counters its audit needs (bytes, FLOPs, the tensor pipe). This runs the same
stage (`kwiki verify --profile --no-write`: the same command, profile mode, one launch a case behind its marker) with
the named sections collected as well, and copies each artifact's report (the raw page as CSV: one row a kernel, the
sections' metrics among the columns, the pc-sampled stall reasons `smsp__pcsamp_warps_issue_stalled_*` with
SourceCounters) and the harness's records into DIR. Nothing is written to the wiki or the store, and the figures
kwiki reads from the report are the same; a cached profile of the same binaries would skip ncu, so the cache
directory is emptied first. Default sections: SpeedOfLight, WarpStateStats, SourceCounters, SchedulerStats.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
from pathlib import Path

SECTIONS = ["SpeedOfLight", "WarpStateStats", "SourceCounters", "SchedulerStats"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--variants", default=None, help="a,b: only these variants")
    ap.add_argument("--section", action="append", dest="sections", help="an ncu section (repeat); default: "
                    + ", ".join(SECTIONS))
    ap.add_argument("--out", default="ncu-sections", help="where the reports go (default ./ncu-sections)")
    args = ap.parse_args(argv)
    root = Path.cwd()
    sys.path.insert(0, str(root))
    from kwiki.cli import main as kwiki
    from kwiki.verify import profile

    extra = [a for s in (args.sections or SECTIONS) for a in ("--section", s)]
    profile.ncu_argv = functools.partial(profile.ncu_argv, extra=extra)  # the one ncu command line, plus sections
    cache = root / profile.CACHE_DIR
    shutil.rmtree(cache, ignore_errors=True)
    rc = kwiki(["verify", "--profile", "--no-write", *args.pages,
                *(["--variants", args.variants] if args.variants else [])])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logs = sorted(cache.glob("*/*.log")) if cache.is_dir() else []
    for log in logs:
        shutil.copy(log, out / f"{log.parent.name}-{log.name}")
    print(f"ncu_sections: {len(logs)} reports in {out} (kwiki verify --profile exit {rc})")
    return 0 if logs else 1


if __name__ == "__main__":
    sys.exit(main())
