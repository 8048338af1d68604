"""`kwiki verify`: parse, run the pipeline (kwiki.verify.pipeline), print the report."""

from __future__ import annotations

import argparse
import sys
import time

from kwiki.verify import tables
from kwiki.verify.pipeline import Report, verify
from kwiki.wiki.catalog import find_root
from kwiki.wiki.verdict import NOT_MEASURED, Verdict


class Progress:
    """One line per step on stderr (silent with --quiet)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.start = time.monotonic()

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(f"[{time.monotonic() - self.start:6.1f}s] {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    progress = Progress(args.quiet)
    report = verify(root, ids=args.pages, tags=args.tag, arch=args.arch, compile_only=args.compile_only,
                    write=not args.no_write, jobs=args.jobs, progress=progress)
    if args.json:
        print(tables.dumps(report.as_json()))
    else:
        _print_human(report)
    return 0 if report.ok else 1


def _print_human(report: Report) -> None:
    for p in report.problems:
        print(p.format())
    measured = [c for c in report.claims if c.verdict not in NOT_MEASURED]
    if measured:
        print(tables.terminal_table(measured))
    why = tables.details(measured)
    if why:
        print("\n" + why)
    not_run: dict[str, int] = {}
    for c in report.claims:
        if c.verdict == Verdict.not_run:
            not_run[c.detail] = not_run.get(c.detail, 0) + 1
    for detail, n in sorted(not_run.items()):
        print(f"{n} claims {detail}")
    built = sum(1 for b in report.builds if b.ok)
    cached = sum(1 for b in report.builds if b.cached)
    runs = sum(len(v) for v in report.outcomes.values())
    counts: dict[str, int] = {}
    for c in report.claims:
        counts[c.verdict.value] = counts.get(c.verdict.value, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"\nkwiki verify: {'ok' if report.ok else 'FAILED'}: {len(report.plan.pages)} pages, "
          f"{len(report.builds)} builds ({built} ok, {cached} cached), {runs} runs; claims: {summary or 'none'}")
    for note in report.notes:
        print(f"  note: {note}")
    if report.written:
        print(f"  wrote {len(report.written)} pages and results/ (run {report.run_id})")
    s = report.seconds
    print(f"  time: {s['total']:.1f} s total, builds {s['build_wall']:.1f} s, runs {s['run']:.1f} s, "
          f"kwiki overhead {s['kwiki_overhead_per_artifact']:.2f} s per artifact")
