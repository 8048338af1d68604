"""`kwiki verify`: parse, run the pipeline (kwiki.verify.pipeline), print the report."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from kwiki import SCHEMA_VERSION
from kwiki.core.proc import Stopped, stop_on_signals
from kwiki.verify import tables
from kwiki.verify.pipeline import Report, verify
from kwiki.verify.types import Options
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


def options(args: argparse.Namespace) -> Options:
    """The run the arguments ask for."""
    return Options(ids=tuple(args.pages), tags=tuple(args.tag), arch=args.arch, compile_only=args.compile_only,
                   write=not args.no_write, jobs=args.jobs, until_runs=args.until_runs, require_gpu=args.require_gpu,
                   require_disassembler=args.require_disassembler, profile=args.profile,
                   profile_tolerance=args.profile_tolerance, audit=not args.no_audit,
                   list_audits=args.list_audits, sanitize=tuple(args.sanitize or ()),
                   variants=tuple(args.variants or ()), other_gpu=args.other_gpu)


def run(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    progress = Progress(args.quiet)
    if args.task_timeout is not None and not args.ray:
        print("kwiki verify: --task-timeout limits the tasks of --ray; give --ray ADDRESS", file=sys.stderr)
        return 2
    try:
        with stop_on_signals():  # Ctrl-C, SIGTERM, SIGHUP: kill every artifact process, then stop
            if args.ray:
                return _fleet(args, root, progress)
            report = verify(root, options(args), progress)
    except Stopped as exc:
        print(f"kwiki verify: stopped by {exc}; every artifact process it started was killed", file=sys.stderr)
        return 128 + exc.signum
    nothing = report.nothing_verified(compile_only=args.compile_only, until_runs=args.until_runs)
    if args.json:
        doc = report.as_json()
        if nothing:
            doc["ok"] = False
            doc["notes"] = [*doc["notes"], nothing]
        print(tables.dumps(doc))
    else:
        _print_human(report, nothing)
    return 0 if report.ok and not nothing else 1


def _fleet(args: argparse.Namespace, root: Path, progress: Progress) -> int:
    """--ray: one run per GPU model of the cluster, each printed as a local run is (JSON: a list of them)."""
    from kwiki.fleet.verify import verify_on

    with contextlib.redirect_stdout(sys.stderr):  # Ray prints its workers' deaths on stdout: keep it for the report
        reports = verify_on(root, options(args), args.ray, progress, task_timeout_s=args.task_timeout)
    nothing = [r.nothing_verified(compile_only=False, until_runs=args.until_runs) for r in reports]
    ok = all(r.ok for r in reports) and not any(nothing)
    if args.json:
        runs = []
        for report, why in zip(reports, nothing, strict=True):
            doc = report.as_json()
            if why:
                doc["ok"], doc["notes"] = False, [*doc["notes"], why]
            runs.append(doc)
        print(tables.dumps({"schema_version": SCHEMA_VERSION, "ok": ok, "ray": args.ray, "runs": runs}))
    else:
        for report, why in zip(reports, nothing, strict=True):
            print(f"== {report.plan.gpu.name if report.plan.gpu else '?'} (run {report.run_id})")
            _print_human(report, why)
    return 0 if ok else 1


def _print_human(report: Report, nothing: str | None = None) -> None:
    for p in report.problems:
        print(p.format())
    measured = [c for c in report.claims if c.verdict not in NOT_MEASURED]
    if measured:
        print(tables.terminal_table(measured))
    why = tables.details(measured)
    if why:
        print("\n" + why)
    gates = tables.gates_section(report.gating)
    if gates:
        print("\n" + gates)
    not_run: dict[str, int] = {}
    for c in report.claims:
        if c.verdict == Verdict.not_run:
            not_run[c.detail] = not_run.get(c.detail, 0) + 1
    for detail, n in sorted(not_run.items()):
        print(f"{n} claims {detail}")
    _print_not_testable(report)
    built = sum(1 for b in report.builds if b.ok)
    cached = sum(1 for b in report.builds if b.cached)
    runs = sum(len(v) for v in report.outcomes.values())
    counts: dict[str, int] = {}
    for c in report.claims:
        counts[c.verdict.value] = counts.get(c.verdict.value, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    state = "FAILED" if not report.ok else ("NOTHING VERIFIED" if nothing else "ok")
    if report.audits is not None and "missing" in report.audits:
        state = "listed (nothing built or run)"  # --list-audits
    elif state == "ok" and report.plan.gpu is None and not report.plan.compile_only and not runs:
        state = "built only, nothing timed (no GPU here)"  # not "ok": nothing was verified
    print(f"\nkwiki verify: {state}: {len(report.plan.pages)} pages, "
          f"{len(report.builds)} builds ({built} ok, {cached} cached), {runs} runs; claims: {summary or 'none'}")
    for note in [*report.notes, *([nothing] if nothing else [])]:
        print(f"  note: {note}")
    if report.written:
        print(f"  wrote {len(report.written)} pages and results/ (run {report.run_id})")
    s = report.seconds
    if "total" not in s:  # --list-audits: nothing built or run, nothing timed
        return
    stages = "".join(f", {k} {s[k]:.1f} s" for k in ("profile", "sanitize") if k in s)
    overhead = (f"kwiki overhead {s['kwiki_overhead_per_artifact']:.2f} s per artifact" if s["run"] > 0 else
                f"kwiki overhead {s['kwiki_overhead']:.2f} s (SASS checks included; no artifact ran)")
    print(f"  time: {s['total']:.1f} s total, builds {s['build_wall']:.1f} s, runs {s['run']:.1f} s{stages}, "
          f"{overhead}")


NOT_TESTABLE_SHOWN = 3  # claims named per reason; --json lists every one


def _print_not_testable(report: Report) -> None:
    """Which claims are not-testable and why, a few per reason."""
    by_reason: dict[str, list[str]] = {}
    for c in report.claims:
        if c.verdict == Verdict.not_testable:
            reason = (c.detail or "no reason given").rsplit("; ", 1)[-1]  # not the claim's own source
            by_reason.setdefault(reason, []).append(f"{c.page}:{c.claim}")
    for reason, claims in sorted(by_reason.items()):
        shown = ", ".join(claims[:NOT_TESTABLE_SHOWN])
        hidden = len(claims) - NOT_TESTABLE_SHOWN
        more = f" and {hidden} more (--json lists them)" if hidden > 0 else ""
        print(f"{len(claims)} not-testable ({reason}): {shown}{more}")
