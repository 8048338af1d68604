"""Nsight Compute sections (stall reasons, throughputs, per-instruction stall samples) for the records of a
`kwiki verify --profile`, for a person looking for where a kernel's time goes, on the GPU machine.

    python3 bench/ncu_sections.py PAGE [PAGE ...] [--variants a,b] [--section WarpStateStats ...] [--out DIR]

kwiki's profile stage asks ncu for the counters its audit needs (bytes, FLOPs, the tensor pipe). This runs the same
stage (`kwiki verify --profile --no-write`: the same command, profile mode, one launch a case behind its marker) with
the named sections collected as well and each artifact's ncu report exported to DIR (`<artifact>-<n>.ncu-rep`), then
writes two CSVs beside each report with `ncu --import`: `.raw.csv`, one row a kernel with every collected metric (the
pc-sampled stall reasons `smsp__pcsamp_warps_issue_stalled_*` among them, with SourceCounters), and `.sass.csv`, the
SASS of each kernel with its stall samples an instruction (where a wait, a fence or a poll loop spends the time).
The kwiki log of each run (its records, which name each marker's case) is copied there too. Nothing is written to
the wiki or the store; a cached profile of the same binaries would skip ncu, so the profile cache is emptied first.
Default sections: SpeedOfLight, WarpStateStats, SourceCounters, SchedulerStats.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SECTIONS = ["SpeedOfLight", "WarpStateStats", "SourceCounters", "SchedulerStats"]
PAGES = {"raw.csv": ["--page", "raw", "--csv"], "sass.csv": ["--page", "source", "--csv", "--print-source", "sass"]}


def with_sections(ncu_argv: Any, sections: list[str], out: Path) -> Any:
    """kwiki's ncu command line, plus the sections and an exported report named after the artifact (the folder of
    kwiki's log file: .kwiki/profile/<artifact>/...)."""

    @functools.wraps(ncu_argv)
    def argv(ncu: str, app: list[str], **kw: Any) -> list[str]:
        name = Path(kw["log_file"]).parent.name
        extra = [*(kw.pop("extra", None) or []), *(a for s in sections for a in ("--section", s)),
                 "--export", str(out / f"{name}-%i"), "--force-overwrite"]
        return ncu_argv(ncu, app, extra=extra, **kw)
    return argv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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
    from kwiki.verify.ncu import find_ncu

    ncu = find_ncu()
    if ncu is None:
        print("ncu_sections: Nsight Compute (ncu) not found: set KWIKI_NCU or put ncu on the PATH", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    profile.ncu_argv = with_sections(profile.ncu_argv, args.sections or SECTIONS, out)
    cache = root / profile.CACHE_DIR
    shutil.rmtree(cache, ignore_errors=True)
    rc = kwiki(["verify", "--profile", "--no-write", *args.pages,
                *(["--variants", args.variants] if args.variants else [])])
    logs = sorted(cache.glob("*/*.log")) if cache.is_dir() else []
    for log in logs:
        shutil.copy(log, out / f"{log.parent.name}-{log.name}")
    reports = sorted(out.glob("*.ncu-rep"))
    for rep in reports:
        for suffix, page in PAGES.items():
            res = subprocess.run([ncu, "--import", str(rep), *page], capture_output=True, text=True, timeout=600)
            (out / f"{rep.stem}.{suffix}").write_text(res.stdout + res.stderr, encoding="utf-8")
    print(f"ncu_sections: {len(reports)} reports and {len(logs)} kwiki logs in {out} "
          f"(kwiki verify --profile exit {rc})")
    return 0 if reports else 1


if __name__ == "__main__":
    sys.exit(main())
