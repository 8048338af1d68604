"""`kind: python` artifacts: import-check their module (their "build"), then run kwiki's harness on them.

The harness (artifacts/common/kwiki_harness.py) runs in a process of its own, one per artifact, with the
Python running kwiki. It owns the inputs, the reference comparison and the clock, and prints the records
of kwiki_bench.cuh. This parent judges: the harness writes one event line per call of a variant (and
faulthandler, its watchdog, a "Timeout" line when a call overruns); when the process ends early, the
variant it was calling gets the verdict (a hang: `timeout`; an exception: `exit-error`; a signal:
`crash`) and the harness runs again for the variants that had not finished. Every variant gets a
RunOutcome of its own, so one variant's hang never costs another its figures. The harness talks to a
Referee (kwiki/verify/pyjudge.py) over a Unix socket: it chooses the inputs and the judged samples, keeps a
clock of its own, has the judged samples checked by a process that runs no variant, and writes the records
(the harness's stdout is kept in the log, never read as records).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kwiki.core.errors import Problem, RecordError
from kwiki.core.paths import COMMON_DIR, links_out, shown, within
from kwiki.core.proc import ProcResult, run_group
from kwiki.results.judge import params_match
from kwiki.results.record import Record, parse_records
from kwiki.verify import pyjudge
from kwiki.verify.build import BuildJob
from kwiki.verify.run import RUNS_DIR
from kwiki.verify.types import BuildResult, Plan, PlannedArtifact, RunOutcome, RunStatus
from kwiki.wiki.manifest import HOST, MANIFEST, Manifest

HARNESS = "kwiki_harness.py"
TRITON_CACHE = ".kwiki/triton-cache"  # Triton's compiled kernels: a second verify compiles nothing
DESCRIBE_TIMEOUT_S = 120.0
EXIT_RAISED = 3  # kwiki_harness.EXIT_RAISED


PYTHON_ENV = "KWIKI_PYTHON"  # the Python that runs the harness (default: kwiki's own); it needs torch, not kwiki


def harness(root: Path) -> Path:
    return root / COMMON_DIR / HARNESS


def python() -> str:
    return os.environ.get(PYTHON_ENV) or sys.executable


def harness_argv(root: Path, m: Manifest, build: BuildResult, variants: list[str], device: str,
                 input_sets: int) -> list[str]:
    """`kwiki_harness.py run` over `variants` of the module `build.binary`, with their watchdogs and run.args."""
    assert m.python is not None and build.binary is not None
    timeouts = {v: (m.variant(v).timeout_s or m.python.call_timeout_s) for v in variants}  # type: ignore[union-attr]
    return [python(), str(harness(root)), "run", build.binary, "--device", device, "--input-sets", str(input_sets),
            "--timeouts", json.dumps(timeouts, sort_keys=True), "--call-timeout", str(m.python.call_timeout_s),
            *m.run.args, "--variants", ",".join(variants)]


def environment(root: Path, gpu_index: int | None = None, events: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["TRITON_CACHE_DIR"] = str(root / TRITON_CACHE)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ in artifact directories (they are hashed)
    # torch.compile compiles in the harness's process, not in a pool of workers: protocol 3 fails a case while
    # another process is on the GPU, and no compile worker should look like one
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if gpu_index is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu_index)
    if events is not None:
        env["KWIKI_HARNESS_EVENTS"] = str(events)
    return env


# ---------------------------------------------------------------- the "build": import and contract check


def check_module(job: BuildJob, root: Path) -> BuildResult:
    """Import the artifact's module in a fresh process (no torch needed) and check its contract against
    the manifest; a BuildResult whose `binary` is the module, `not_runnable` set when torch is missing."""
    m = job.manifest
    assert m.python is not None
    module = job.directory / m.python.module
    where = f"{(job.directory / MANIFEST).relative_to(root).as_posix()}: python.module"
    if not within(job.directory, module):  # the containment rule (kwiki/core/paths.py): nothing outside runs
        return BuildResult(job.artifact, job.target, False, False, key="python",
                           error=f"{where}: {m.python.module} is missing or leads out of the artifact's folder")
    # the module's folder and artifacts/common are on its import path: no file there may be a link that leads out
    out = [p for base in (job.directory, root / COMMON_DIR) for p in links_out(root, base)]
    if out:
        return BuildResult(job.artifact, job.target, False, False, key="python",
                           error=f"{shown(out[0], root)}: a link that leads out of the repository (or is broken); "
                                 "a Python artifact imports its folder's and artifacts/common's files, so nothing "
                                 f"of it runs{f' (and {len(out) - 1} more)' if len(out) > 1 else ''}")
    leaving = _links_out(job.directory, root)  # stricter: out of its own folder, dot-names included
    if leaving:  # a helper the module imports, or the harness itself, through a link out of its folder: never run
        return BuildResult(job.artifact, job.target, False, False, key="python",
                           error=f"{where}: {leaving[0]} is a link that leads out of its folder (the containment "
                                 f"rule: every file of a Python artifact's folder and of {COMMON_DIR} stays inside)")
    argv = [python(), str(harness(root)), "describe", str(module)]
    res = run_group(argv, cwd=job.directory, env=environment(root), timeout=DESCRIBE_TIMEOUT_S)
    result = BuildResult(job.artifact, job.target, False, False, key="python", command=argv, seconds=res.seconds)
    try:
        info: dict[str, Any] = json.loads(res.stdout) if res.returncode == 0 else {}
    except ValueError:
        info = {}
    if not info:
        why = res.start_error or ("timed out" if res.timed_out else f"exit {res.returncode}")
        tail = " | ".join(res.stderr.strip().splitlines()[-2:])[:300]
        result.error = f"{where}: the harness could not describe {m.python.module} ({why}){': ' + tail if tail else ''}"
        return result
    if info.get("problems"):
        result.error = f"{where}: {m.python.module}: " + "; ".join(info["problems"])
        return result
    declared = [v.name for v in m.variants]
    listed = list(info.get("variants", []))
    if sorted(declared) != sorted(listed):
        missing = [n for n in declared if n not in listed]
        unknown = [n for n in listed if n not in declared]
        diff = "; ".join(p for p in (f"missing from the module: {', '.join(missing)}" if missing else "",
                                     f"not in the manifest: {', '.join(unknown)}" if unknown else "") if p)
        result.error = f"{root_rel(job, root)}: variants: the module's VARIANTS and the manifest disagree ({diff})"
        return result
    declared_fresh, fresh = m.fresh_inputs, bool(info.get("fresh_inputs"))
    if declared_fresh is not None and (declared_fresh is True) != fresh:
        result.error = (f"{root_rel(job, root)}: fresh_inputs: the manifest says {declared_fresh!r}, the module "
                        f"{'declares' if fresh else 'does not declare'} FRESH_INPUTS = True (they must agree)")
        return result
    result.ok, result.binary = True, str(module)
    result.grid = info.get("grid")
    result.not_runnable = info.get("torch_missing")
    result.log = json.dumps({k: info.get(k) for k in ("torch", "triton", "python", "tolerances")}, sort_keys=True)
    return result


def _links_out(directory: Path, root: Path) -> list[str]:
    """Every link under the artifact's folder, or under artifacts/common, that leads out of it (dot-names included:
    the module could import them by path), as repository paths."""
    out: list[str] = []
    for top in (directory, root / COMMON_DIR):
        for here, dirs, files in os.walk(top):
            for name in [*dirs, *files]:
                path = Path(here) / name
                if path.is_symlink() and not within(top, path):
                    out.append(path.relative_to(root).as_posix())
    return sorted(out)


LIBRARY_ENV = "KWIKI_CUDA_LIBRARY"  # the path of the artifact's CUDA library, for its module (ctypes.CDLL)


def build_library(job: BuildJob, root: Path, module: BuildResult,
                  compile_one: Callable[[BuildJob], BuildResult]) -> BuildResult:
    """The CUDA library a Python artifact's module loads (python.cuda): compiled for the job's target like a CUDA
    artifact (the same cache; no --list-variants: a library is not run), its path kept as `module.library` for the
    SASS gate and the harness. The module's result, failed when the library does not build."""
    build = job.manifest.library_build()
    if build is None or not module.ok or job.target == HOST:
        return module
    lib = compile_one(BuildJob(job.artifact, job.directory, job.manifest.model_copy(update={"build": build}),
                               job.target))
    module.seconds += lib.seconds
    module.kernels = lib.kernels
    if not lib.ok or not lib.binary:
        module.ok = False
        module.error = f"{root_rel(job, root)}: python.cuda: the library did not build: {lib.error}"
        return module
    module.library = lib.binary
    module.cached = lib.cached
    return module


