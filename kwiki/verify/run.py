"""Run one artifact's build on one GPU: a process group per run, timeouts, logs, a status each.

The unit of work is (artifact, GPU): a later dispatcher can spread these over GPUs and hosts.
Runs on one GPU never overlap: the caller runs them one after another, inside `gpu_lock`, which
keeps other kwiki processes (other checkouts, other users) off that GPU meanwhile.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kwiki.core import lock
from kwiki.core.errors import RecordError
from kwiki.core.proc import ProcResult, run_group
from kwiki.results.gpu import Gpu
from kwiki.results.record import parse_records
from kwiki.verify.types import BuildResult, IdentityPass, PlannedArtifact, RunOutcome, RunStatus
from kwiki.wiki.manifest import HOST

RUNS_DIR = ".kwiki/runs"
GPU_LOCKS = ".kwiki/gpu-locks"  # this checkout's GPU locks (also held: the machine-wide ones)
GPU_LOCK_DIR_ENV = "KWIKI_GPU_LOCK_DIR"  # where the machine-wide GPU locks live
MACHINE_GPU_LOCKS = "/tmp/kwiki-gpu-locks"
def new_run_id(now: dt.datetime, commit: str | None) -> str:
    """'<UTC date>T<time>Z-<8 random hex>[-<short commit>]': sorts by time, unique even within a second."""
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}" + (f"-{commit}" if commit else "")


@contextmanager
def gpu_lock(gpu: Gpu | None, root: Path, progress: Callable[[str], None]) -> Iterator[None]:
    """Hold `gpu` for timing runs: one kwiki process at a time per GPU, across checkouts and users.

    Takes the machine-wide lock of the GPU (keyed by its UUID, which CUDA_VISIBLE_DEVICES does not
    renumber), then this checkout's. A second process waits, saying for whom. No GPU: no lock.
    """
    if gpu is None:
        yield
        return
    key = re.sub(r"[^A-Za-z0-9_.-]+", "-", gpu.uuid or f"index-{gpu.index}")
    name = f"GPU {gpu.index} ({gpu.name})"
    owner = f"kwiki verify in {root}"

    def waiting(who: str) -> None:
        progress(f"waiting for {name}, held by {who}")

    with ExitStack() as stack:
        machine = Path(os.environ.get(GPU_LOCK_DIR_ENV) or MACHINE_GPU_LOCKS)
        try:
            stack.enter_context(lock.hold(machine / f"{key}.lock", on_wait=waiting, owner=owner, shared_dir=True))
        except OSError as exc:
            progress(f"note: no machine-wide lock for {name} ({machine}: {exc.strerror or exc}); "
                     "only this checkout's lock keeps other runs off it")
        stack.enter_context(lock.hold(root / GPU_LOCKS / f"{key}.lock", on_wait=waiting, owner=owner))
        yield


def command_of(planned: PlannedArtifact, binary: str) -> list[str]:
    """What runs the build: run.command ('{binary}' and '{python}' filled in), else the binary itself."""
    assert planned.manifest is not None
    run = planned.manifest.run
    if run.command:
        return [part.replace("{binary}", binary).replace("{python}", sys.executable) for part in run.command]
    return [binary]


def run_env(build: BuildResult, gpu_index: int | None, run_id: str) -> dict[str, str]:
    """The environment of a run: this GPU alone (a GPU build), and the run's id."""
    env = dict(os.environ)
    if build.target != HOST and gpu_index is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu_index)
    env["KWIKI_RUN_ID"] = run_id
    return env


def argv_for(planned: PlannedArtifact, binary: str, variants: list[str], sweep: bool = False) -> list[str]:
    """The binary's command line: its shapes (with `sweep`, the sweep's sizes), run.args, then the variants."""
    assert planned.manifest is not None
    base = command_of(planned, binary)
    sustained = [v for v in planned.sustained if v in variants]  # blocks back to back (protocol 3)
    shapes = planned.manifest.sweep_args() if sweep else planned.manifest.run_args()
    return [*base, *shapes, "--variants", ",".join(variants),
            *([f"--sustained={','.join(sustained)}"] if sustained else [])]  # shapes, then run.args


# The identity pass of an events-timed run: CUPTI on (the last --timing given wins), a few samples, little time. The
# runner's checks still run (every case checked, its re-checks and tail check), so a variant that fails there fails.
IDENTITY_ARGS = ["--timing=cupti", "--min-samples=1", "--max-samples=3", "--max-seconds=0.05"]


def events_timed(run_args: list[str]) -> bool:
    """Whether a binary given `run_args` times by CUDA events: the last `--timing` wins, as in kwiki_args.cuh, in
    either form (`--timing=events`, `--timing events`)."""
    timing = "cupti"
    for n, a in enumerate(run_args):
        if a.startswith("--timing="):
            timing = a.split("=", 1)[1]
        elif a == "--timing" and n + 1 < len(run_args):
            timing = run_args[n + 1]
    return timing == "events"


def run_artifact(planned: PlannedArtifact, build: BuildResult, *, gpu_index: int | None, root: Path,
                 run_id: str) -> list[RunOutcome]:
    """Run a CUDA artifact: the shared-process variants together, then each isolated variant alone, then the
    sweep (the manifest's `shapes.sweep`: its sizes and `sweep_variants` only, in a process of their own, after
    the ladder's, so that a claim's records are the ladder's). A group timed by CUDA events (`events_timed`) that
    ran cleanly is run once more under CUPTI, its identity pass (`IdentityPass`), for the identity gate. Another
    kind's run is the pipeline's to dispatch (kwiki.verify.pipeline)."""
    assert planned.manifest is not None and build.binary is not None
    outcomes = []
    groups = ([planned.run_variants] if planned.run_variants else []) + [[v] for v in planned.isolated]
    for variants in groups:
        variant = planned.manifest.variant(variants[0])
        timeout = (variant.timeout_s if len(variants) == 1 and variant and variant.timeout_s
                   else planned.manifest.run.timeout_s)
        outcome = _run(planned, build, variants, timeout, gpu_index, root, run_id)
        if outcome.ok and events_timed(planned.manifest.run.args):
            outcome.identity = _identity_pass(planned, build, variants, timeout, gpu_index, root, run_id)
        outcomes.append(outcome)
    entry = planned.manifest.sweep_shapes()
    swept = [v for v in entry.sweep_variants if v in planned.run_variants] if entry is not None else []
    if swept:
        outcomes.append(_run(planned, build, swept, planned.manifest.run.timeout_s, gpu_index, root, run_id,
                             sweep=True))
    return outcomes


def _identity_pass(planned: PlannedArtifact, build: BuildResult, variants: list[str], timeout: float,
                   gpu_index: int | None, root: Path, run_id: str) -> IdentityPass:
    """The group's variants and shapes once more under CUPTI (IDENTITY_ARGS), for the kernels each ran."""
    o = _run(planned, build, variants, timeout, gpu_index, root, run_id, extra=IDENTITY_ARGS, suffix="-identity")
    return IdentityPass(o.status, o.records, o.message, o.seconds, o.log)


def _run(planned: PlannedArtifact, build: BuildResult, variants: list[str], timeout: float,
         gpu_index: int | None, root: Path, run_id: str, sweep: bool = False, extra: list[str] | None = None,
         suffix: str = "") -> RunOutcome:
    assert planned.manifest is not None and build.binary is not None
    name = planned.manifest.name
    env = run_env(build, gpu_index, run_id)
    argv = [*argv_for(planned, build.binary, variants, sweep), *(extra or [])]
    res = run_group(argv, cwd=planned.directory, env=env, timeout=timeout,
                    max_output=planned.manifest.run.max_output_bytes)
    alone = len(variants) == 1 and variants[0] in planned.isolated
    suffix = ("-sweep" if sweep else f"-{variants[0]}" if alone else "") + suffix
    log = write_log(root, run_id, f"{name}{suffix}", res)
    outcome = RunOutcome(name, build.target, variants, "ok", seconds=res.seconds, log=str(log.relative_to(root)),
                         returncode=res.returncode, sweep=sweep)
    tail = stderr_tail(res, root)
    ended = cut_short(res, timeout, planned.manifest.run.max_output_bytes, tail)
    if ended is not None:
        outcome.status, outcome.message = ended
        return outcome
    try:
        outcome.records = parse_records(res.stdout, name, planned.manifest.flops_dtypes)
    except RecordError as exc:
        outcome.status, outcome.message = "bad-output", exc.message
        return outcome
    failed = [r.variant for r in outcome.records if not r.check.passed]
    if failed:
        outcome.status = "check-failed"
        outcome.message = f"correctness check failed: {', '.join(sorted(set(failed)))}"
    elif res.returncode == 2:
        outcome.status, outcome.message = "cuda-error", tail or "exit 2 (CUDA error)"
    elif res.returncode != 0:
        outcome.status, outcome.message = "exit-error", f"exit {res.returncode}" + (f": {tail}" if tail else "")
    else:
        unknown = sorted({r.variant for r in outcome.records} - set(variants))
        if unknown:
            outcome.status, outcome.message = "bad-output", f"records for variants not asked for: {', '.join(unknown)}"
    return outcome


def _tail(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def stderr_tail(res: ProcResult, root: Path) -> str:
    """The last line of a launch's stderr, without the checkout's path (a page never shows a machine's path)."""
    return _tail(res.stderr).replace(f"{root.resolve()}{os.sep}", "")


def cut_short(res: ProcResult, timeout: float, max_output: int, tail: str) -> tuple[RunStatus, str] | None:
    """(status, message) of a launch that did not run to its own end (not started, stopped, killed at its time
    limit or its output bound, died of a signal), None when it exited by itself (whatever its exit code)."""
    if res.start_error:
        return "not-started", res.start_error
    if res.stopped:
        return "not-started", "stopped: kwiki verify was interrupted"
    if res.timed_out:
        return "timeout", f"killed after {timeout:g} s (whole process group)"
    if res.output_overflow:
        return "output-overflow", f"printed more than {max_output} bytes; killed"
    if res.signal is not None:
        return "crash", f"died of signal {res.signal}" + (f": {tail}" if tail else "")
    return None


def write_log(root: Path, run_id: str, stem: str, res: ProcResult) -> Path:
    """A launch's command, output and exit beside the run's other logs: .kwiki/runs/<run>/<stem>.log."""
    log = root / RUNS_DIR / run_id / f"{stem}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ {' '.join(res.argv)}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}\n"
                   f"--- exit {res.returncode} after {res.seconds:.2f} s\n", encoding="utf-8")
    return log