def root_rel(job: BuildJob, root: Path) -> str:
    return (job.directory / MANIFEST).relative_to(root).as_posix()


# ---------------------------------------------------------------- the run: one process, a watchdog per variant


@dataclass
class _Ended:
    """How one harness process ended, read from its events."""

    current: str | None  # the variant it was calling when it ended (None: it finished)
    status: RunStatus
    message: str


def _read_events(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """(the JSON events, whether the watchdog fired)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [], False
    events, timeout = [], False
    for line in text.splitlines():
        if line.startswith("Timeout ("):
            timeout = True
        elif line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events, timeout


def _ended(res: ProcResult, events: list[dict[str, Any]], watchdog: bool, timeout: float) -> _Ended:
    calls = [e["call"] for e in events if "call" in e]
    current = calls[-1] if calls else None
    raised = next((e for e in reversed(events) if "raised" in e), None)
    if any(e.get("done") for e in events) and res.returncode in (0, 1):
        return _Ended(None, "ok", "")
    if raised is not None:
        said = f"raised in its {raised.get('phase')} call: {raised.get('message')}"
        return _Ended(raised["raised"], "exit-error", said)
    if watchdog:
        return _Ended(current, "timeout", "a call overran its watchdog (killed; its other calls were fine)")
    if res.timed_out:
        return _Ended(current, "timeout", f"the harness was killed after {timeout:g} s")
    if res.signal is not None:
        return _Ended(current, "crash", f"died of signal {res.signal}")
    tail = " | ".join(res.stderr.strip().splitlines()[-2:])[:300]
    return _Ended(current, "exit-error", f"exit {res.returncode}" + (f": {tail}" if tail else ""))


def run_python(planned: PlannedArtifact, build: BuildResult, *, gpu_index: int | None, root: Path,
               run_id: str) -> list[RunOutcome]:
    """Run every variant of a Python artifact; one RunOutcome per variant."""
    m = planned.manifest
    assert m is not None and m.python is not None and build.binary is not None
    remaining = [*planned.run_variants, *planned.isolated]
    outcomes: dict[str, RunOutcome] = {}
    log_dir = root / RUNS_DIR / run_id
    log_dir.mkdir(parents=True, exist_ok=True)
    attempt = 0
    while remaining:
        attempt += 1
        events_path = log_dir / f"{m.name}.events{attempt}.jsonl"
        argv = harness_argv(root, m, build, remaining, "cpu" if build.target == HOST else "cuda",
                            m.python.input_sets)
        sustained = [v for v in planned.sustained if v in remaining]  # blocks back to back (protocol 3)
        if sustained:
            argv.append(f"--sustained={','.join(sustained)}")
        env = environment(root, gpu_index if build.target != HOST else None, events_path)
        if build.library:
            env[LIBRARY_ENV] = build.library
        referee = pyjudge.Referee()
        env[pyjudge.CHANNEL_ENV] = referee.path
        try:
            res = run_group(argv, cwd=planned.directory, env=env, timeout=m.run.timeout_s,
                            max_output=m.run.max_output_bytes)
        finally:
            referee.close()
        judged = pyjudge.judge(referee, partial(_run_judge, build, planned, root, env, m.run.timeout_s), log_dir)
        composed = referee.composed()
        log = log_dir / f"{m.name}{'' if attempt == 1 else f'-{attempt}'}.log"
        notes = "".join(f"--- {n}\n" for n in [*referee.problems, judged] if n)
        log.write_text(f"$ {' '.join(argv)}\n--- stdout (not read as records)\n{res.stdout}\n--- stderr\n{res.stderr}\n"
                       f"--- exit {res.returncode} after {res.seconds:.2f} s\n{notes}"
                       f"--- records (written by kwiki from the harness's channel)\n{composed}", encoding="utf-8")
        rel_log = str(log.relative_to(root))
        events, watchdog = _read_events(events_path)
        ended = _ended(res, events, watchdog, m.run.timeout_s)
        try:
            records = parse_records(composed, m.name, m.flops_dtypes)
        except RecordError as exc:
            for v in remaining:
                outcomes[v] = RunOutcome(m.name, build.target, [v], "bad-output", [], res.seconds, rel_log,
                                         exc.message, res.returncode)
            break
        by_variant: dict[str, list[Record]] = {}
        for r in records:
            by_variant.setdefault(r.variant, []).append(r)
        unknown = sorted(set(by_variant) - set(remaining))
        if ended.current is None or ended.current not in remaining:
            # finished (or ended where no variant can be blamed): every variant is judged on this run
            for v in remaining:
                outcomes[v] = _outcome(m.name, build.target, v, by_variant.get(v, []), res, rel_log,
                                       None if ended.status == "ok" else ended)
                if unknown:
                    outcomes[v].status = "bad-output"
                    outcomes[v].message = f"records for variants not asked for: {unknown}"
            break
        culprit = ended.current
        outcomes[culprit] = RunOutcome(m.name, build.target, [culprit], ended.status, by_variant.get(culprit, []),
                                       res.seconds, rel_log, ended.message, res.returncode)
        remaining = [v for v in remaining if v != culprit]  # the others run again, without it
    order = [*planned.run_variants, *planned.isolated]
    return [outcomes[v] for v in order if v in outcomes]


def _run_judge(build: BuildResult, planned: PlannedArtifact, root: Path, env: dict[str, str], timeout: float,
               requests: Path) -> tuple[str, str]:
    """Run `kwiki_harness.py judge` on the judged samples (after the harness ended: one process on the GPU at a
    time); (its stdout, a note for the log)."""
    assert build.binary is not None
    env = {k: v for k, v in env.items() if k != pyjudge.CHANNEL_ENV}
    argv = [python(), str(harness(root)), "judge", build.binary, str(requests),
            "--device", "cpu" if build.target == HOST else "cuda"]
    res = run_group(argv, cwd=planned.directory, env=env, timeout=timeout)
    tail = " | ".join(res.stderr.strip().splitlines()[-3:])[:600]
    note = f"judge: exit {res.returncode} after {res.seconds:.2f} s" + (f": {tail}" if tail and res.returncode else "")
    return res.stdout, note


def _outcome(artifact: str, target: str, variant: str, records: list[Record], res: ProcResult, log: str,
             ended: _Ended | None) -> RunOutcome:
    out = RunOutcome(artifact, target, [variant], "ok", records, res.seconds, log, "", res.returncode)
    failed = [r for r in records if not r.check.passed]
    if ended is not None:
        out.status, out.message = ended.status, ended.message
    elif failed:
        out.status = "check-failed"
        out.message = f"correctness check failed: {failed[0].check.detail or variant}"
    elif not records:
        out.status, out.message = "bad-output", "the harness printed no record for it"
    return out


def not_runnable(plan: Plan, builds: list[BuildResult]) -> list[str]:
    """Mark the Python artifacts whose module imports but cannot run here (no torch): not run, with the
    reason, also under --compile-only. Returns a note per artifact."""
    notes = []
    reasons = {b.artifact: b.not_runnable for b in builds if b.ok and b.not_runnable}
    for a in plan.artifacts.values():
        why = reasons.get(a.build_name)
        if a.manifest is None or a.manifest.kind != "python" or why is None:
            continue
        a.why_not_run = f"{a.why_not_run}; not runnable here: {why}" if a.why_not_run else f"not runnable here: {why}"
        a.run_target = None
        notes.append(f"{a.name}: not runnable here: {why}")
    return sorted(notes)


# ---------------------------------------------------------------- a claim's params against the GRID


def claim_params(the_plan: Plan, builds: list[BuildResult]) -> list[Problem]:
    """Every claim selector of a Python artifact whose variant does not run at any GRID entry its params match: a
    located problem at the claim, found on any machine (the module was described at build time), before a GPU."""
    grids = {b.artifact: b.grid for b in builds if b.ok and b.grid is not None}
    out: list[Problem] = []
    for page in the_plan.pages:
        assert page.meta is not None
        for i, claim in enumerate(page.meta.claims):
            m = claim.measure
            if m is None:
                continue
            for label, sel in (("of", m.of), ("per", m.per)):
                planned = the_plan.artifact_for(page, m.key_of(sel)) if sel is not None else None
                if sel is None or planned is None or planned.manifest is None:
                    continue
                grid = grids.get(planned.manifest.name)
                if grid is None:
                    continue
                runs_at = [e["params"] for e in grid if sel.variant in e["variants"]]
                hits = [p for p in runs_at if params_match(p, sel.params)]
                if len(hits) == 1:
                    continue
                module = f"{planned.path}/{planned.manifest.python.module if planned.manifest.python else ''}"
                why = (f"matches {len(hits)} GRID entries of {module} where it runs ({'; '.join(map(_shown, hits[:3]))}"
                       f"{'; ...' if len(hits) > 3 else ''}): give more params") if hits else (
                    f"matches no GRID entry of {module} where it runs (it runs at {len(runs_at)}: "
                    f"{'; '.join(map(_shown, runs_at[:4])) or 'none'}{'; ...' if len(runs_at) > 4 else ''})")
                where = page.line_of("claims", i, "measure", label, "params") if sel.params else \
                    page.line_of("claims", i, "measure", label, "variant")
                out.append(Problem(page.path, where, f"claims[{i}].measure.{label}.params",
                                   f"variant {sel.variant!r} at params {dict(sel.params)} {why}"))
    return out


def _shown(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))

